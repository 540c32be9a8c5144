import { fluxPipelineSigmas } from '../schedulers/index.js';
import { conditioning, type Item, type LatentSize, type ModelFamily } from './model-family.js';

/**
 * FLUX (FluxPipeline): the T5 rows as `encoder_hidden_states`, CLIP's pooled output as
 * `pooled_projections`, the guidance scale as `guidance` where the transformer embeds it (dev;
 * schnell has none), zero `txt_ids` and `img_ids` (0, row, col) shared by every item; the latent
 * packed into 2×2 tokens; the timestep as σ = t/1000; the scheduler given FluxPipeline's sigmas
 * and the packed token count (dynamic shifting).
 */
export const flux: ModelFamily = {
  kind: 'flux',
  async conditioning({ task, inputs, latent, embeds }) {
    const t5 = await embeds('prompt_embeds_2');
    const cond: Record<string, Item> = { encoder_hidden_states: t5, pooled_projections: await embeds('pooled_prompt_embeds') };
    if (inputs.has('guidance')) cond.guidance = { data: Float32Array.of(task.params.guidanceScale), dims: [] };
    const T = t5.dims[0];
    const tokens = (latent.height / 2) * (latent.width / 2);
    const rank = (name: string) => inputs.get(name)?.shape?.length ?? 2;
    const shared: Record<string, Item> = {
      txt_ids: { data: new Float32Array(T * 3), dims: rank('txt_ids') === 3 ? [1, T, 3] : [T, 3] },
      img_ids: { data: latentImageIds(latent.height, latent.width), dims: rank('img_ids') === 3 ? [1, tokens, 3] : [tokens, 3] },
    };
    return conditioning(cond, undefined, shared);
  },
  pack: (latent, { channels, height, width }) => packLatents(latent, channels, height, width),
  unpack: (x, { channels, height, width }) => unpackLatents(x, channels, height, width),
  sampleDims: ({ channels, height, width }: LatentSize) => [(height / 2) * (width / 2), 4 * channels],
  timestep: (t) => t / 1000,
  schedulerOptions: (_layout, steps, { height, width }) => ({ sigmas: fluxPipelineSigmas(steps), imageSeqLen: (height / 2) * (width / 2) }),
};

/**
 * FLUX's 2×2 latent packing (FluxPipeline `_pack_latents` / `_unpack_latents`): a latent
 * [C, h, w] becomes (h/2)·(w/2) tokens of 4·C values, token (r, c) holding channel k at
 * `4·k + 2·dy + dx` from pixel (2r + dy, 2c + dx).
 */
export function packLatents(latent: Float32Array, channels: number, h: number, w: number): Float32Array {
  const out = new Float32Array(latent.length);
  forEachPackedValue(channels, h, w, (token, pixel) => {
    out[token] = latent[pixel];
  });
  return out;
}

/** The inverse of {@link packLatents}: tokens [(h/2)(w/2), 4·C] → latent [C, h, w]. */
export function unpackLatents(packed: Float32Array, channels: number, h: number, w: number): Float32Array {
  const out = new Float32Array(packed.length);
  forEachPackedValue(channels, h, w, (token, pixel) => {
    out[pixel] = packed[token];
  });
  return out;
}

/** Calls `visit(packed index, latent index)` for every value of an h×w latent of `channels` channels. */
function forEachPackedValue(channels: number, h: number, w: number, visit: (token: number, pixel: number) => void): void {
  const H2 = h / 2;
  const W2 = w / 2;
  for (let r = 0; r < H2; r += 1) {
    for (let c = 0; c < W2; c += 1) {
      const token = (r * W2 + c) * channels * 4;
      for (let k = 0; k < channels; k += 1) {
        for (let dy = 0; dy < 2; dy += 1) {
          for (let dx = 0; dx < 2; dx += 1) visit(token + 4 * k + 2 * dy + dx, (k * h + 2 * r + dy) * w + 2 * c + dx);
        }
      }
    }
  }
}

/** FLUX `img_ids`: one row (0, row, col) per packed token of an h×w latent. */
export function latentImageIds(h: number, w: number): Float32Array {
  const H2 = h / 2;
  const W2 = w / 2;
  const ids = new Float32Array(H2 * W2 * 3);
  for (let r = 0; r < H2; r += 1) {
    for (let c = 0; c < W2; c += 1) {
      ids[(r * W2 + c) * 3 + 1] = r;
      ids[(r * W2 + c) * 3 + 2] = c;
    }
  }
  return ids;
}
