import type { GraphRewriteOptions } from '@diffmesh/stage-host';

/**
 * The graphs compared: the builder's plain graph; fused = the builder's graph with onnxruntime's
 * `com.microsoft` kernels (MultiHeadAttention, SkipLayerNormalization, Gelu); int4 = the plain
 * graph rewritten at load with the provider's fusions and 4-bit MatMulNBits weights (what a
 * pool with `--kernels fused --weights int4` runs).
 */
export type DitGraph = 'plain' | 'fused' | 'int4';
export const DIT_GRAPHS: readonly DitGraph[] = ['plain', 'fused', 'int4'];

export const GRAPH_REWRITES: Record<DitGraph, GraphRewriteOptions> = {
  plain: {},
  fused: { kernels: 'fused' },
  int4: { kernels: 'fused', weights: 'int4' },
};

/** One provider's run of the DiT at one batch size. */
export interface DitTiming {
  provider: string;
  precision: 'fp32' | 'fp16';
  source: 'diffmesh builder' | 'torch export';
  graph: DitGraph;
  batch: number;
  /** Median ms per step (one denoiser run of the whole batch). */
  msPerStep: number;
  msPerItem: number;
  /** The first run after the session loaded (shader compilation, allocations), ms. */
  firstRunMs: number;
  tflops: number;
}

/** A graph's output against the plain graph's (same inputs, batch 1), and its session's memory. */
export interface DitQuality {
  provider: string;
  precision: 'fp32' | 'fp16';
  graph: DitGraph;
  /** PSNR over the reference output's range (peak-to-peak), dB; Infinity when equal. */
  psnrDb: number;
  meanAbsError: number;
  /** Bytes of the session's weights (after rewriting), and the process's RSS growth while the session was made. */
  weightBytes: number;
  rssGrowthBytes: number;
}

/** PSNR over the reference's peak-to-peak range and the mean absolute error; zeros for the reference itself. */
export function outputError(reference: Float32Array | undefined, got: Float32Array): { psnrDb: number; meanAbsError: number } {
  if (!reference || reference.length !== got.length) return { psnrDb: NaN, meanAbsError: NaN };
  let lo = Infinity;
  let hi = -Infinity;
  let se = 0;
  let ae = 0;
  for (let i = 0; i < got.length; i += 1) {
    lo = Math.min(lo, reference[i]);
    hi = Math.max(hi, reference[i]);
    const d = got[i] - reference[i];
    se += d * d;
    ae += Math.abs(d);
  }
  const mse = se / got.length;
  return { psnrDb: mse === 0 ? Infinity : 10 * Math.log10(((hi - lo) * (hi - lo)) / mse), meanAbsError: ae / got.length };
}

/** PSNR of 8-bit pictures, dB. */
export function pixelPsnr(a: Uint8Array, b: Uint8Array): number {
  let se = 0;
  for (let i = 0; i < a.length; i += 1) se += (a[i] - b[i]) ** 2;
  const mse = se / a.length;
  return mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse);
}

/** Speed of the fused and int4 graphs against the plain one (same provider, precision, batch), and their outputs' error and memory. */
/**
 * A ratio as the tables print it (`1.23×`): two decimals, or two significant digits below 0.1,
 * so a small ratio on a loaded machine never reads as `0.00×`.
 */
export function times(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  return `${v > 0 && v < 0.1 ? v.toPrecision(2) : v.toFixed(2)}×`;
}

export function graphLines(b: { dit: DitTiming[]; quality: DitQuality[] }, f: (v: number, d?: number) => string): string[] {
  const lines: string[] = [];
  const plain = (t: DitTiming) =>
    b.dit.find(
      (x) =>
        x.graph === 'plain' && x.provider === t.provider && x.precision === t.precision && x.source === t.source && x.batch === t.batch,
    );
  const rows = b.dit.filter((t) => t.graph !== 'plain' && plain(t));
  if (rows.length > 0) {
    lines.push('', '| provider | graph | batch | ms / step | plain ms / step | speed-up over plain |', '|---|---|---:|---:|---:|---:|');
    for (const t of rows) {
      const p = plain(t);
      if (p)
        lines.push(
          `| ${t.provider} | ${t.precision} ${t.graph} | ${t.batch} | ${f(t.msPerStep)} | ${f(p.msPerStep)} | ${times(p.msPerStep / t.msPerStep)} |`,
        );
    }
  }
  if (b.quality.length > 0) {
    lines.push(
      '',
      '| provider | graph | output PSNR vs plain fp32 dB | mean abs error | weights MB | RSS growth at load MB |',
      '|---|---|---:|---:|---:|---:|',
    );
    for (const q of b.quality) {
      const psnr = q.psnrDb === Infinity ? 'equal' : f(q.psnrDb);
      lines.push(
        `| ${q.provider} | ${q.precision} ${q.graph} | ${psnr} | ${Number.isFinite(q.meanAbsError) ? q.meanAbsError.toExponential(2) : 'n/a'} | ${f(q.weightBytes / 1e6)} | ${f(q.rssGrowthBytes / 1e6)} |`,
      );
    }
  }
  return lines;
}
