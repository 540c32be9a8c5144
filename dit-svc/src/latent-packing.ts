/**
 * FLUX's 2×2 latent packing (FluxPipeline `_pack_latents` / `_unpack_latents`): a latent
 * [C, h, w] becomes (h/2)·(w/2) tokens of 4·C values, token (r, c) holding channel k at
 * `4·k + 2·dy + dx` from pixel (2r + dy, 2c + dx).
 */
export function packLatents(latent: Float32Array, channels: number, h: number, w: number): Float32Array {
  const H2 = h / 2;
  const W2 = w / 2;
  const out = new Float32Array(latent.length);
  for (let r = 0; r < H2; r += 1) {
    for (let c = 0; c < W2; c += 1) {
      const token = (r * W2 + c) * channels * 4;
      for (let k = 0; k < channels; k += 1) {
        for (let dy = 0; dy < 2; dy += 1) {
          for (let dx = 0; dx < 2; dx += 1) {
            out[token + 4 * k + 2 * dy + dx] = latent[(k * h + 2 * r + dy) * w + 2 * c + dx];
          }
        }
      }
    }
  }
  return out;
}

/** The inverse of {@link packLatents}: tokens [(h/2)(w/2), 4·C] → latent [C, h, w]. */
export function unpackLatents(packed: Float32Array, channels: number, h: number, w: number): Float32Array {
  const H2 = h / 2;
  const W2 = w / 2;
  const out = new Float32Array(packed.length);
  for (let r = 0; r < H2; r += 1) {
    for (let c = 0; c < W2; c += 1) {
      const token = (r * W2 + c) * channels * 4;
      for (let k = 0; k < channels; k += 1) {
        for (let dy = 0; dy < 2; dy += 1) {
          for (let dx = 0; dx < 2; dx += 1) {
            out[(k * h + 2 * r + dy) * w + 2 * c + dx] = packed[token + 4 * k + 2 * dy + dx];
          }
        }
      }
    }
  }
  return out;
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

/**
 * The guidance-scale embedding LCM UNets take as `timestep_cond` (diffusers
 * `get_guidance_scale_embedding(w, embedding_dim)`, w = guidance_scale − 1): sin and cos of
 * 1000·w times `dim/2` log-spaced frequencies, zero-padded to an odd `dim`.
 */
export function guidanceScaleEmbedding(w: number, dim: number): Float32Array {
  const half = Math.floor(dim / 2);
  const out = new Float32Array(dim);
  const step = Math.log(10000) / (half - 1);
  for (let i = 0; i < half; i += 1) {
    const arg = Math.fround(Math.fround(w * 1000) * Math.fround(Math.exp(-step * i)));
    out[i] = Math.sin(arg);
    out[half + i] = Math.cos(arg);
  }
  return out;
}
