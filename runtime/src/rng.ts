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
