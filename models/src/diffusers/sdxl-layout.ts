import path from 'node:path';
import {
  buildAnalyticUnetOnnx,
  timeIdsAmp,
  unetCleanLatent,
  unetMeaningSums,
  type AnalyticUnetOptions,
  type PredictionType,
  type TimestepType,
} from './analytic-unet.js';
import { buildVaeDecoderOnnx, buildVaeEncoderOnnx, toUint8Image, vaeDecode, VAE_SCALE } from './analytic-vae.js';
import { CLIP_EOS, clipVocab, referenceClipIds, writeClipTokenizer } from './clip-tokenizer-files.js';
import {
  autoencoderConfig,
  clipTextConfig,
  DIFFUSERS_VERSION,
  TEST_MODEL_FILE,
  writeJson,
  writeModel,
  type ExpectedImage,
  type ExpectedImageRequest,
} from './layout-files.js';
import { latentSize, mixGuidance, unetConfig } from './sd-layout.js';
import { buildClipTextEncoderOnnx, ClipTextWeights, clipTextForward, type Precision } from './text-encoders.js';

/** Options of an SDXL test directory. Every field has a default. */
export interface SdxlDirOptions {
  predictionType?: PredictionType;
  timestepType?: TimestepType;
  timestepShape?: 'scalar' | 'vector' | 'batch';
  precision?: Precision;
  /** Fields merged over SDXL's EulerDiscreteScheduler config. */
  scheduler?: Record<string, unknown>;
  /** vae scaling_factor (default 0.13025, SDXL's). */
  scalingFactor?: number;
  /** text_encoder hidden size (default 32). */
  hiddenSize1?: number;
  /** text_encoder_2 hidden size (default 48). */
  hiddenSize2?: number;
  /** text_encoder_2 projection_dim = width of text_embeds (default 32). */
  projectionDim?: number;
  maxLength?: number;
  sampleSize?: number;
  idsType?: 'int32' | 'int64';
  /** model_index.json force_zeros_for_empty_prompt (default true, as SDXL base). */
  forceZerosForEmptyPrompt?: boolean;
  /** Both text encoders get a CLIP encoder layer with optimum's layer names for LoRA files (embeddings unchanged). Default false. */
  textEncoderLayer?: boolean;
  seed?: number;
}

export type ResolvedSdxlOptions = Required<SdxlDirOptions>;

export function resolveSdxlOptions(o: SdxlDirOptions = {}): ResolvedSdxlOptions {
  return {
    predictionType: o.predictionType ?? 'epsilon',
    timestepType: o.timestepType ?? 'int64',
    timestepShape: o.timestepShape ?? 'scalar',
    precision: o.precision ?? 'fp32',
    scheduler: o.scheduler ?? {},
    scalingFactor: o.scalingFactor ?? 0.13025,
    hiddenSize1: o.hiddenSize1 ?? 32,
    hiddenSize2: o.hiddenSize2 ?? 48,
    projectionDim: o.projectionDim ?? 32,
    maxLength: o.maxLength ?? 77,
    sampleSize: o.sampleSize ?? 8,
    idsType: o.idsType ?? 'int32',
    forceZerosForEmptyPrompt: o.forceZerosForEmptyPrompt ?? true,
    textEncoderLayer: o.textEncoderLayer ?? false,
    seed: o.seed ?? 4321,
  };
}

/** Number of hidden layers of both SDXL test encoders. */
export const SDXL_ENCODER_LAYERS = 2;

/** What the SDXL UNet receives for one prompt. */
export interface SdxlConditioning {
  /** [L, D1 + D2]: both encoders' penultimate hidden states, concatenated per position. */
  promptEmbeds: Float32Array;
  /** [P]: text_encoder_2's text_embeds. */
  pooled: Float32Array;
}

/** A built SDXL test directory: options, weights and closed-form answers. */
export class SdxlTestModel {
  readonly layout = 'sdxl' as const;
  readonly options: ResolvedSdxlOptions;
  readonly text1: ClipTextWeights;
  readonly text2: ClipTextWeights;
  readonly unet: AnalyticUnetOptions;
  readonly schedulerConfig: Record<string, unknown>;

