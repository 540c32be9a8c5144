import path from 'node:path';
import { FLUX_LATENT_CHANNELS, fluxCleanLatent } from './analytic-flux.js';
import { buildAnalyticSd3Onnx, sd3MeaningSums, type AnalyticSd3Options } from './analytic-sd3.js';
import { buildVaeDecoderOnnx, buildVaeEncoderOnnx, toUint8Image, vaeDecode, VAE_SCALE } from './analytic-vae.js';
import { CLIP_EOS, clipVocab, referenceClipIds, writeClipTokenizer } from './clip-tokenizer-files.js';
import {
  autoencoderConfig,
  clipTextConfig,
  DIFFUSERS_VERSION,
  TEST_MODEL_FILE,
  TRANSFORMERS_VERSION,
  writeJson,
  writeModel,
  type ExpectedImage,
  type ExpectedImageRequest,
} from './layout-files.js';
import { latentSize, mixGuidance } from './sd-layout.js';
import { referenceT5Ids, t5Vocab, writeT5Tokenizer } from './t5-tokenizer-files.js';
import {
  buildClipTextEncoderOnnx,
  buildT5EncoderOnnx,
  ClipTextWeights,
  clipTextForward,
  T5EncoderWeights,
  t5Forward,
  type Precision,
} from './text-encoders.js';

/** Options of an SD3 test directory. Every field has a default. */
export interface Sd3DirOptions {
  precision?: Precision;
  /** vae scaling_factor / shift_factor (SD3's defaults 1.5305 / 0.0609). */
  scalingFactor?: number;
  shiftFactor?: number;
  /** CLIP-L / CLIP-G hidden sizes (= their projection dims; default 32 / 48). */
  clipHiddenSize1?: number;
  clipHiddenSize2?: number;
  /** T5 d_model = joint_attention_dim (default 96; must be ≥ the two CLIP sizes together). */
  t5HiddenSize?: number;
  maxLength?: number;
  sampleSize?: number;
  scheduler?: Record<string, unknown>;
  /** false: saved without T5 (no text_encoder_3/ or tokenizer_3/; model_index.json says `[null, null]`). Default true. */
  withT5?: boolean;
  seed?: number;
}

export type ResolvedSd3Options = Required<Sd3DirOptions>;

export function resolveSd3Options(o: Sd3DirOptions = {}): ResolvedSd3Options {
  const r: ResolvedSd3Options = {
    precision: o.precision ?? 'fp32',
    scalingFactor: o.scalingFactor ?? 1.5305,
    shiftFactor: o.shiftFactor ?? 0.0609,
    clipHiddenSize1: o.clipHiddenSize1 ?? 32,
    clipHiddenSize2: o.clipHiddenSize2 ?? 48,
    t5HiddenSize: o.t5HiddenSize ?? 96,
    maxLength: o.maxLength ?? 77,
    sampleSize: o.sampleSize ?? 8,
    scheduler: o.scheduler ?? {},
    withT5: o.withT5 ?? true,
    seed: o.seed ?? 3333,
  };
  if (r.t5HiddenSize < r.clipHiddenSize1 + r.clipHiddenSize2) {
    throw new Error(`T5 width ${r.t5HiddenSize} is smaller than the CLIP widths together`);
  }
  return r;
}

/** What the SD3 transformer receives for one prompt. */
export interface Sd3Conditioning {
  /** [77 + T, J]: CLIP-L ‖ CLIP-G penultimate states zero-padded to J, then the T5 states. */
  promptEmbeds: Float32Array;
  /** [P1 + P2]: both CLIP text_embeds. */
  pooled: Float32Array;
}

/** A built SD3 test directory. */
export class Sd3TestModel {
  readonly layout = 'sd3' as const;
  readonly options: ResolvedSd3Options;
  readonly clipL: ClipTextWeights;
  readonly clipG: ClipTextWeights;
  readonly t5: T5EncoderWeights;
  readonly transformer: AnalyticSd3Options;
  readonly schedulerConfig: Record<string, unknown>;

