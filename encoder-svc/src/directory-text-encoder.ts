import { ATTR, Code, DiffmeshError, type ObjectRef, type StageResult, type StageTask } from '@diffmesh/core';
import { sequenceOutputName, type TextEncoderSpec } from '@diffmesh/model-layout';
import { feedTensor, floatOutput, type LoadedModelDirectory, type ModelOutputs, type ort, type SessionCache } from '@diffmesh/stage-host';
import { toBytes, type TensorStore } from '@diffmesh/tensor-client';
import type { AdapterUse } from '@diffmesh/adapters';
import { isLoraEncoder, type TextEncoderAdapters } from './text-encoder-adapters.js';
import type { PromptTokenizer, TokenizedPrompt } from './tokenizers/index.js';

/** What the directory text encoder needs from its stage. */
export interface DirectoryTextEncoderDeps {
  sessions: SessionCache;
  store: TensorStore;
  tokenizer(dir: string): Promise<PromptTokenizer>;
  runModel<T>(attributes: Record<string, string | number>, run: () => Promise<T>): Promise<T>;
  /** The text-encoder part of the request's LoRA adapters (`--lora-dir`); without, adapters are left to the denoiser. */
  adapters?: TextEncoderAdapters;
}

/** What the encoders of one task run with: the request's adapters, when the stage applies them. */
interface EncoderLora {
  adapters: TextEncoderAdapters;
  uses: AdapterUse[];
}

/**
 * Encodes a request's prompts with the text encoders a diffusers pipeline runs in one plan
 * stage (`text_encoding` or `text_encoding_2`; see `TextEncoderSpec`), as the pipeline's
 * `encode_prompt` does: tokens padded and cut to the encoder's length, the negative prompt only
 * when classifier-free guidance is on (never when SDXL zeroes an empty one), the sequence output
 * (`last_hidden_state` or the penultimate hidden states) and the pooled output the denoiser
 * takes. Outputs are float32 objects named `[negative_][pooled_]prompt_embeds{suffix}`; a prompt
 * cut by the tokenizer is reported in the result's warnings. With adapters, the text-encoder part
 * of the request's LoRA files is applied to the prompt and the negative prompt alike (as
 * diffusers' pipelines do once the weights are loaded).
 */
export async function encodeWithDirectory(
  deps: DirectoryTextEncoderDeps,
  directory: LoadedModelDirectory,
  task: StageTask,
  signal: AbortSignal,
): Promise<StageResult> {
  const layout = directory.layout;
  const specs = layout.textEncoders.filter((t) => t.stage === task.stage);
  if (specs.length === 0) {
    throw new DiffmeshError(
      Code.INVALID_ARGUMENT,
      'INVALID_PARAMETER',
      `stage: the ${layout.pipelineClass || layout.kind} model ${layout.dir} has no ${task.stage} stage`,
      { metadata: { field: 'stage' } },
    );
  }
  const p = task.params;
  const cfg = layout.guidance === 'cfg' && p.guidanceScale > 1;
  const zeroNegative = layout.forceZerosForEmptyPrompt && p.negativePrompt === '';
  const texts = cfg && !zeroNegative ? [p.prompt, p.negativePrompt] : [p.prompt];
  const outputs: Record<string, ObjectRef> = {};
  const warnings: string[] = [];
  let lora: EncoderLora | undefined;
  if (deps.adapters) lora = { adapters: deps.adapters, uses: await deps.adapters.resolve(p, directory, task.stage) };
  else if (p.adapters?.length && specs.some((s) => isLoraEncoder(s.component))) {
    warnings.push(
      `adapters: this ${task.stage} stage serves no adapters (start it with --lora-dir); text-encoder weights of ${p.adapters.map((a) => a.name).join(', ')}, if any, are not applied`,
    );
  }
  for (const spec of specs) {
    const tokenizerDir = layout.tokenizers[spec.tokenizer] as string;
    const tok = await deps.tokenizer(tokenizerDir);
    // The pipeline's length (T5), else the tokenizer's model_max_length, else the encoder's
    // max_position_embeddings (a tokenizer folder without tokenizer_config.json).
    const positions = Number(layout.components[spec.component]?.config.max_position_embeddings);
    const maxLength = spec.maxLength ?? tok.maxLength ?? (Number.isInteger(positions) && positions > 0 ? positions : undefined);
    const encoded = texts.map((t) => tok.encode(t, maxLength === undefined ? {} : { maxLength }));
    encoded.forEach((e, i) => {
      if (e.truncated) warnings.push(truncationWarning(spec, i === 0 ? 'prompt' : 'negative_prompt', e));
    });
    signal.throwIfAborted();
    const results = await runEncoder(deps, directory, { spec, stage: task.stage, lora }, encoded, task.model, signal);
    const io = directory.io(spec.component);
    const seqName = sequenceOutputName(spec, io);
    const put = async (name: string, data: Float32Array, shape: number[]) => {
      outputs[name] = await deps.store.put({ requestId: task.reqId, name, data: toBytes(data), shape, dtype: 'float32' });
    };
    for (let i = 0; i < texts.length; i += 1) {
      const prefix = i === 0 ? '' : 'negative_';
      if (seqName) {
        const { data, dims } = results[i][seqName];
        await put(`${prefix}prompt_embeds${spec.suffix}`, data, [1, dims[1], dims[2]]);
      }
      if (spec.pooled) {
        const { data, dims } = results[i][spec.pooled];
        await put(`${prefix}pooled_prompt_embeds${spec.suffix}`, data, [1, dims[1]]);
      }
    }
  }
  return { outputs, ...(warnings.length > 0 ? { warnings } : {}) };
}

