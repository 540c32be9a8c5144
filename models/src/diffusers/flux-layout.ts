import path from 'node:path';
import {
  buildAnalyticFluxOnnx,
  FLUX_LATENT_CHANNELS,
  fluxCleanLatent,
  fluxMeaningSums,
  packLatents,
  type AnalyticFluxOptions,
} from './analytic-flux.js';
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

/** Options of a FLUX test directory. Every field has a default. */
export interface FluxDirOptions {
  /** fp16: every float input/output is float16 (ids stay integer). */
  precision?: Precision;
  /** vae scaling_factor / shift_factor (FLUX.1's defaults 0.3611 / 0.1159). */
  scalingFactor?: number;
  shiftFactor?: number;
  /** FLUX.1-dev has a `guidance` input (default true); schnell does not. */
  guidanceEmbeds?: boolean;
  /** CLIP hidden size = transformer pooled_projection_dim (default 32). */
  clipHiddenSize?: number;
  /** T5 d_model = transformer joint_attention_dim (default 32). */
  t5HiddenSize?: number;
  /** CLIP tokenizer model_max_length (default 77). */
  maxLength?: number;
  /** T5 tokenizer model_max_length (default 512). FluxPipeline pads to its max_sequence_length argument. */
  t5MaxLength?: number;
  /** Transformer sample_size in latent pixels (default 8 → 64×64). Must be even. */
  sampleSize?: number;
  /** Fields merged over FLUX.1's FlowMatchEulerDiscreteScheduler config. */
  scheduler?: Record<string, unknown>;
  /** Weights of transformer/ and text_encoder_2/ in `model.onnx_data` (as real FLUX, > 2 GB). */
  externalData?: boolean;
  seed?: number;
}

export type ResolvedFluxOptions = Required<FluxDirOptions>;

export function resolveFluxOptions(o: FluxDirOptions = {}): ResolvedFluxOptions {
  return {
    precision: o.precision ?? 'fp32',
    scalingFactor: o.scalingFactor ?? 0.3611,
    shiftFactor: o.shiftFactor ?? 0.1159,
    guidanceEmbeds: o.guidanceEmbeds ?? true,
    clipHiddenSize: o.clipHiddenSize ?? 32,
    t5HiddenSize: o.t5HiddenSize ?? 32,
    maxLength: o.maxLength ?? 77,
    t5MaxLength: o.t5MaxLength ?? 512,
    sampleSize: o.sampleSize ?? 8,
    scheduler: o.scheduler ?? {},
    externalData: o.externalData ?? false,
    seed: o.seed ?? 777,
  };
}

/** A built FLUX test directory: options, weights and closed-form answers. */
export class FluxTestModel {
  readonly layout = 'flux' as const;
  readonly options: ResolvedFluxOptions;
  readonly clip: ClipTextWeights;
  readonly t5: T5EncoderWeights;
  readonly transformer: AnalyticFluxOptions;
  readonly schedulerConfig: Record<string, unknown>;

  constructor(options: FluxDirOptions = {}) {
    const o = resolveFluxOptions(options);
    this.options = o;
    const v = clipVocab();
    const tv = t5Vocab();
    this.clip = new ClipTextWeights(
      {
        hidden: o.clipHiddenSize,
        layers: 2,
        maxPositions: o.maxLength,
        idsType: 'int32',
        precision: o.precision,
        outputHiddenStates: false,
        seed: o.seed,
      },
      v.size,
      v.meanings,
    );
    this.t5 = new T5EncoderWeights({ hidden: o.t5HiddenSize, precision: o.precision, seed: o.seed + 1 }, tv.size, tv.meanings);
    this.transformer = {
      t5Dim: o.t5HiddenSize,
      pooledDim: o.clipHiddenSize,
      guidanceEmbeds: o.guidanceEmbeds,
      precision: o.precision,
      scalingFactor: o.scalingFactor,
      shiftFactor: o.shiftFactor,
    };
    this.schedulerConfig = {
      _class_name: 'FlowMatchEulerDiscreteScheduler',
      _diffusers_version: DIFFUSERS_VERSION,
      base_image_seq_len: 256,
      base_shift: 0.5,
      invert_sigmas: false,
      max_image_seq_len: 4096,
      max_shift: 1.15,
      num_train_timesteps: 1000,
      shift: 3.0,
      shift_terminal: null,
      use_beta_sigmas: false,
      use_dynamic_shifting: true,
      use_exponential_sigmas: false,
      use_karras_sigmas: false,
      ...o.scheduler,
    };
  }