  constructor(options: Sd3DirOptions = {}) {
    const o = resolveSd3Options(options);
    this.options = o;
    const v = clipVocab();
    const tv = t5Vocab();
    const common = { layers: 2, maxPositions: o.maxLength, idsType: 'int32' as const, precision: o.precision, outputHiddenStates: true };
    this.clipL = new ClipTextWeights(
      { ...common, hidden: o.clipHiddenSize1, projectionDim: o.clipHiddenSize1, seed: o.seed },
      v.size,
      v.meanings,
    );
    this.clipG = new ClipTextWeights(
      { ...common, hidden: o.clipHiddenSize2, projectionDim: o.clipHiddenSize2, seed: o.seed + 1 },
      v.size,
      v.meanings,
    );
    this.t5 = new T5EncoderWeights({ hidden: o.t5HiddenSize, precision: o.precision, seed: o.seed + 2 }, tv.size, tv.meanings);
    this.transformer = {
      jointDim: o.t5HiddenSize,
      pooledDim: o.clipHiddenSize1 + o.clipHiddenSize2,
      precision: o.precision,
      scalingFactor: o.scalingFactor,
      shiftFactor: o.shiftFactor,
      seed: o.seed + 3,
    };
    this.schedulerConfig = {
      _class_name: 'FlowMatchEulerDiscreteScheduler',
      _diffusers_version: DIFFUSERS_VERSION,
      num_train_timesteps: 1000,
      shift: 3.0,
      ...o.scheduler,
    };
  }

  promptIds(prompt: string): number[] {
    return referenceClipIds(prompt, this.options.maxLength, clipVocab().vocab[CLIP_EOS]);
  }

  promptIds2(prompt: string): number[] {
    return referenceClipIds(prompt, this.options.maxLength, clipVocab().vocab['!']);
  }

  /** T5 ids padded to the pipeline's max_sequence_length (SD3 default 256). */
  promptIds3(prompt: string, maxSequenceLength = 256): number[] {
    return referenceT5Ids(prompt, maxSequenceLength);
  }

  /** The conditioning StableDiffusion3Pipeline.encode_prompt builds (clip_skip unset). */
  conditioning(prompt: string, maxSequenceLength = 256): Sd3Conditioning {
    const a = clipTextForward(this.clipL, this.promptIds(prompt));
    const b = clipTextForward(this.clipG, this.promptIds2(prompt));
    const hA = a.hiddenStates[a.hiddenStates.length - 2];
    const hB = b.hiddenStates[b.hiddenStates.length - 2];
    const { clipHiddenSize1: D1, clipHiddenSize2: D2, t5HiddenSize: J, maxLength: L } = this.options;
    // Without T5 the pipeline appends zeros of [tokenizer_max_length, J] instead.
    const t5 = this.options.withT5 ? t5Forward(this.t5, this.promptIds3(prompt, maxSequenceLength)) : new Float32Array(L * J);
    const rows = L + t5.length / J;
    const promptEmbeds = new Float32Array(rows * J);
    for (let l = 0; l < L; l += 1) {
      promptEmbeds.set(hA.subarray(l * D1, (l + 1) * D1), l * J);
      promptEmbeds.set(hB.subarray(l * D2, (l + 1) * D2), l * J + D1);
    }
    promptEmbeds.set(t5, L * J);
    const pooled = new Float32Array(D1 + D2);
    pooled.set(a.textEmbeds as Float32Array, 0);
    pooled.set(b.textEmbeds as Float32Array, D1);
    return { promptEmbeds, pooled };
  }

  cleanLatent(prompt: string, h: number, w: number): Float32Array {
    const c = this.conditioning(prompt, 64); // T5 padding means nothing: any length gives the same sums
    return fluxCleanLatent(sd3MeaningSums(this.transformer, c.promptEmbeds, c.pooled), undefined, h, w);
  }

  /** Denoised latent in the transformer's space [16, h, w]: scaling·(u_mix − shift); CFG when g > 1 ('' if no negative). */
  expectedLatent(req: ExpectedImageRequest): { latent: Float32Array; h: number; w: number } {
    const { h, w } = latentSize(req, this.options.sampleSize);
    const pos = this.cleanLatent(req.prompt, h, w);
    const u = req.guidanceScale > 1 ? mixGuidance(this.cleanLatent(req.negativePrompt ?? '', h, w), pos, req.guidanceScale) : pos;
    return { latent: u.map((x) => (x - this.options.shiftFactor) * this.options.scalingFactor), h, w };
  }

  expectedImage(req: ExpectedImageRequest): ExpectedImage {
    const { latent, h, w } = this.expectedLatent(req);
    const u = latent.map((x) => x / this.options.scalingFactor + this.options.shiftFactor);
    return {
      width: w * VAE_SCALE,
      height: h * VAE_SCALE,
      data: toUint8Image(vaeDecode(u, FLUX_LATENT_CHANNELS, h, w), h * VAE_SCALE, w * VAE_SCALE),
    };
  }
}

/**
 * Builds an SD3 directory: text_encoder/ + text_encoder_2/ (CLIP with projection, hidden
 * states exported), text_encoder_3/ (T5), tokenizer/ tokenizer_2/ tokenizer_3/, transformer/,
 * vae_decoder/, vae_encoder/ (16 channels, scaling and shift factors), scheduler/.
 */
