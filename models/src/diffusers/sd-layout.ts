import { rm } from 'node:fs/promises';
import path from 'node:path';
import {
  buildAnalyticUnetOnnx,
  referenceGuidanceEmbedding,
  unetCleanLatent,
  unetMeaningSums,
  UNET_PATTERN_AMP,
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
import { buildClipTextEncoderOnnx, ClipTextWeights, clipTextForward, type Precision } from './text-encoders.js';

/** Options of an SD 1.x/2.x test directory. Every field has a default. */
export interface SdDirOptions {
  /** `sd1` (pad `<|endoftext|>`, epsilon, PNDM) or `sd2` (pad `!`, v_prediction, DDIM). Default sd1. */
  variant?: 'sd1' | 'sd2';
  predictionType?: PredictionType;
  /** dtype of the UNet's `timestep` input (default int64, as optimum's fp32 exports). */
  timestepType?: TimestepType;
  /** `scalar` (rank 0, current optimum, default), `vector` (shape ['steps'], older exports) or `batch` (shape ['batch_size']: one per item). */
  timestepShape?: 'scalar' | 'vector' | 'batch';
  /** fp16: every float input/output of every component is float16 (ids stay integer). */
  precision?: Precision;
  /** Fields merged over the variant's scheduler_config.json (e.g. `_class_name`, `use_karras_sigmas`). */
  scheduler?: Record<string, unknown>;
  /** vae scaling_factor (default 0.18215). */
  scalingFactor?: number;
  /** Text encoder hidden size (default 32). */
  hiddenSize?: number;
  /** UNet cross_attention_dim (default = hiddenSize; differ for a broken directory). */
  crossAttentionDim?: number;
  /** Tokenizer model_max_length = max_position_embeddings (default 77). */
  maxLength?: number;
  /** UNet sample_size, i.e. default latent size (default 8 → 64×64 pixels). */
  sampleSize?: number;
  /** dtype of the text encoder's input_ids (default int32, as optimum exports CLIP). */
  idsType?: 'int32' | 'int64';
  /** Also write tokenizer/tokenizer.json (default false, like most SD repositories). */
  tokenizerJson?: boolean;
  tokenizerStyle?: 'legacy' | 'modern';
  /** `latent_parameters` (mean ‖ logvar, current optimum, default) or `latent_sample` (older). */
  vaeEncoderOutput?: 'latent_parameters' | 'latent_sample';
  /** model_index.json: diffusers' StableDiffusionPipeline (default) or OnnxStableDiffusionPipeline. */
  modelIndexStyle?: 'diffusers' | 'onnx';
  /** false → UNet without `encoder_hidden_states` (broken variant). */
  withEncoderHiddenStates?: boolean;
  /**
   * LCM-distilled UNet: `time_cond_proj_dim` in unet/config.json and a `timestep_cond` input
   * taking the guidance-scale embedding (guidance is then embedded, one UNet pass per step).
   * Default 0 (none); LCM checkpoints use 256.
   */
  timestepCondDim?: number;
  /** Weights of unet/ and text_encoder/ in `model.onnx_data` beside `model.onnx` (as for models > 2 GB). */
  externalData?: boolean;
  /**
   * Matrix products the UNet runs on top of its math (see {@link AnalyticUnetOptions.extraWork}),
   * so a call takes seconds like a real UNet's while the picture stays the closed-form one.
   * Default none.
   */
  extraWork?: { size: number; products: number };
  /** The UNet gets a transformer block with optimum's layer names for LoRA files (base picture unchanged). Default false. */
  attentionBlock?: boolean;
  /** The text encoder gets a CLIP encoder layer with optimum's layer names for LoRA files (embeddings unchanged). Default false. */
  textEncoderLayer?: boolean;
  seed?: number;
}

export type ResolvedSdOptions = Required<SdDirOptions>;

export function resolveSdOptions(o: SdDirOptions = {}): ResolvedSdOptions {
  const variant = o.variant ?? 'sd1';
  const hiddenSize = o.hiddenSize ?? 32;
  return {
    variant,
    predictionType: o.predictionType ?? (variant === 'sd2' ? 'v_prediction' : 'epsilon'),
    timestepType: o.timestepType ?? 'int64',
    timestepShape: o.timestepShape ?? 'scalar',
    precision: o.precision ?? 'fp32',
    scheduler: o.scheduler ?? {},
    scalingFactor: o.scalingFactor ?? 0.18215,
    hiddenSize,
    crossAttentionDim: o.crossAttentionDim ?? hiddenSize,
    maxLength: o.maxLength ?? 77,
    sampleSize: o.sampleSize ?? 8,
    idsType: o.idsType ?? 'int32',
    tokenizerJson: o.tokenizerJson ?? false,
    tokenizerStyle: o.tokenizerStyle ?? (variant === 'sd2' ? 'modern' : 'legacy'),
    vaeEncoderOutput: o.vaeEncoderOutput ?? 'latent_parameters',
    modelIndexStyle: o.modelIndexStyle ?? 'diffusers',
    withEncoderHiddenStates: o.withEncoderHiddenStates ?? true,
    timestepCondDim: o.timestepCondDim ?? 0,
    externalData: o.externalData ?? false,
    extraWork: o.extraWork ?? { size: 0, products: 0 },
    attentionBlock: o.attentionBlock ?? false,
    textEncoderLayer: o.textEncoderLayer ?? false,
    seed: o.seed ?? 1234,
  };
}

/** scheduler_config.json of an SD variant (with the options' overrides). */
export function sdSchedulerConfig(o: ResolvedSdOptions): Record<string, unknown> {
  const base: Record<string, unknown> = {
    _class_name: o.variant === 'sd2' ? 'DDIMScheduler' : 'PNDMScheduler',
    _diffusers_version: DIFFUSERS_VERSION,
    beta_end: 0.012,
    beta_schedule: 'scaled_linear',
    beta_start: 0.00085,
    clip_sample: false,
    num_train_timesteps: 1000,
    prediction_type: o.predictionType,
    set_alpha_to_one: false,
    skip_prk_steps: true,
    steps_offset: 1,
    timestep_spacing: 'leading',
    trained_betas: null,
  };
  return { ...base, ...o.scheduler };
}

/** A built SD 1.x/2.x test directory: its options, weights and closed-form answers. */
export class SdTestModel {
  readonly layout = 'sd' as const;
  readonly options: ResolvedSdOptions;
  readonly textWeights: ClipTextWeights;
  readonly unet: AnalyticUnetOptions;
  readonly schedulerConfig: Record<string, unknown>;

  constructor(options: SdDirOptions = {}) {
    const o = resolveSdOptions(options);
    this.options = o;
    const v = clipVocab();
    this.textWeights = new ClipTextWeights(
      {
        hidden: o.hiddenSize,
        layers: 2,
        maxPositions: o.maxLength,
        idsType: o.idsType,
        precision: o.precision,
        outputHiddenStates: false,
        loraLayers: o.textEncoderLayer,
        seed: o.seed,
      },
      v.size,
      v.meanings,
    );
    this.schedulerConfig = sdSchedulerConfig(o);
    this.unet = {
      crossAttentionDim: o.crossAttentionDim,
      meaningOffsets: [0],
      predictionType: o.predictionType,
      timestepType: o.timestepType,
      timestepShape: o.timestepShape,
      precision: o.precision,
      scalingFactor: o.scalingFactor,
      schedule: this.schedulerConfig,
      withEncoderHiddenStates: o.withEncoderHiddenStates,
      ...(o.timestepCondDim ? { timestepCondDim: o.timestepCondDim } : {}),
      ...(o.extraWork.products > 0 ? { extraWork: o.extraWork } : {}),
      attentionBlock: o.attentionBlock,
      seed: o.seed + 1,
    };
  }

  /** Id of the padding token (`<|endoftext|>` for sd1, `!` = 0 for sd2). */
  get padId(): number {
    const v = clipVocab();
    return this.options.variant === 'sd2' ? v.vocab['!'] : v.vocab[CLIP_EOS];
  }

  /** Token ids diffusers would feed the text encoder for a prompt. */
  promptIds(prompt: string): number[] {
    return referenceClipIds(prompt, this.options.maxLength, this.padId);
  }

  /** `last_hidden_state` [L, D] for a prompt (what the UNet receives as encoder_hidden_states). */
  promptEmbeds(prompt: string): Float32Array {
    return clipTextForward(this.textWeights, this.promptIds(prompt)).lastHiddenState;
  }

  /** Unscaled clean latent u [4, h, w] for one prompt (no guidance; an LCM UNet's with its guidance embedding). */
  cleanLatent(prompt: string, h = this.options.sampleSize, w = h, timestepCond?: ArrayLike<number>): Float32Array {
    return unetCleanLatent(unetMeaningSums(this.unet, this.promptEmbeds(prompt), undefined, timestepCond), UNET_PATTERN_AMP, h, w);
  }

  /**
   * The denoised latent a correct pipeline ends with, in the UNet's (scaled) space:
   * scaling_factor · (u_neg + g·(u_pos − u_neg)), or scaling_factor · u_pos when g ≤ 1.
   * An LCM UNet (`timestepCondDim`) takes g as its embedding instead: one pass, no negative.
   */
  expectedLatent(req: ExpectedImageRequest): { latent: Float32Array; h: number; w: number } {
    const { h, w } = latentSize(req, this.options.sampleSize);
    const dim = this.options.timestepCondDim;
    const u = dim
      ? this.cleanLatent(req.prompt, h, w, referenceGuidanceEmbedding(req.guidanceScale - 1, dim))
      : req.guidanceScale > 1
        ? mixGuidance(this.cleanLatent(req.negativePrompt ?? '', h, w), this.cleanLatent(req.prompt, h, w), req.guidanceScale)
        : this.cleanLatent(req.prompt, h, w);
    return { latent: u.map((x) => x * this.options.scalingFactor), h, w };
  }

  /** The picture a correct pipeline produces: decode(latent / scaling_factor) → uint8. */
  expectedImage(req: ExpectedImageRequest): ExpectedImage {
    const { latent, h, w } = this.expectedLatent(req);
    const u = latent.map((x) => x / this.options.scalingFactor);
    return { width: w * VAE_SCALE, height: h * VAE_SCALE, data: toUint8Image(vaeDecode(u, 4, h, w), h * VAE_SCALE, w * VAE_SCALE) };
  }
}

export function latentSize(req: { width?: number; height?: number }, sampleSize: number): { h: number; w: number } {
  const H = req.height ?? sampleSize * VAE_SCALE;
  const W = req.width ?? sampleSize * VAE_SCALE;
  if (H % VAE_SCALE !== 0 || W % VAE_SCALE !== 0) throw new Error(`size ${W}×${H} is not a multiple of ${VAE_SCALE}`);
  return { h: H / VAE_SCALE, w: W / VAE_SCALE };
}

export function mixGuidance(neg: Float32Array, pos: Float32Array, g: number): Float32Array {
  return pos.map((p, i) => neg[i] + g * (p - neg[i]));
}

/** UNet2DConditionModel config.json. */
export function unetConfig(o: {
  crossAttentionDim: number;
  sampleSize: number;
  textTime?: { textEmbedsDim: number };
  /** LCM-distilled UNets: width of `timestep_cond`. */
  timeCondProjDim?: number | null;
}): Record<string, unknown> {
  return {
    _class_name: 'UNet2DConditionModel',
    _diffusers_version: DIFFUSERS_VERSION,
    act_fn: 'silu',
    addition_embed_type: o.textTime ? 'text_time' : null,
    addition_embed_type_num_heads: 64,
    addition_time_embed_dim: o.textTime ? 256 : null,
    attention_head_dim: 8,
    attention_type: 'default',
    block_out_channels: [32, 64],
    center_input_sample: false,
    class_embed_type: null,
    class_embeddings_concat: false,
    conv_in_kernel: 3,
    conv_out_kernel: 3,
    cross_attention_dim: o.crossAttentionDim,
    cross_attention_norm: null,
    down_block_types: ['CrossAttnDownBlock2D', 'DownBlock2D'],
    downsample_padding: 1,
    dual_cross_attention: false,
    encoder_hid_dim: null,
    encoder_hid_dim_type: null,
    flip_sin_to_cos: true,
    freq_shift: 0,
    in_channels: 4,
    layers_per_block: 1,
    mid_block_only_cross_attention: null,
    mid_block_scale_factor: 1,
    mid_block_type: 'UNetMidBlock2DCrossAttn',
    norm_eps: 1e-5,
    norm_num_groups: 32,
    num_attention_heads: null,
    num_class_embeds: null,
    only_cross_attention: false,
    out_channels: 4,
    projection_class_embeddings_input_dim: o.textTime ? o.textTime.textEmbedsDim + 6 * 256 : null,
    resnet_out_scale_factor: 1.0,
    resnet_skip_time_act: false,
    resnet_time_scale_shift: 'default',
    sample_size: o.sampleSize,
    time_cond_proj_dim: o.timeCondProjDim ?? null,
    time_embedding_act_fn: null,
    time_embedding_dim: null,
    time_embedding_type: 'positional',
    timestep_post_act: null,
    transformer_layers_per_block: 1,
    up_block_types: ['UpBlock2D', 'CrossAttnUpBlock2D'],
    upcast_attention: false,
    use_linear_projection: false,
  };
}

/**
 * Builds an SD 1.x/2.x directory in the diffusers/optimum ONNX layout: model_index.json,
 * text_encoder/, tokenizer/, unet/, vae_decoder/, vae_encoder/, scheduler/ (+ the
 * diffmesh_test_model.json record). Deterministic; well under 1 MB.
 */
export async function buildSdDir(dir: string, options: SdDirOptions = {}): Promise<SdTestModel> {
  const m = new SdTestModel(options);
  const o = m.options;
  const v = clipVocab();
  const onnxIndex = o.modelIndexStyle === 'onnx';
  const modelIndex = onnxIndex
    ? {
        _class_name: 'OnnxStableDiffusionPipeline',
        _diffusers_version: DIFFUSERS_VERSION,
        feature_extractor: [null, null],
        requires_safety_checker: false,
        safety_checker: [null, null],
        scheduler: ['diffusers', m.schedulerConfig._class_name],
        text_encoder: ['diffusers', 'OnnxRuntimeModel'],
        tokenizer: ['transformers', 'CLIPTokenizer'],
        unet: ['diffusers', 'OnnxRuntimeModel'],
        vae_decoder: ['diffusers', 'OnnxRuntimeModel'],
        vae_encoder: ['diffusers', 'OnnxRuntimeModel'],
      }
    : {
        _class_name: 'StableDiffusionPipeline',
        _diffusers_version: DIFFUSERS_VERSION,
        feature_extractor: [null, null],
        image_encoder: [null, null],
        requires_safety_checker: false,
        safety_checker: [null, null],
        scheduler: ['diffusers', m.schedulerConfig._class_name],
        text_encoder: ['transformers', 'CLIPTextModel'],
        tokenizer: ['transformers', 'CLIPTokenizer'],
        unet: ['diffusers', 'UNet2DConditionModel'],
        vae: ['diffusers', 'AutoencoderKL'],
      };
  const vaeCfg = autoencoderConfig({ latentChannels: 4, scalingFactor: o.scalingFactor, sampleSize: o.sampleSize * VAE_SCALE });
  await Promise.all([
    writeJson(path.join(dir, 'model_index.json'), modelIndex),
    writeJson(path.join(dir, 'scheduler', 'scheduler_config.json'), m.schedulerConfig),
    writeClipTokenizer(path.join(dir, 'tokenizer'), {
      padToken: o.variant === 'sd2' ? '!' : CLIP_EOS,
      modelMaxLength: o.maxLength,
      tokenizerJson: o.tokenizerJson,
      style: o.tokenizerStyle,
    }),
    writeModel(
      dir,
      'text_encoder',
      buildClipTextEncoderOnnx(m.textWeights),
      clipTextConfig({
        hidden: o.hiddenSize,
        layers: 2,
        maxPositions: o.maxLength,
        vocabSize: v.size,
        withProjection: false,
        precision: o.precision,
      }),
      { externalData: o.externalData },
    ),
    writeModel(
      dir,
      'unet',
      buildAnalyticUnetOnnx(m.unet),
      unetConfig({ crossAttentionDim: o.crossAttentionDim, sampleSize: o.sampleSize, timeCondProjDim: o.timestepCondDim || null }),
      {
        externalData: o.externalData,
      },
    ),
    writeModel(dir, 'vae_decoder', buildVaeDecoderOnnx({ latentChannels: 4, precision: o.precision }), vaeCfg),
    writeModel(
      dir,
      'vae_encoder',
      buildVaeEncoderOnnx({ latentChannels: 4, precision: o.precision, latentSample: o.vaeEncoderOutput === 'latent_sample' }),
      vaeCfg,
    ),
    writeJson(path.join(dir, TEST_MODEL_FILE), { layout: 'sd', options: o }),
  ]);
  return m;
}

/** Removes files from a built directory (for "missing file" validation tests). */
export async function removeFiles(dir: string, relativePaths: readonly string[]): Promise<void> {
  await Promise.all(relativePaths.map((p) => rm(path.join(dir, p), { recursive: true, force: true })));
}
