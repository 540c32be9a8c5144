import type { DiffmeshError } from '@diffmesh/core';
import type { DiffusersLayout, JsonObject, OnnxComponent, OnnxComponentName, TextEncoderSpec } from './diffusers-layout.js';
import { layoutError } from './layout-error.js';
import { formatShape, readGraphIo, type GraphIo, type GraphValue, type OnnxElementType } from './onnx-graph-io.js';

/** The graphs' inputs and outputs by component, checked against what the pipeline needs. */
export type DirectoryGraphs = Partial<Record<OnnxComponentName, GraphIo>>;

const FLOATS: OnnxElementType[] = ['float32', 'float16'];
const IDS: OnnxElementType[] = ['int32', 'int64'];
const TIMESTEPS: OnnxElementType[] = ['int64', 'int32', 'float32', 'float16'];

/** What one component's graph must take and give. */
interface Requirement {
  inputs: [name: string, types: OnnxElementType[]][];
  outputs: [name: string, types: OnnxElementType[]][];
}

/**
 * Reads every ONNX graph's inputs and outputs (names, element types, shapes; no weights) and
 * checks them against the pipeline: every input the pipeline feeds and output it reads is
 * there with a usable type, the text encoders' widths fit the denoiser's
 * `encoder_hidden_states` / `text_embeds` / `pooled_projections`, and the denoiser's latent
 * channels fit the VAE. Throws FAILED_PRECONDITION / MODEL_LOAD_FAILED naming the file and the
 * input or output. `only` limits the check to some components (the rest are not read).
 */
export async function checkDirectoryGraphs(layout: DiffusersLayout, only?: readonly OnnxComponentName[]): Promise<DirectoryGraphs> {
  const graphs: DirectoryGraphs = {};
  const wanted = Object.values(layout.components).filter((c) => !only || only.includes(c.name));
  for (const c of wanted) {
    try {
      graphs[c.name] = await readGraphIo(c.model);
    } catch (err) {
      throw layoutError(layout.dir, c.file, (err as Error).message.replace(`${c.model}: `, ''), { cause: err });
    }
  }
  for (const c of wanted) checkRequirement(layout, c, graphs[c.name] as GraphIo, requirementOf(layout, c.name, graphs));
  checkWidths(layout, graphs);
  return graphs;
}

/** The name of a text encoder's sequence output: `last_hidden_state` or the penultimate `hidden_states.{N−1}`. */
export function sequenceOutputName(spec: TextEncoderSpec, io: GraphIo): string | undefined {
  if (spec.sequence === 'last_hidden_state') return 'last_hidden_state';
  if (spec.sequence !== 'penultimate') return undefined;
  const layers = io.outputs.map((o) => /^hidden_states\.(\d+)$/.exec(o.name)).filter((m) => m !== null);
  if (layers.length === 0) return undefined;
  const last = Math.max(...layers.map((m) => Number(m[1])));
  return last >= 1 ? `hidden_states.${last - 1}` : undefined;
}

function requirementOf(layout: DiffusersLayout, name: OnnxComponentName, graphs: DirectoryGraphs): Requirement {
  const spec = layout.textEncoders.find((t) => t.component === name);
  if (spec) {
    const io = graphs[name] as GraphIo;
    const outputs: Requirement['outputs'] = [];
    if (spec.sequence) {
      const seq = sequenceOutputName(spec, io);
      outputs.push([seq ?? 'hidden_states.N (the hidden states of every layer, exported with output_hidden_states)', FLOATS]);
    }
    if (spec.pooled) outputs.push([spec.pooled, FLOATS]);
    return { inputs: [['input_ids', IDS]], outputs };
  }
  switch (name) {
    case 'unet': {
      const inputs: Requirement['inputs'] = [
        ['sample', FLOATS],
        ['timestep', TIMESTEPS],
        ['encoder_hidden_states', FLOATS],
      ];
      if (layout.kind === 'sdxl') inputs.push(['text_embeds', FLOATS], ['time_ids', FLOATS]);
      if (layout.guidance === 'embedded') inputs.push(['timestep_cond', FLOATS]);
      return { inputs, outputs: [[firstOutput(graphs.unet, 'out_sample'), FLOATS]] };
    }
    case 'transformer': {
      const inputs: Requirement['inputs'] = [
        ['hidden_states', FLOATS],
        ['encoder_hidden_states', FLOATS],
        ['pooled_projections', FLOATS],
        ['timestep', TIMESTEPS],
      ];
      if (layout.kind === 'flux') {
        inputs.push(['img_ids', [...FLOATS, ...IDS]], ['txt_ids', [...FLOATS, ...IDS]]);
        if (layout.guidance === 'embedded') inputs.push(['guidance', FLOATS]);
      }
      return { inputs, outputs: [[firstOutput(graphs.transformer, 'out_hidden_states'), FLOATS]] };
    }
    case 'vae_decoder':
      return { inputs: [['latent_sample', FLOATS]], outputs: [[firstOutput(graphs.vae_decoder, 'sample'), FLOATS]] };
    case 'vae_encoder':
      return { inputs: [['sample', FLOATS]], outputs: [[firstOutput(graphs.vae_encoder, 'latent_parameters'), FLOATS]] };
    default:
      return { inputs: [], outputs: [] };
  }
}

