import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { toExternalData } from './external-data.js';

/** Version strings written into the configs, as a diffusers/transformers export of 2024 would. */
export const DIFFUSERS_VERSION = '0.30.0';
export const TRANSFORMERS_VERSION = '4.44.2';

/** Name of the file (beside model_index.json) that records how a test directory was built. */
export const TEST_MODEL_FILE = 'diffmesh_test_model.json';

export async function writeJson(file: string, value: unknown): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** Writes `<component>/model.onnx` (+ `model.onnx_data` with `externalData`) and `config.json`. */
export async function writeModel(
  dir: string,
  component: string,
  onnx: Uint8Array,
  config: unknown,
  opts: { externalData?: boolean } = {},
): Promise<void> {
  await mkdir(path.join(dir, component), { recursive: true });
  if (opts.externalData) {
    const split = toExternalData(onnx);
    await writeFile(path.join(dir, component, 'model.onnx'), split.model);
    await writeFile(path.join(dir, component, 'model.onnx_data'), split.data);
  } else {
    await writeFile(path.join(dir, component, 'model.onnx'), onnx);
  }
  await writeJson(path.join(dir, component, 'config.json'), config);
}

export async function readJson<T>(file: string): Promise<T> {
  return JSON.parse(await readFile(file, 'utf8')) as T;
}

/** transformers' CLIPTextConfig as saved beside an exported CLIP text encoder. */
export function clipTextConfig(o: {
  hidden: number;
  layers: number;
  maxPositions: number;
  vocabSize: number;
  projectionDim?: number;
  withProjection: boolean;
  precision: 'fp32' | 'fp16';
}): Record<string, unknown> {
  return {
    _name_or_path: o.withProjection ? 'laion/CLIP-ViT-bigG-14-laion2B-39B-b160k' : 'openai/clip-vit-large-patch14',
    architectures: [o.withProjection ? 'CLIPTextModelWithProjection' : 'CLIPTextModel'],
    attention_dropout: 0.0,
    // SD/SDXL checkpoints carry the legacy ids 0/2 here; the real BOS/EOS ids are in the tokenizer.
    bos_token_id: 0,
    dropout: 0.0,
    eos_token_id: 2,
    hidden_act: o.withProjection ? 'gelu' : 'quick_gelu',
    hidden_size: o.hidden,
    initializer_factor: 1.0,
    initializer_range: 0.02,
    intermediate_size: 4 * o.hidden,
    layer_norm_eps: 1e-5,
    max_position_embeddings: o.maxPositions,
    model_type: 'clip_text_model',
    num_attention_heads: 4,
    num_hidden_layers: o.layers,
    pad_token_id: 1,
    projection_dim: o.projectionDim ?? o.hidden,
    torch_dtype: o.precision === 'fp16' ? 'float16' : 'float32',
    transformers_version: TRANSFORMERS_VERSION,
    vocab_size: o.vocabSize,
  };
}

/** diffusers' AutoencoderKL config as saved beside vae_encoder/ and vae_decoder/. */
export function autoencoderConfig(o: {
  latentChannels: number;
  scalingFactor: number;
  shiftFactor?: number | null;
  sampleSize: number;
}): Record<string, unknown> {
  return {
    _class_name: 'AutoencoderKL',
    _diffusers_version: DIFFUSERS_VERSION,
    act_fn: 'silu',
    // Four blocks: diffusers derives vae_scale_factor = 2 ** (len(block_out_channels) - 1) = 8.
    block_out_channels: [8, 16, 32, 32],
    down_block_types: ['DownEncoderBlock2D', 'DownEncoderBlock2D', 'DownEncoderBlock2D', 'DownEncoderBlock2D'],
    force_upcast: true,
    in_channels: 3,
    latent_channels: o.latentChannels,
    latents_mean: null,
    latents_std: null,
    layers_per_block: 2,
    mid_block_add_attention: true,
    norm_num_groups: 8,
    out_channels: 3,
    sample_size: o.sampleSize,
    scaling_factor: o.scalingFactor,
    shift_factor: o.shiftFactor ?? null,
    up_block_types: ['UpDecoderBlock2D', 'UpDecoderBlock2D', 'UpDecoderBlock2D', 'UpDecoderBlock2D'],
    use_post_quant_conv: o.shiftFactor == null,
    use_quant_conv: o.shiftFactor == null,
  };
}

/** A request for an expected picture. */
export interface ExpectedImageRequest {
  prompt: string;
  /** Default ''. */
  negativePrompt?: string;
  /** Classifier-free guidance scale (SD/SDXL; ≤ 1 means no CFG, as in diffusers). FLUX: the `guidance` input. */
  guidanceScale: number;
  /** Pixels; default: the directory's default size (64). Multiples of 8 (16 for FLUX). */
  width?: number;
  height?: number;
}

/** An RGB picture, uint8, row-major [height, width, 3]. */
export interface ExpectedImage {
  width: number;
  height: number;
  data: Uint8Array;
}

/** Mean absolute difference of two uint8 pictures of the same size (0–255 scale). */
export function meanAbsoluteError(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) throw new Error(`pictures differ in size: ${a.length} vs ${b.length} values`);
  let acc = 0;
  for (let i = 0; i < a.length; i += 1) acc += Math.abs(a[i] - b[i]);
  return acc / a.length;
}