export async function buildSd3Dir(dir: string, options: Sd3DirOptions = {}): Promise<Sd3TestModel> {
  const m = new Sd3TestModel(options);
  const o = m.options;
  const v = clipVocab();
  const vaeCfg = autoencoderConfig({
    latentChannels: FLUX_LATENT_CHANNELS,
    scalingFactor: o.scalingFactor,
    shiftFactor: o.shiftFactor,
    sampleSize: o.sampleSize * VAE_SCALE,
  });
  const clipCfg = (hidden: number) =>
    clipTextConfig({
      hidden,
      layers: 2,
      maxPositions: o.maxLength,
      vocabSize: v.size,
      withProjection: true,
      projectionDim: hidden,
      precision: o.precision,
    });
  await Promise.all([
    writeJson(path.join(dir, 'model_index.json'), {
      _class_name: 'StableDiffusion3Pipeline',
      _diffusers_version: DIFFUSERS_VERSION,
      feature_extractor: [null, null],
      image_encoder: [null, null],
      scheduler: ['diffusers', 'FlowMatchEulerDiscreteScheduler'],
      text_encoder: ['transformers', 'CLIPTextModelWithProjection'],
      text_encoder_2: ['transformers', 'CLIPTextModelWithProjection'],
      text_encoder_3: o.withT5 ? ['transformers', 'T5EncoderModel'] : [null, null],
      tokenizer: ['transformers', 'CLIPTokenizer'],
      tokenizer_2: ['transformers', 'CLIPTokenizer'],
      tokenizer_3: o.withT5 ? ['transformers', 'T5TokenizerFast'] : [null, null],
      transformer: ['diffusers', 'SD3Transformer2DModel'],
      vae: ['diffusers', 'AutoencoderKL'],
    }),
    writeJson(path.join(dir, 'scheduler', 'scheduler_config.json'), m.schedulerConfig),
    writeClipTokenizer(path.join(dir, 'tokenizer'), { padToken: CLIP_EOS, modelMaxLength: o.maxLength, style: 'modern' }),
    writeClipTokenizer(path.join(dir, 'tokenizer_2'), { padToken: '!', modelMaxLength: o.maxLength, style: 'modern' }),
    o.withT5 ? writeT5Tokenizer(path.join(dir, 'tokenizer_3'), { modelMaxLength: 512 }) : undefined,
    writeModel(dir, 'text_encoder', buildClipTextEncoderOnnx(m.clipL), clipCfg(o.clipHiddenSize1)),
    writeModel(dir, 'text_encoder_2', buildClipTextEncoderOnnx(m.clipG), clipCfg(o.clipHiddenSize2)),
    o.withT5
      ? writeModel(dir, 'text_encoder_3', buildT5EncoderOnnx(m.t5), {
          architectures: ['T5EncoderModel'],
          d_ff: 4 * o.t5HiddenSize,
          d_kv: 8,
          d_model: o.t5HiddenSize,
          eos_token_id: 1,
          feed_forward_proj: 'gated-gelu',
          is_encoder_decoder: true,
          model_type: 't5',
          num_heads: 4,
          num_layers: 2,
          pad_token_id: 0,
          torch_dtype: o.precision === 'fp16' ? 'float16' : 'float32',
          transformers_version: TRANSFORMERS_VERSION,
          vocab_size: t5Vocab().size,
        })
      : undefined,
    writeModel(dir, 'transformer', buildAnalyticSd3Onnx(m.transformer), {
      _class_name: 'SD3Transformer2DModel',
      _diffusers_version: DIFFUSERS_VERSION,
      attention_head_dim: 8,
      caption_projection_dim: 32,
      in_channels: FLUX_LATENT_CHANNELS,
      joint_attention_dim: o.t5HiddenSize,
      num_attention_heads: 4,
      num_layers: 1,
      out_channels: FLUX_LATENT_CHANNELS,
      patch_size: 2,
      pooled_projection_dim: o.clipHiddenSize1 + o.clipHiddenSize2,
      pos_embed_max_size: 32,
      sample_size: o.sampleSize,
    }),
    writeModel(dir, 'vae_decoder', buildVaeDecoderOnnx({ latentChannels: FLUX_LATENT_CHANNELS, precision: o.precision }), vaeCfg),
    writeModel(dir, 'vae_encoder', buildVaeEncoderOnnx({ latentChannels: FLUX_LATENT_CHANNELS, precision: o.precision }), vaeCfg),
    writeJson(path.join(dir, TEST_MODEL_FILE), { layout: 'sd3', options: o }),
  ]);
  return m;
}