/** One float32 output of one text: the values of batch item `i` and the output's dims (batch 1). */
type EncoderOutputs = Record<string, { data: Float32Array; dims: number[] }>;

/**
 * Runs the encoder once for all texts when its `input_ids` take a dynamic batch, else once per
 * text; returns each text's outputs.
 */
async function runEncoder(
  deps: DirectoryTextEncoderDeps,
  directory: LoadedModelDirectory,
  run: { spec: TextEncoderSpec; stage: string; lora: EncoderLora | undefined },
  encoded: TokenizedPrompt[],
  model: string,
  signal: AbortSignal,
): Promise<EncoderOutputs[]> {
  const { spec, lora } = run;
  const component = spec.component;
  const branched = lora !== undefined && isLoraEncoder(component);
  const session = await directory.session(deps.sessions, component, lora?.adapters.variant(directory, component));
  const idsInput = directory.input(spec.component, 'input_ids');
  const idsType = idsInput?.type ?? 'int64';
  const batched = typeof idsInput?.shape?.[0] !== 'number';
  const groups = batched ? [encoded] : encoded.map((e) => [e]);
  const wanted = new Set(directory.io(spec.component).outputs.map((o) => o.name));
  const out: EncoderOutputs[] = [];
  for (const group of groups) {
    const L = group[0].ids.length;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: feedTensor(
        idsType,
        group.flatMap((e) => e.ids),
        [group.length, L],
      ),
    };
    // The LoRA branches' inputs: every text of the group with the request's adapters (zeros for none).
    if (branched) {
      Object.assign(feeds, await lora.adapters.feeds(directory, run.stage, component, lora.uses, group.length));
    }
    const result: ModelOutputs = await deps.runModel(
      { [ATTR.model]: model, [ATTR.batchSize]: group.length, component: spec.component },
      () => session.run(feeds, { signal }),
    );
    group.forEach((_, b) => {
      const item: EncoderOutputs = {};
      for (const [name, tensor] of Object.entries(result)) {
        if (!wanted.has(name) || (tensor.type !== 'float32' && tensor.type !== 'float16')) continue;
        const dims = [...tensor.dims];
        const per = dims.slice(1).reduce((a, d) => a * d, 1);
        item[name] = { data: floatOutput(tensor).slice(b * per, (b + 1) * per), dims: [1, ...dims.slice(1)] };
      }
      out.push(item);
    });
  }
  return out;
}

function truncationWarning(spec: TextEncoderSpec, field: 'prompt' | 'negative_prompt', e: TokenizedPrompt): string {
  return (
    `${field}: cut to ${e.ids.length} tokens for ${spec.component} (${spec.family === 't5' ? 'T5' : 'CLIP'}); ` +
    `${e.droppedTokens} token${e.droppedTokens === 1 ? '' : 's'} dropped: "${e.droppedText}"`
  );
}
