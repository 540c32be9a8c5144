import { randomBytes } from 'node:crypto';

/** Parameters of one generation request, as the user gave them plus defaults. */
export interface GenerationParams {
  prompt: string;
  negativePrompt: string;
  width: number;
  height: number;
  /** 1 for an image. */
  numFrames: number;
  numInferenceSteps: number;
  guidanceScale: number;
  /** Unsigned 64-bit seed as a decimal string (JSON-safe). */
  seed: string;
  /** Frames per second of a video result. */
  fps: number;
  /**
   * img2img strength in (0, 1]: how much of the input image is noised away (1 = pure noise).
   * Set exactly when the request has an input image (default {@link DEFAULT_STRENGTH}).
   */
  strength?: number;
  /**
   * Step caching of the denoising stage (TeaCache-style; see dit-svc's README). As a request
   * gives it, either field may be left out (the plan's default applies); once resolved, set
   * exactly when caching is on: `threshold` > 0 and `maxSkippedSteps` ≥ 1.
   */
  stepCache?: StepCacheParams;
  /** Live previews every N denoising steps; absent = none (see {@link PreviewParams}). */
  preview?: PreviewParams;
  /** LoRA adapters applied to the denoiser, by name, each at its scale; absent or empty = none. */
  adapters?: AdapterParams[];
}

/** One LoRA adapter of a request (see {@link ADAPTER_NAME_PATTERN}). */
export interface AdapterParams {
  name: string;
  /** Finite, within ±{@link MAX_ADAPTER_SCALE}; a request that gives none gets {@link DEFAULT_ADAPTER_SCALE}. */
  scale: number;
}

/** Adapter names: a file name without `.safetensors`, no path (letters, digits, `.`, `_`, `-`; not starting with `.`). */
export const ADAPTER_NAME_PATTERN = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;
/** Scale of an adapter a request names without one. */
export const DEFAULT_ADAPTER_SCALE = 1;
/** Largest |scale| of an adapter. */
export const MAX_ADAPTER_SCALE = 10;
/** Most adapters in one request. */
export const MAX_ADAPTERS = 8;

/** Step caching: skip the denoiser at a step whose input changed less than `threshold`. */
export interface StepCacheParams {
  /** Finite, ≥ 0; 0 = off. The relative L1 change of the denoiser input, summed since the last computed step. */
  threshold?: number;
  /** Most steps in a row that reuse the last output; 0 = none (off). Default {@link DEFAULT_STEP_CACHE_MAX_SKIPPED}. */
  maxSkippedSteps?: number;
}

/** Steps in a row that may reuse one model output when a request or plan gives no limit. */
export const DEFAULT_STEP_CACHE_MAX_SKIPPED = 2;

/**
 * Live previews of a request: the denoising stage sends a small picture of its latent after
 * every `everySteps` steps (and after the last), at most `maxSide` pixels a side. Set only
 * when previews are on (`everySteps` ≥ 1).
 */
export interface PreviewParams {
  everySteps: number;
  maxSide: number;
}

/** Longest side of a preview when the request gives none, and the range it may give. */
export const DEFAULT_PREVIEW_SIDE = 256;
export const MIN_PREVIEW_SIDE = 8;
export const MAX_PREVIEW_SIDE = 512;

/** Strength of a request with an input image that gives none (diffusers' img2img default). */
export const DEFAULT_STRENGTH = 0.8;

/** Longest prompt (and negative prompt) accepted, in characters (Unicode code points). */
export const MAX_PROMPT_LENGTH = 10_000;
/** Range of `num_inference_steps`. */
export const MIN_STEPS = 1;
export const MAX_STEPS = 200;
/** Range of `fps`. */
export const MIN_FPS = 1;
export const MAX_FPS = 60;
/** Largest seed: seeds are unsigned 64-bit integers. */
export const MAX_SEED = (1n << 64n) - 1n;

/** Random bytes drawn 8 at a time by {@link randomSeed}, refilled 4 KiB at once (one call per 512 seeds). */
const seedPool = { bytes: Buffer.alloc(0), at: 0 };

/** A uniformly random unsigned 64-bit seed as a decimal string. */
export function randomSeed(): string {
  if (seedPool.at + 8 > seedPool.bytes.length) {
    seedPool.bytes = randomBytes(4096);
    seedPool.at = 0;
  }
  const seed = seedPool.bytes.readBigUInt64BE(seedPool.at);
  seedPool.at += 8;
  return seed.toString();
}