  /** CLIP ids (pad `<|endoftext|>`). */
  promptIds(prompt: string): number[] {
    return referenceClipIds(prompt, this.options.maxLength, clipVocab().vocab[CLIP_EOS]);
  }

  /** T5 ids padded to maxSequenceLength (FluxPipeline's max_sequence_length, default 512). */
  promptIdsT5(prompt: string, maxSequenceLength = 512): number[] {
    return referenceT5Ids(prompt, maxSequenceLength);
  }

  /** pooled_projections: CLIP pooler_output [D_clip]. */
  pooledEmbeds(prompt: string): Float32Array {
    return clipTextForward(this.clip, this.promptIds(prompt)).pooled;
  }

  /** encoder_hidden_states: T5 last_hidden_state [T, D_t5]. */
  t5Embeds(prompt: string, maxSequenceLength = 512): Float32Array {
    return t5Forward(this.t5, this.promptIdsT5(prompt, maxSequenceLength));
  }

  /**
   * VAE-space clean latent u [16, h, w]. Padding T5 tokens mean nothing, so the result does
   * not depend on max_sequence_length.
   */
  cleanLatent(prompt: string, guidance: number, h: number, w: number): Float32Array {
    const s = fluxMeaningSums(this.transformer, this.t5Embeds(prompt, 64), this.pooledEmbeds(prompt));
    return fluxCleanLatent(s, this.options.guidanceEmbeds ? guidance : undefined, h, w);
  }

  /**
   * The packed latent a correct pipeline ends with (transformer space, [S, 64]):
   * scaling_factor · (u − shift_factor), packed 2×2. `guidanceScale` is FLUX's distilled
   * guidance (the `guidance` input; default 3.5 in FluxPipeline); there is no CFG batch.
   */
  expectedLatent(req: ExpectedImageRequest): { packed: Float32Array; h: number; w: number } {
    const H = req.height ?? this.options.sampleSize * VAE_SCALE;
    const W = req.width ?? this.options.sampleSize * VAE_SCALE;
    if (H % 16 !== 0 || W % 16 !== 0) throw new Error(`FLUX size ${W}×${H} is not a multiple of 16`);
    const h = H / VAE_SCALE;
    const w = W / VAE_SCALE;
    const u = this.cleanLatent(req.prompt, req.guidanceScale, h, w);
    const z = u.map((x) => (x - this.options.shiftFactor) * this.options.scalingFactor);
    return { packed: packLatents(z, FLUX_LATENT_CHANNELS, h, w), h, w };
  }

  /** The picture: unpack, latent / scaling_factor + shift_factor, decode, → uint8. */
  expectedImage(req: ExpectedImageRequest): ExpectedImage {
    const H = req.height ?? this.options.sampleSize * VAE_SCALE;
    const W = req.width ?? this.options.sampleSize * VAE_SCALE;
    const u = this.cleanLatent(req.prompt, req.guidanceScale, H / VAE_SCALE, W / VAE_SCALE);
    return { width: W, height: H, data: toUint8Image(vaeDecode(u, FLUX_LATENT_CHANNELS, H / VAE_SCALE, W / VAE_SCALE), H, W) };
  }
}

/**
 * Builds a FLUX directory: text_encoder/ (CLIP → pooler_output), text_encoder_2/ (T5
 * encoder), tokenizer/ (CLIP) + tokenizer_2/ (T5 tokenizer.json), transformer/, vae_decoder/,
 * vae_encoder/ (16 latent channels, scaling and shift factors), scheduler/ and model_index.json.
 */
