import { readFile } from 'node:fs/promises';
import { Tokenizer } from '@huggingface/tokenizers';
import {
  ATTR,
  OnnxStage,
  ort,
  toBytes,
  type LoadedManifest,
  type StageContext,
  type StageResult,
  type StageTask,
  type OnnxStageDeps,
} from '@diffmesh/runtime';

export type TextEncodingStageOptions = OnnxStageDeps;

/**
 * The `text_encoding` stage: tokenises the prompt and the negative prompt (padded or cut to
 * the model's text length) and runs the text encoder once for both. Outputs
 * `prompt_embeds` and `negative_prompt_embeds`, each [1, L, D].
 */
export class TextEncodingStage extends OnnxStage {
  readonly stage = 'text_encoding' as const;
  protected readonly modelFile = 'textEncoder' as const;
  private readonly tokenizers = new Map<string, Promise<Tokenizer>>();

  override async warm(model: string): Promise<void> {
    await Promise.all([super.warm(model), this.deps.catalog.get(model).then((m) => this.tokenizer(m))]);
  }

  /** Token ids of `text`, padded with the model's pad id or cut to its text length. */
  async tokenize(model: string, text: string): Promise<BigInt64Array> {
    const m = await this.deps.catalog.get(model);
    const tok = await this.tokenizer(m);
    const { maxLength, padId } = m.manifest.text;
    const ids = text.trim() === '' ? [] : tok.encode(text).ids;
    const out = new BigInt64Array(maxLength).fill(BigInt(padId));
    for (let i = 0; i < Math.min(ids.length, maxLength); i += 1) out[i] = BigInt(ids[i]);
    return out;
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const m = await this.deps.catalog.get(task.model);
    const L = m.manifest.text.maxLength;
    const ids = new BigInt64Array(2 * L);
    ids.set(await this.tokenize(task.model, task.params.prompt), 0);
    ids.set(await this.tokenize(task.model, task.params.negativePrompt), L);
    ctx.signal.throwIfAborted();
    const session = await this.deps.sessions.get(m.file('textEncoder'));
    // One run encodes the prompt and the negative prompt together: batch size 2.
    const result = await this.runModel({ [ATTR.model]: task.model, [ATTR.batchSize]: 2 }, () =>
      session.run({ input_ids: new ort.Tensor('int64', ids, [2, L]) }),
    );
    const hidden = result.last_hidden_state;
    const data = hidden.data as Float32Array;
    const D = hidden.dims[2];
    const put = (name: string, part: Float32Array) =>
      this.deps.store.put({ requestId: task.reqId, name, data: toBytes(part), shape: [1, L, D], dtype: 'float32' });
    const [prompt, negative] = await Promise.all([
      put('prompt_embeds', data.subarray(0, L * D)),
      put('negative_prompt_embeds', data.subarray(L * D, 2 * L * D)),
    ]);
    ctx.onProgress({ step: 1, totalSteps: 1 });
    return { outputs: { prompt_embeds: prompt, negative_prompt_embeds: negative } };
  }

  private tokenizer(m: LoadedManifest): Promise<Tokenizer> {
    const file = m.file('tokenizer');
    let t = this.tokenizers.get(file);
    if (!t) {
      t = readFile(file, 'utf8').then((json) => new Tokenizer(JSON.parse(json) as object, {}));
      t.catch(() => this.tokenizers.delete(file));
      this.tokenizers.set(file, t);
    }
    return t;
  }
}
