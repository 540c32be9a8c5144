import { GraphBuilder } from '../onnx/graph.js';
import { castIn, castOut, type Precision } from './text-encoders.js';

/**
 * Exact linear VAEs with optimum's names (`VaeDecoderOnnxConfig`, `VaeEncoderOnnxConfig`):
 *
 * - decoder `latent_sample` [B, C, h, w] → `sample` [B, 3, 8h, 8w]: a 1×1 projection
 *   RGB = M·z (M = identity on channels 0–2, 0.25 from channel 3, small fixed weights from
 *   channels ≥ 4), then ×8 nearest-neighbour upsampling;
 * - encoder `sample` [B, 3, H, W] → `latent_parameters` [B, 2C, H/8, W/8]: 8×8 average
 *   pooling, then z = M⁺·RGB (channels 0–2 = RGB, others 0), concatenated with a log-variance
 *   of −30 (so diffusers' DiagonalGaussianDistribution samples the mean to within 3e-7).
 *   `latentSample: true` gives the older single output `latent_sample` [B, C, H/8, W/8].
 *
 * decode(encode(x)) = x for pictures that are constant on 8×8 blocks. Both maps work on the
 * unscaled latent: pipelines multiply by `scaling_factor` after encoding and divide before
 * decoding.
 */

export const VAE_SCALE = 8;
export const VAE_LOGVAR = -30;

/** The 3×C decoder projection, row-major. */
export function vaeDecoderMatrix(channels: number): Float32Array {
  const m = new Float32Array(3 * channels);
  for (let r = 0; r < 3; r += 1) {
    m[r * channels + r] = 1;
    if (channels > 3) m[r * channels + 3] = 0.25;
    for (let c = 4; c < channels; c += 1) m[r * channels + c] = 0.05 * Math.sin(1 + r * channels + c);
  }
  return m;
}

/** Decodes an unscaled latent [C, h, w] to RGB in [-1, 1] nominal, [3, 8h, 8w] row-major. */
export function vaeDecode(latent: Float32Array, channels: number, h: number, w: number): Float32Array {
  const m = vaeDecoderMatrix(channels);
  const H = h * VAE_SCALE;
  const W = w * VAE_SCALE;
  const out = new Float32Array(3 * H * W);
  for (let r = 0; r < 3; r += 1) {
    for (let i = 0; i < h; i += 1) {
      for (let j = 0; j < w; j += 1) {
        let acc = 0;
        for (let c = 0; c < channels; c += 1) acc += m[r * channels + c] * latent[(c * h + i) * w + j];
        for (let di = 0; di < VAE_SCALE; di += 1) {
          const row = (r * H + i * VAE_SCALE + di) * W + j * VAE_SCALE;
          out.fill(acc, row, row + VAE_SCALE);
        }
      }
    }
  }
  return out;
}

/**
 * RGB [3, H, W] in [-1, 1] → uint8 [H, W, 3] the way diffusers' VaeImageProcessor does:
 * (x / 2 + 0.5) clamped to [0, 1], × 255, rounded.
 */
export function toUint8Image(rgb: Float32Array, H: number, W: number): Uint8Array {
  const out = new Uint8Array(H * W * 3);
  for (let r = 0; r < 3; r += 1) {
    for (let p = 0; p < H * W; p += 1) {
      const v = Math.min(1, Math.max(0, rgb[r * H * W + p] / 2 + 0.5));
      out[p * 3 + r] = Math.round(v * 255);
    }
  }
  return out;
}

export interface VaeGraphOptions {
  latentChannels: number;
  precision: Precision;
}

/** `vae_decoder/model.onnx`. */
export function buildVaeDecoderOnnx(opts: VaeGraphOptions): Uint8Array {
  const C = opts.latentChannels;
  const g = new GraphBuilder('vae_decoder');
  const ft = opts.precision === 'fp16' ? 'float16' : 'float32';
  const z = castIn(g, g.input('latent_sample', ft, ['batch_size', C, 'latent_height', 'latent_width']), opts.precision);
  const w = g.weight('decoder.conv_out.weight', vaeDecoderMatrix(C), [3, C, 1, 1]);
  const rgb = g.op('Conv', [z, w], { kernel_shape: [1, 1] });
  const up = g.op('Resize', [rgb, '', g.f32([1, 1, VAE_SCALE, VAE_SCALE])], {
    mode: 'nearest',
    coordinate_transformation_mode: 'asymmetric',
    nearest_mode: 'floor',
  });
  g.output(castOut(g, up, opts.precision), 'sample', ft, ['batch_size', 3, `latent_height * ${VAE_SCALE}`, `latent_width * ${VAE_SCALE}`]);
  return g.build('diffmesh analytic VAE decoder (test model)');
}

/** `vae_encoder/model.onnx`. */
export function buildVaeEncoderOnnx(opts: VaeGraphOptions & { latentSample?: boolean }): Uint8Array {
  const C = opts.latentChannels;
  const g = new GraphBuilder('vae_encoder');
  const ft = opts.precision === 'fp16' ? 'float16' : 'float32';
  const x = castIn(g, g.input('sample', ft, ['batch_size', 3, 'sample_height', 'sample_width']), opts.precision);
  const pooled = g.op('AveragePool', [x], { kernel_shape: [VAE_SCALE, VAE_SCALE], strides: [VAE_SCALE, VAE_SCALE] });
  const pinv = new Float32Array(C * 3);
  for (let r = 0; r < 3; r += 1) pinv[r * 3 + r] = 1;
  const mean = g.op('Conv', [pooled, g.weight('encoder.conv_out.weight', pinv, [C, 3, 1, 1])], { kernel_shape: [1, 1] });
  const dims = ['batch_size', opts.latentSample ? C : 2 * C, `sample_height / ${VAE_SCALE}`, `sample_width / ${VAE_SCALE}`];
  if (opts.latentSample) {
    g.output(castOut(g, mean, opts.precision), 'latent_sample', ft, dims);
  } else {
    const logvar = g.op('Add', [g.op('Mul', [mean, g.f32(0)]), g.f32(VAE_LOGVAR)]);
    const params = g.op('Concat', [mean, logvar], { axis: 1 });
    g.output(castOut(g, params, opts.precision), 'latent_parameters', ft, dims);
  }
  return g.build('diffmesh analytic VAE encoder (test model)');
}