export async function buildFluxDir(dir: string, options: FluxDirOptions = {}): Promise<FluxTestModel> {
  const m = new FluxTestModel(options);
  const o = m.options;
  if (o.sampleSize % 2 !== 0) throw new Error(`FLUX sample_size ${o.sampleSize} must be even`);
  const v = clipVocab();
  const tv = t5Vocab();
  const vaeCfg = autoencoderConfig({
    latentChannels: FLUX_LATENT_CHANNELS,
    scalingFactor: o.scalingFactor,
    shiftFactor: o.shiftFactor,
    sampleSize: o.sampleSize * VAE_SCALE,
  });
  await Promise.all([
    writeJson(path.join(dir, 'model_index.json'), {
      _class_name: 'FluxPipeline',
      _diffusers_version: DIFFUSERS_VERSION,
      feature_extractor: [null, null],
      image_encoder: [null, null],
      scheduler: ['diffusers', 'FlowMatchEulerDiscreteScheduler'],
      text_encoder: ['transformers', 'CLIPTextModel'],
      text_encoder_2: ['transformers', 'T5EncoderModel'],
      tokenizer: ['transformers', 'CLIPTokenizer'],
      tokenizer_2: ['transformers', 'T5TokenizerFast'],
      transformer: ['diffusers', 'FluxTransformer2DModel'],
      vae: ['diffusers', 'AutoencoderKL'],
    }),
    writeJson(path.join(dir, 'scheduler', 'scheduler_config.json'), m.schedulerConfig),
    writeClipTokenizer(path.join(dir, 'tokenizer'), { padToken: CLIP_EOS, modelMaxLength: o.maxLength, style: 'modern' }),
    writeT5Tokenizer(path.join(dir, 'tokenizer_2'), { modelMaxLength: o.t5MaxLength }),
    writeModel(
      dir,
      'text_encoder',
      buildClipTextEncoderOnnx(m.clip),
      clipTextConfig({
        hidden: o.clipHiddenSize,
        layers: 2,
        maxPositions: o.maxLength,
        vocabSize: v.size,
        withProjection: false,
        precision: o.precision,
      }),
    ),
    writeModel(
      dir,
      'text_encoder_2',
      buildT5EncoderOnnx(m.t5),
      {
        _name_or_path: 'google/t5-v1_1-xxl',
        architectures: ['T5EncoderModel'],
        classifier_dropout: 0.0,
        d_ff: 4 * o.t5HiddenSize,
        d_kv: 8,
        d_model: o.t5HiddenSize,
        decoder_start_token_id: 0,
        dense_act_fn: 'gelu_new',
        dropout_rate: 0.1,
        eos_token_id: 1,
        feed_forward_proj: 'gated-gelu',
        initializer_factor: 1.0,
        is_encoder_decoder: true,
        is_gated_act: true,
        layer_norm_epsilon: 1e-6,
        model_type: 't5',
        num_decoder_layers: 2,
        num_heads: 4,
        num_layers: 2,
        output_past: true,
        pad_token_id: 0,
        relative_attention_max_distance: 128,
        relative_attention_num_buckets: 32,
        tie_word_embeddings: false,
        torch_dtype: o.precision === 'fp16' ? 'float16' : 'float32',
        transformers_version: TRANSFORMERS_VERSION,
        use_cache: true,
        vocab_size: tv.size,
      },
      { externalData: o.externalData },
    ),
    writeModel(
      dir,
      'transformer',
      buildAnalyticFluxOnnx(m.transformer),
      {
        _class_name: 'FluxTransformer2DModel',
        _diffusers_version: DIFFUSERS_VERSION,
        attention_head_dim: 8,
        axes_dims_rope: [2, 3, 3],
        guidance_embeds: o.guidanceEmbeds,
        in_channels: 64,
        joint_attention_dim: o.t5HiddenSize,
        num_attention_heads: 4,
        num_layers: 1,
        num_single_layers: 1,
        out_channels: null,
        patch_size: 1,
        pooled_projection_dim: o.clipHiddenSize,
        sample_size: o.sampleSize,
      },
      { externalData: o.externalData },
    ),
    writeModel(dir, 'vae_decoder', buildVaeDecoderOnnx({ latentChannels: FLUX_LATENT_CHANNELS, precision: o.precision }), vaeCfg),
    writeModel(dir, 'vae_encoder', buildVaeEncoderOnnx({ latentChannels: FLUX_LATENT_CHANNELS, precision: o.precision }), vaeCfg),
    writeJson(path.join(dir, TEST_MODEL_FILE), { layout: 'flux', options: o }),
  ]);
  return m;
}