  constructor(options: SdxlDirOptions = {}) {
    const o = resolveSdxlOptions(options);
    this.options = o;
    const v = clipVocab();
    const common = {
      layers: SDXL_ENCODER_LAYERS,
      maxPositions: o.maxLength,
      idsType: o.idsType,
      precision: o.precision,
      outputHiddenStates: true,
      loraLayers: o.textEncoderLayer,
    };
    this.text1 = new ClipTextWeights({ ...common, hidden: o.hiddenSize1, seed: o.seed }, v.size, v.meanings);
    this.text2 = new ClipTextWeights(
      { ...common, hidden: o.hiddenSize2, projectionDim: o.projectionDim, seed: o.seed + 1 },
      v.size,
      v.meanings,
    );
    this.schedulerConfig = {
      _class_name: 'EulerDiscreteScheduler',
      _diffusers_version: DIFFUSERS_VERSION,
      beta_end: 0.012,
      beta_schedule: 'scaled_linear',
      beta_start: 0.00085,
      clip_sample: false,
      interpolation_type: 'linear',
      num_train_timesteps: 1000,
      prediction_type: o.predictionType,
      sample_max_value: 1.0,
      set_alpha_to_one: false,
      skip_prk_steps: true,
      steps_offset: 1,
      timestep_spacing: 'leading',
      trained_betas: null,
      use_karras_sigmas: false,
      ...o.scheduler,
    };
    this.unet = {
      crossAttentionDim: o.hiddenSize1 + o.hiddenSize2,
      meaningOffsets: [0, o.hiddenSize1],
      predictionType: o.predictionType,
      timestepType: o.timestepType,
      timestepShape: o.timestepShape,
      precision: o.precision,
      scalingFactor: o.scalingFactor,
      schedule: this.schedulerConfig,
      textEmbedsDim: o.projectionDim,
      seed: o.seed + 2,
    };
  }

  /** Ids for `tokenizer` (pad `<|endoftext|>`). */
  promptIds(prompt: string): number[] {
    return referenceClipIds(prompt, this.options.maxLength, clipVocab().vocab[CLIP_EOS]);
  }

  /** Ids for `tokenizer_2` (pad `!` = 0). */
  promptIds2(prompt: string): number[] {
    return referenceClipIds(prompt, this.options.maxLength, clipVocab().vocab['!']);
  }

  /** The conditioning diffusers' SDXL pipeline builds for a prompt (clip_skip unset). */
  conditioning(prompt: string): SdxlConditioning {
    const a = clipTextForward(this.text1, this.promptIds(prompt));
    const b = clipTextForward(this.text2, this.promptIds2(prompt));
    const h1 = a.hiddenStates[a.hiddenStates.length - 2];
    const h2 = b.hiddenStates[b.hiddenStates.length - 2];
    const D1 = this.options.hiddenSize1;
    const D2 = this.options.hiddenSize2;
    const L = this.options.maxLength;
    const promptEmbeds = new Float32Array(L * (D1 + D2));
    for (let l = 0; l < L; l += 1) {
      promptEmbeds.set(h1.subarray(l * D1, (l + 1) * D1), l * (D1 + D2));
      promptEmbeds.set(h2.subarray(l * D2, (l + 1) * D2), l * (D1 + D2) + D1);
    }
    return { promptEmbeds, pooled: b.textEmbeds as Float32Array };
  }

  /**
   * The negative conditioning: zeros when no negative prompt is given (`undefined`/`null`,
   * diffusers' `negative_prompt=None`) and force_zeros_for_empty_prompt is set; otherwise the
   * encoded negative prompt ('' is encoded like any prompt).
   */
  negativeConditioning(negativePrompt: string | null | undefined): SdxlConditioning {
    if (negativePrompt == null && this.options.forceZerosForEmptyPrompt) {
      const D = this.options.hiddenSize1 + this.options.hiddenSize2;
      return { promptEmbeds: new Float32Array(this.options.maxLength * D), pooled: new Float32Array(this.options.projectionDim) };
    }
    return this.conditioning(negativePrompt ?? '');
  }

  /** add_time_ids: original size (h, w) + crop top-left (0, 0) + target size (h, w). */
  timeIds(width: number, height: number): number[] {
    return [height, width, 0, 0, height, width];
  }

  /** Unscaled clean latent for one conditioning. */
  cleanLatent(c: SdxlConditioning, timeIds: number[], h: number, w: number): Float32Array {
    return unetCleanLatent(unetMeaningSums(this.unet, c.promptEmbeds, c.pooled), timeIdsAmp(timeIds), h, w);
  }

