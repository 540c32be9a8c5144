/** The state of a {@link NoiseRng}: the xoshiro128** words and a pending Box–Muller value. */
export interface NoiseRngState {
  s: [number, number, number, number];
  spare?: number;
}

/**
 * Seeded Gaussian noise that is reproducible bit for bit: a 64-bit seed (decimal string)
 * is expanded with SplitMix64 into xoshiro128** state; Box–Muller turns pairs of uniforms
 * into normals. Only integer arithmetic and Math.log/sqrt/cos are involved.
 */
export class NoiseRng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  private spare: number | undefined;

  constructor(seed: string | bigint) {
    let x = BigInt.asUintN(64, typeof seed === 'bigint' ? seed : BigInt(seed));
    const next32 = (): number => {
      x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n);
      let z = x;
      z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
      z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
      z ^= z >> 31n;
      return Number(z & 0xffffffffn) >>> 0;
    };
    this.s0 = next32();
    this.s1 = next32();
    this.s2 = next32();
    this.s3 = next32();
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** Everything the stream's next values depend on, to carry a run over to another process. */
  getState(): NoiseRngState {
    // The words are kept as JavaScript's signed or unsigned 32-bit numbers; store them unsigned.
    const s: NoiseRngState['s'] = [this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0];
    return { s, ...(this.spare === undefined ? {} : { spare: this.spare }) };
  }

  /** A stream that goes on exactly where the one whose state this is stood. */
  static fromState(state: NoiseRngState): NoiseRng {
    const [s0, s1, s2, s3] = state.s;
    if (![s0, s1, s2, s3].every((v) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff) || (s0 | s1 | s2 | s3) === 0) {
      throw new RangeError('noise state: expected four unsigned 32-bit words, not all zero');
    }
    const rng = new NoiseRng(0n);
    rng.s0 = s0;
    rng.s1 = s1;
    rng.s2 = s2;
    rng.s3 = s3;
    rng.spare = state.spare;
    return rng;
  }

  /** Next uniform 32-bit integer (xoshiro128**). */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform in (0, 1). */
  uniform(): number {
    return (this.nextU32() + 0.5) / 4294967296;
  }

  normal(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    const r = Math.sqrt(-2 * Math.log(this.uniform()));
    const theta = 2 * Math.PI * this.uniform();
    this.spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  }

  /** `n` standard normal samples as float32. */
  normals(n: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i += 1) out[i] = this.normal();
    return out;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
