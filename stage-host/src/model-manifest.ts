import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

/**
 * `model.json`, the manifest that sits beside a model's ONNX files. Stage services read it
 * to know which files to load and how to drive them.
 *
 * ONNX I/O contract (names are fixed; B = batch, L = text length, D = hidden size,
 * C = latent channels, F = latent frames, h/w = latent height/width):
 * - text encoder: `input_ids` int64 [B, L] → `last_hidden_state` float32 [B, L, D]
 * - denoiser: `sample` float32 [B, C, F, h, w], `timestep` float32 [B],
 *   `encoder_hidden_states` float32 [B, L, D] → `out` float32 [B, C, F, h, w]
 *   (`out` is the velocity for `prediction: flow`, the noise for `prediction: epsilon`;
 *   `timestep` is sigma × 1000 for flow models and the integer training step for epsilon models)
 * - VAE decoder: `latent` float32 [B, C, F, h, w] → `sample` float32 [B, 3, frames, H, W] in [-1, 1]
 * - VAE encoder (optional; image-to-video): `sample` float32 [B, 3, frames, H, W] in [-1, 1] →
 *   `latent` float32 [B, C, F, h, w]
 */
export const ModelManifestSchema = z.object({
  /** Registry name, e.g. `diffmesh/tiny-shapes`. */
  name: z.string().min(1),
  /** Semver of the model files. */
  version: z.string().min(1),
  description: z.string().default(''),
  modalities: z.array(z.enum(['text-to-image', 'text-to-video', 'image-to-video'])).min(1),
  prediction: z.enum(['flow', 'epsilon']),
  /** Sampler settings the denoiser was made for. */
  sampler: z.discriminatedUnion('type', [
    z.object({
      type: z.literal('flow_euler'),
      /** Timestep shift (SD3/Wan style); 1 = none. */
      shift: z.number().positive().default(1),
    }),
    z.object({
      type: z.literal('ddim'),
      numTrainTimesteps: z.number().int().positive().default(1000),
      betaStart: z.number().positive().default(0.00085),
      betaEnd: z.number().positive().default(0.012),
      betaSchedule: z.enum(['linear', 'scaled_linear']).default('scaled_linear'),
    }),
  ]),
  latent: z.object({
    channels: z.number().int().positive(),
    /** Pixels per latent cell along height and width (the VAE scale factor). */
    spatialFactor: z.number().int().positive(),
    /** Frames per latent frame after the first (1 = no temporal compression). */
    temporalFactor: z.number().int().positive().default(1),
  }),
  /**
   * Live previews: the linear map of the latent channels to RGB (`rgbFactors[c]` = the R, G, B
   * weights of channel c; RGB in [-1, 1] like the decoder's output) plus `rgbBias`. Absent = the
   * previewer's fallback (the first three channels, each normalised).
   */
  preview: z
    .object({
      rgbFactors: z.array(z.array(z.number()).length(3)).min(1),
      rgbBias: z.array(z.number()).length(3).optional(),
    })
    .optional(),
  text: z.object({
    tokenizer: z.string().default('tokenizer.json'),
    maxLength: z.number().int().positive(),
    hiddenSize: z.number().int().positive(),
    padId: z.number().int().nonnegative().default(0),
  }),
  defaults: z.object({
    width: z.number().int().positive(),
    height: z.number().int().positive(),
    numFrames: z.number().int().positive().default(1),
    steps: z.number().int().positive(),
    guidanceScale: z.number().nonnegative(),
    fps: z.number().int().positive().default(8),
  }),
  limits: z.object({
    maxWidth: z.number().int().positive(),
    maxHeight: z.number().int().positive(),
    maxFrames: z.number().int().positive().default(1),
  }),
  files: z.object({
    textEncoder: z.string().default('text_encoder.onnx'),
    denoiser: z.string().default('denoiser.onnx'),
    vaeDecoder: z.string().default('vae_decoder.onnx'),
    /** The VAE encoder, for models that take an input image (image-to-video); absent = none. */
    vaeEncoder: z.string().optional(),
  }),
});

export type ModelManifest = z.infer<typeof ModelManifestSchema>;
export type ModelManifestInput = z.input<typeof ModelManifestSchema>;

/** A manifest together with the directory its files live in. */
export interface LoadedManifest {
  dir: string;
  manifest: ModelManifest;
  /** Absolute path of a file named in the manifest. */
  file(name: keyof ModelManifest['files'] | 'tokenizer'): string;
}

/** Reads and validates `<dir>/model.json`. */
export async function readModelManifest(dir: string): Promise<LoadedManifest> {
  const raw = JSON.parse(await readFile(path.join(dir, 'model.json'), 'utf8')) as unknown;
  const manifest = ModelManifestSchema.parse(raw);
  return {
    dir,
    manifest,
    file(name) {
      const rel = name === 'tokenizer' ? manifest.text.tokenizer : manifest.files[name];
      if (rel === undefined) throw new Error(`${dir}/model.json names no ${name} file`);
      return path.join(dir, rel);
    },
  };
}

/** Number of latent frames for a requested frame count. */
export function latentFrames(numFrames: number, temporalFactor: number): number {
  return temporalFactor === 1 ? numFrames : Math.floor((numFrames - 1) / temporalFactor) + 1;
}