  expectedLatent(req: ExpectedImageRequest): { latent: Float32Array; h: number; w: number } {
    const { h, w } = latentSize(req, this.options.sampleSize);
    const tid = this.timeIds(w * VAE_SCALE, h * VAE_SCALE);
    const pos = this.cleanLatent(this.conditioning(req.prompt), tid, h, w);
    const u =
      req.guidanceScale > 1
        ? mixGuidance(this.cleanLatent(this.negativeConditioning(req.negativePrompt), tid, h, w), pos, req.guidanceScale)
        : pos;
    return { latent: u.map((x) => x * this.options.scalingFactor), h, w };
  }

  expectedImage(req: ExpectedImageRequest): ExpectedImage {
    const { latent, h, w } = this.expectedLatent(req);
    const u = latent.map((x) => x / this.options.scalingFactor);
    return { width: w * VAE_SCALE, height: h * VAE_SCALE, data: toUint8Image(vaeDecode(u, 4, h, w), h * VAE_SCALE, w * VAE_SCALE) };
  }
}

/**
 * Builds an SDXL directory: text_encoder/ (CLIP, hidden states exported), text_encoder_2/
 * (CLIP with projection), tokenizer/ + tokenizer_2/, unet/ (with text_embeds and time_ids),
 * vae_decoder/, vae_encoder/, scheduler/ and model_index.json.
 */
export async function buildSdxlDir(dir: string, options: SdxlDirOptions = {}): Promise<SdxlTestModel> {
  const m = new SdxlTestModel(options);
  const o = m.options;
  const v = clipVocab();
  const vaeCfg = autoencoderConfig({ latentChannels: 4, scalingFactor: o.scalingFactor, sampleSize: o.sampleSize * VAE_SCALE });
  const textCfg = (hidden: number, withProjection: boolean) =>
    clipTextConfig({
      hidden,
      layers: SDXL_ENCODER_LAYERS,
      maxPositions: o.maxLength,
      vocabSize: v.size,
      withProjection,
      projectionDim: withProjection ? o.projectionDim : undefined,
      precision: o.precision,
    });
  await Promise.all([
    writeJson(path.join(dir, 'model_index.json'), {
      _class_name: 'StableDiffusionXLPipeline',
      _diffusers_version: DIFFUSERS_VERSION,
      feature_extractor: [null, null],
      force_zeros_for_empty_prompt: o.forceZerosForEmptyPrompt,
      image_encoder: [null, null],
      scheduler: ['diffusers', m.schedulerConfig._class_name],
      text_encoder: ['transformers', 'CLIPTextModel'],
      text_encoder_2: ['transformers', 'CLIPTextModelWithProjection'],
      tokenizer: ['transformers', 'CLIPTokenizer'],
      tokenizer_2: ['transformers', 'CLIPTokenizer'],
      unet: ['diffusers', 'UNet2DConditionModel'],
      vae: ['diffusers', 'AutoencoderKL'],
    }),
    writeJson(path.join(dir, 'scheduler', 'scheduler_config.json'), m.schedulerConfig),
    writeClipTokenizer(path.join(dir, 'tokenizer'), { padToken: CLIP_EOS, modelMaxLength: o.maxLength, style: 'modern' }),
    writeClipTokenizer(path.join(dir, 'tokenizer_2'), { padToken: '!', modelMaxLength: o.maxLength, style: 'modern' }),
    writeModel(dir, 'text_encoder', buildClipTextEncoderOnnx(m.text1), textCfg(o.hiddenSize1, false)),
    writeModel(dir, 'text_encoder_2', buildClipTextEncoderOnnx(m.text2), textCfg(o.hiddenSize2, true)),
    writeModel(
      dir,
      'unet',
      buildAnalyticUnetOnnx(m.unet),
      unetConfig({
        crossAttentionDim: o.hiddenSize1 + o.hiddenSize2,
        sampleSize: o.sampleSize,
        textTime: { textEmbedsDim: o.projectionDim },
      }),
    ),
    writeModel(dir, 'vae_decoder', buildVaeDecoderOnnx({ latentChannels: 4, precision: o.precision }), vaeCfg),
    writeModel(dir, 'vae_encoder', buildVaeEncoderOnnx({ latentChannels: 4, precision: o.precision }), vaeCfg),
    writeJson(path.join(dir, TEST_MODEL_FILE), { layout: 'sdxl', options: o }),
  ]);
  return m;
}