/** The graph's first output (the one the pipelines read by position), or `fallback` for the message. */
function firstOutput(io: GraphIo | undefined, fallback: string): string {
  return io?.outputs[0]?.name ?? fallback;
}

function checkRequirement(layout: DiffusersLayout, c: OnnxComponent, io: GraphIo, req: Requirement): void {
  const list = (values: GraphValue[]) => values.map((v) => v.name).join(', ') || '(none)';
  for (const [name, types] of req.inputs) {
    const v = io.inputs.find((i) => i.name === name);
    if (!v) {
      throw layoutError(
        layout.dir,
        c.file,
        `input "${name}" is missing (graph inputs: ${list(io.inputs)}); ${pipelineName(layout)} feeds it`,
        { input: name },
      );
    }
    if (!types.includes(v.type)) {
      throw layoutError(layout.dir, c.file, `input "${name}" is ${v.type}; expected ${types.join(' or ')}`, { input: name });
    }
  }
  for (const [name, types] of req.outputs) {
    const v = io.outputs.find((o) => o.name === name);
    if (!v) {
      throw layoutError(
        layout.dir,
        c.file,
        `output "${name}" is missing (graph outputs: ${list(io.outputs)}); ${pipelineName(layout)} reads it`,
        { input: name },
      );
    }
    if (!types.includes(v.type)) {
      throw layoutError(layout.dir, c.file, `output "${name}" is ${v.type}; expected ${types.join(' or ')}`, { input: name });
    }
  }
}

/** `StableDiffusionPipeline`, or `the sd pipeline` when model_index.json names none. */
function pipelineName(layout: DiffusersLayout): string {
  return layout.pipelineClass || `the ${layout.kind} pipeline`;
}

/** A value's size along `axis` when the graph fixes it. */
function dim(v: GraphValue | undefined, axis: number): number | undefined {
  const d = v?.shape?.[axis < 0 ? (v.shape?.length ?? 0) + axis : axis];
  return typeof d === 'number' && d > 0 ? d : undefined;
}

/** A width, with where it comes from, for messages. */
interface Width {
  size: number;
  what: string;
  file: string;
  input: string;
}

