import type { ConfigReader } from './config.js';
import { invalidUse } from './errors.js';
import { f } from './numeric.js';

/** How a scheduler bounds its x₀ prediction: `thresholding` first, else `clip_sample`. */
export interface SampleClipping {
  thresholding: boolean;
  dynamicThresholdingRatio: number;
  sampleMaxValue: number;
  clipSample: boolean;
  clipSampleRange: number;
}

export function readSampleClipping(r: ConfigReader, clipSampleDefault: boolean | undefined): SampleClipping {
  const thresholding = r.bool('thresholding', false);
  return {
    thresholding,
    dynamicThresholdingRatio: r.number('dynamic_thresholding_ratio', 0.995, { min: 0, max: 1 }),
    sampleMaxValue: r.number('sample_max_value', 1, { gt: 0 }),
    clipSample: clipSampleDefault === undefined ? false : r.bool('clip_sample', clipSampleDefault),
    clipSampleRange: clipSampleDefault === undefined ? 1 : r.number('clip_sample_range', 1, { gt: 0 }),
  };
}

/** Applies diffusers' "4. Clip or threshold predicted x_0" in place. */
export function clipPrediction(x0: Float32Array, c: SampleClipping, batchSize: number): void {
  if (c.thresholding) dynamicThreshold(x0, c.dynamicThresholdingRatio, c.sampleMaxValue, batchSize);
  else if (c.clipSample) {
    const r = f(c.clipSampleRange);
    for (let k = 0; k < x0.length; k += 1) x0[k] = Math.min(Math.max(x0[k], -r), r);
  }
}

/**
 * diffusers `_threshold_sample` (Imagen's dynamic thresholding), in place: per sample of the
 * batch, s = the `ratio` quantile of |x| (torch.quantile, linear), clamped to
 * [1, sampleMaxValue]; x ← clamp(x, −s, s)/s.
 */
export function dynamicThreshold(x: Float32Array, ratio: number, sampleMaxValue: number, batchSize: number): void {
  if (x.length % batchSize !== 0) {
    throw invalidUse(`thresholding: a sample of ${x.length} values does not split into batchSize ${batchSize}`);
  }
  const m = x.length / batchSize;
  for (let b = 0; b < batchSize; b += 1) {
    const part = x.subarray(b * m, (b + 1) * m);
    const sorted = Float32Array.from(part, Math.abs).sort();
    const rank = f(f(ratio) * (m - 1));
    const below = Math.trunc(rank);
    const above = Math.ceil(rank);
    const w = f(rank - below);
    const lo = sorted[below];
    const hi = sorted[above];
    // torch lerp: weight < 0.5 ? a + w·(b − a) : b − (b − a)·(1 − w)
    const q = w < 0.5 ? f(lo + f(w * f(hi - lo))) : f(hi - f(f(hi - lo) * f(1 - w)));
    const s = f(Math.min(Math.max(q, 1), sampleMaxValue));
    for (let k = 0; k < m; k += 1) part[k] = f(Math.min(Math.max(part[k], -s), s) / s);
  }
}
