/**
 * Deterministic inputs shared by the scheduler tests and by `test-reference/diffusers_port.py`
 * (the same formulas, so both sides see identical float32 values).
 */
import { readFileSync } from 'node:fs';
import type { NoiseSource } from './types.js';

/** Values in [−1, 1]: `((k·7919 + step·104729 + seed·31) mod 2001)/1000 − 1`, float32. */
export function pattern(seed: number, step: number, n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, k) => ((k * 7919 + step * 104729 + seed * 31) % 2001) / 1000 - 1);
}

/** The port's stand-in denoiser: 0.25·x + c. */
export function portModel(x: Float32Array): Float32Array {
  const c = pattern(7, 0, x.length);
  const a = Math.fround(0.25);
  return Float32Array.from(x, (v, k) => Math.fround(Math.fround(a * v) + c[k]));
}

/** The port's noise: draw d is `pattern(3, 1000 + d, n)`. Counts its draws, can skip ahead. */
export class PatternNoise implements NoiseSource {
  draws = 0;
  values = 0;

  normals(n: number): Float32Array {
    const z = pattern(3, 1000 + this.draws, n);
    this.draws += 1;
    this.values += n;
    return z;
  }
}

/** Seeded standard normals (mulberry32 + Box–Muller), for property tests. */
export class SeededNormals implements NoiseSource {
  private s: number;
  drawn = 0;

  constructor(seed: number) {
    this.s = seed >>> 0;
  }

  private uniform(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  }

  normals(n: number): Float32Array {
    const out = new Float32Array(n);
    for (let k = 0; k < n; k += 1) {
      out[k] = Math.sqrt(-2 * Math.log(this.uniform())) * Math.cos(2 * Math.PI * this.uniform());
    }
    this.drawn += n;
    return out;
  }
}

export interface PortCase {
  name: string;
  config: Record<string, unknown>;
  steps: number;
  options: { strength?: number; eta?: number; imageSeqLen?: number; mu?: number };
  fluxSigmas: boolean;
  timesteps: number[];
  initNoiseSigma: number;
  sigmas?: number[];
  trajectory: number[][];
}

/** The cases `test-reference/diffusers_port.py` computed (test-reference/expected.json). */
export function loadPortCases(): { size: number; cases: PortCase[] } {
  const text = readFileSync(new URL('../../test-reference/expected.json', import.meta.url), 'utf8');
  return JSON.parse(text) as { size: number; cases: PortCase[] };
}

/** Distance in float32 units in the last place. */
export function ulpDiff(a: number, b: number): number {
  if (a === b) return 0;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return Infinity;
  const fa = new Float32Array([a, b]);
  const ia = new Int32Array(fa.buffer);
  const toOrdered = (i: number): number => (i < 0 ? -2147483648 - i : i);
  return Math.abs(toOrdered(ia[0]) - toOrdered(ia[1]));
}