function numberIn(cfg: JsonObject, key: string): number | undefined {
  const v = cfg[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** The width of a graph value along its last axis, else of a config field. */
function width(
  layout: DiffusersLayout,
  graphs: DirectoryGraphs,
  component: OnnxComponentName,
  kind: 'input' | 'output',
  name: string,
  configKeys: string[],
): Width | undefined {
  const c = layout.components[component];
  if (!c) return undefined;
  const io = graphs[component];
  const v = io ? (kind === 'input' ? io.inputs : io.outputs).find((x) => x.name === name) : undefined;
  const fromGraph = dim(v, -1);
  if (fromGraph !== undefined) {
    return { size: fromGraph, what: `${c.file} ${kind} "${name}" ${formatShape(v?.shape)}`, file: c.file, input: name };
  }
  for (const key of configKeys) {
    const n = numberIn(c.config, key);
    if (n !== undefined) return { size: n, what: `${c.name}/config.json "${key}" (${n})`, file: c.file, input: name };
  }
  return undefined;
}

function mismatch(layout: DiffusersLayout, parts: Width[], target: Width, what: string): DiffmeshError {
  const from = parts.map((p) => p.what).join(' + ');
  const sum = parts.reduce((a, p) => a + p.size, 0);
  return layoutError(
    layout.dir,
    target.file,
    `hidden size mismatch: ${what} ${from} ${parts.length > 1 ? 'give' : 'gives'} ${sum} features, but ${target.what} takes ${target.size}`,
    { input: target.input },
  );
}

function checkWidths(layout: DiffusersLayout, graphs: DirectoryGraphs): void {
  const den = layout.denoiser.name;
  const seqParts: Width[] = [];
  const pooledParts: Width[] = [];
  for (const spec of layout.textEncoders) {
    const io = graphs[spec.component];
    if (!io) continue;
    if (spec.sequence) {
      const name = sequenceOutputName(spec, io) ?? 'last_hidden_state';
      const w = width(layout, graphs, spec.component, 'output', name, ['hidden_size', 'd_model']);
      if (w) seqParts.push(w);
    }
    if (spec.pooled) {
      const w = width(
        layout,
        graphs,
        spec.component,
        'output',
        spec.pooled,
        spec.pooled === 'text_embeds' ? ['projection_dim'] : ['hidden_size'],
      );
      if (w) pooledParts.push(w);
    }
  }
  if (!graphs[den] && seqParts.length === 0) return;
  const encoders = layout.textEncoders.filter((t) => graphs[t.component]).length;
  const allEncoders = encoders === layout.textEncoders.length;
  const ehs = width(layout, graphs, den, 'input', 'encoder_hidden_states', ['cross_attention_dim', 'joint_attention_dim']);
  if (ehs && allEncoders && seqParts.length > 0) {
    if (layout.kind === 'sd3') {
      // CLIP-L ‖ CLIP-G are zero-padded to the T5 width; T5 rows follow.
      const clip = seqParts.slice(0, 2);
      const t5 = seqParts[2];
      if (t5 && t5.size !== ehs.size) throw mismatch(layout, [t5], ehs, 'the T5 encoder');
      if (clip.reduce((a, p) => a + p.size, 0) > ehs.size) throw mismatch(layout, clip, ehs, 'the CLIP encoders');
    } else if (seqParts.reduce((a, p) => a + p.size, 0) !== ehs.size) {
      throw mismatch(layout, seqParts, ehs, seqParts.length > 1 ? 'the text encoders' : 'the text encoder');
    }
  }
  // SDXL's UNet takes the pooled embeddings as `text_embeds` (its config holds only the summed
  // width of text_embeds and time_ids, so only the graph's width is compared).
  const pooledInput = layout.kind === 'sdxl' ? 'text_embeds' : 'pooled_projections';
  const pooledKeys = layout.kind === 'sdxl' ? [] : ['pooled_projection_dim'];
  const pooled = layout.kind === 'sd' ? undefined : width(layout, graphs, den, 'input', pooledInput, pooledKeys);
  if (pooled && allEncoders && pooledParts.length > 0 && pooledParts.reduce((a, p) => a + p.size, 0) !== pooled.size) {
    throw mismatch(layout, pooledParts, pooled, 'the pooled text embeddings of');
  }
  // Latent channels: UNet/SD3 take [B, C, h, w]; FLUX packs 2×2 into [B, S, 4·C].
  const dec = graphs.vae_decoder?.inputs.find((i) => i.name === 'latent_sample');
  const decC = dim(dec, 1);
  const denIo = graphs[den];
  if (denIo && decC !== undefined) {
    const sampleName = den === 'unet' ? 'sample' : 'hidden_states';
    const sample = denIo.inputs.find((i) => i.name === sampleName);
    const c = layout.kind === 'flux' ? dim(sample, -1) : dim(sample, 1);
    const expect = layout.kind === 'flux' ? 4 * decC : decC;
    if (c !== undefined && c !== expect) {
      throw layoutError(
        layout.dir,
        layout.denoiser.file,
        `latent channel mismatch: input "${sampleName}" ${formatShape(sample?.shape)} does not fit vae_decoder/model.onnx input "latent_sample" ${formatShape(dec?.shape)}` +
          (layout.kind === 'flux' ? ' (packed 2×2: 4 × the VAE channels)' : ''),
        { input: sampleName },
      );
    }
  }
}
