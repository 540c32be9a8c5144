import { readFile } from 'node:fs/promises';
import { Tokenizer } from '@huggingface/tokenizers';
import { ATTR, Code, DiffmeshError, type StageContext, type StageResult, type StageTask } from '@diffmesh/core';
import type { OnnxComponentName } from '@diffmesh/model-layout';
import {
  OnnxStage,
  ort,
  type LoadedManifest,
  type LoadedModelDirectory,
  type OnnxStageDeps,
  type ResolvedModel,
  type SessionVariant,
} from '@diffmesh/stage-host';
import { toBytes } from '@diffmesh/tensor-client';
import { encodeWithDirectory } from './directory-text-encoder.js';
import type { TextEncoderAdapters } from './text-encoder-adapters.js';
import { loadTokenizer, type PromptTokenizer } from './tokenizers/index.js';

export interface TextEncodingStageOptions extends OnnxStageDeps {
  /**
   * The stage this instance serves: `text_encoding` (default; the built-in models' encoder and
   * a directory's first text encoders) or `text_encoding_2` (a directory's second encoder:
   * SDXL's CLIP-G, FLUX's and SD3's T5).
   */
  stage?: 'text_encoding' | 'text_encoding_2';
  /**
   * LoRA adapters of model directories' text encoders (`--lora-dir`): the text-encoder part of
   * the files requests name. Without, a request's adapters reach the denoiser only, and the
   * result says so in a warning.
   */
  adapters?: TextEncoderAdapters;
}

/**
 * The `text_encoding` (and `text_encoding_2`) stage. Built-in models: tokenises the prompt and
 * the negative prompt (padded or cut to the model's text length) and runs the text encoder once
 * for both; outputs `prompt_embeds` and `negative_prompt_embeds`, each [1, L, D]. Model
 * directories: the encoders the diffusers pipeline runs in this stage (see
 * `encodeWithDirectory`), with truncation reported in the result's warnings.
 */
export class TextEncodingStage extends OnnxStage {
  readonly stage: 'text_encoding' | 'text_encoding_2';
  protected readonly modelFile = 'textEncoder' as const;
  private readonly tokenizers = new Map<string, Promise<Tokenizer>>();
  private readonly dirTokenizers = new Map<string, Promise<PromptTokenizer>>();
  private readonly loras: TextEncoderAdapters | undefined;

  constructor(opts: TextEncodingStageOptions) {
    super(opts);
    this.stage = opts.stage ?? 'text_encoding';
    this.loras = opts.adapters;
  }

  /** With adapters, the text encoders' sessions are their LoRA-branched graphs. */
  protected override sessionVariant(directory: LoadedModelDirectory, component: OnnxComponentName): SessionVariant | undefined {
    return this.loras?.variant(directory, component);
  }

  override async warm(model: string, opts: { run?: boolean } = {}): Promise<void> {
    const m = await this.deps.catalog.resolve(model);
    if (m.kind === 'directory') {
      const layout = m.directory.layout;
      const specs = layout.textEncoders.filter((t) => t.stage === this.stage);
      await Promise.all([super.warm(model, opts), ...specs.map((t) => this.dirTokenizer(layout.tokenizers[t.tokenizer] as string))]);
      return;
    }
    this.requireDefaultStage(model);
    await Promise.all([super.warm(model, opts), this.tokenizer(m.manifest)]);
  }

  /** The prompt and the negative prompt at the text length. */
  protected override warmDims(m: ResolvedModel): Record<string, number> {
    if (m.kind === 'manifest') return { batch: 2, length: m.manifest.manifest.text.maxLength };
    const spec = m.directory.layout.textEncoders.find((t) => t.stage === this.stage);
    // LoRA branches (with --lora-dir) warm at rank 1, as a request without adapters runs them,
    // for the batch the ids take (a graph with a fixed batch runs one text at a time).
    const ids = spec ? m.directory.input(spec.component, 'input_ids') : undefined;
    const batch = typeof ids?.shape?.[0] === 'number' ? ids.shape[0] : 2;
    return { batch: 2, sequence_length: spec?.maxLength ?? 77, lora_batch: batch, lora_rank: 1 };
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
    const resolved = await this.deps.catalog.resolve(task.model);
    if (resolved.kind === 'directory') {
      const result = await encodeWithDirectory(
        {
          sessions: this.deps.sessions,
          store: this.deps.store,
          tokenizer: (dir) => this.dirTokenizer(dir),
          runModel: (attributes, run) => this.runModel(attributes, run),
          ...(this.loras ? { adapters: this.loras } : {}),
        },
        resolved.directory,
        task,
        ctx.signal,
      );
      ctx.onProgress({ step: 1, totalSteps: 1 });
      return result;
    }
    this.requireDefaultStage(task.model);
    const m = resolved.manifest;
    const L = m.manifest.text.maxLength;
    const ids = new BigInt64Array(2 * L);
    ids.set(await this.tokenize(task.model, task.params.prompt), 0);
    ids.set(await this.tokenize(task.model, task.params.negativePrompt), L);
    ctx.signal.throwIfAborted();
    const session = await this.deps.sessions.get(m.file('textEncoder'));
    // One run encodes the prompt and the negative prompt together: batch size 2.
    const result = await this.runModel({ [ATTR.model]: task.model, [ATTR.batchSize]: 2 }, () =>
      session.run({ input_ids: new ort.Tensor('int64', ids, [2, L]) }, { signal: ctx.signal, transfer: true }),
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

  /** Built-in models have one text encoder: only `text_encoding` serves them. */
  private requireDefaultStage(model: string): void {
    if (this.stage !== 'text_encoding') {
      throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `stage: model "${model}" has no ${this.stage} stage`, {
        metadata: { field: 'stage' },
      });
    }
  }

  private dirTokenizer(dir: string): Promise<PromptTokenizer> {
    let t = this.dirTokenizers.get(dir);
    if (!t) {
      t = loadTokenizer(dir);
      t.catch(() => this.dirTokenizers.delete(dir));
      this.dirTokenizers.set(dir, t);
    }
    return t;
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
