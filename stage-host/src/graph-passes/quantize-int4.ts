import type { GraphPass, PassRefusal } from './graph-pass.js';
import {
  attrInts,
  DataType,
  importMsDomain,
  intAttr,
  makeNode,
  makeTensor,
  MS_DOMAIN,
  tensorDims,
  tensorFloat32,
  floatTensor,
  type GraphIndex,
  type NodeProto,
  type TensorProto,
} from './onnx-model.js';
import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';

/** Block size of the 4-bit weights: 32 values of one column share a scale. */
export const INT4_BLOCK = 32;

export interface Int4Options {
  /** Weights with fewer values stay as they are (default 16384). */
  minElements?: number;
  /** `accuracy_level` of MatMulNBits (onnxruntime: 0 unset, 1 fp32, 2 fp16, 3 bf16, 4 int8 compute). Default unset. */
  accuracyLevel?: number;
}

/** A weight `[K, N]` quantized the way onnxruntime's `MatMul4BitsQuantizer` (symmetric, no zero points) does. */
export interface Int4Weight {
  K: number;
  N: number;
  /** `[N, ⌈K/32⌉, 16]`: column n's block b holds rows 32b…32b+31, two per byte, the lower row in the low nibble. */
  packed: Uint8Array;
  /** `[N · ⌈K/32⌉]`, column-major by block: scale of column n, block b at `n · ⌈K/32⌉ + b`. */
  scales: Float32Array;
}

/**
 * Quantizes a row-major `[K, N]` float weight to 4 bits per value, as onnxruntime's MLAS
 * `MlasQuantizeBlockwise` does for `MatMulNBits` with `is_symmetric`: per column and block of
 * 32 rows (the last padded with zeros), `scale = m / −8` where m is the value of largest
 * magnitude (sign kept), `q = clamp(round(w / scale) + 8, 0, 15)`; the missing zero points mean
 * 8. `roundScale` rounds each scale to the precision it is stored in before the values are
 * quantized with it.
 */
export function quantizeInt4(w: Float32Array, K: number, N: number, roundScale: (s: number) => number = (s) => s): Int4Weight {
  const blocks = Math.ceil(K / INT4_BLOCK);
  const blob = INT4_BLOCK / 2;
  const packed = new Uint8Array(N * blocks * blob);
  const scales = new Float32Array(N * blocks);
  const q = new Uint8Array(INT4_BLOCK);
  for (let n = 0; n < N; n += 1) {
    for (let b = 0; b < blocks; b += 1) {
      const k0 = b * INT4_BLOCK;
      const len = Math.min(INT4_BLOCK, K - k0);
      let amax = 0;
      let max = 0;
      for (let i = 0; i < len; i += 1) {
        const v = w[(k0 + i) * N + n];
        if (Math.abs(v) > amax) {
          amax = Math.abs(v);
          max = v;
        }
      }
      const scale = roundScale(max / -8);
      const inv = scale !== 0 ? 1 / scale : 0;
      scales[n * blocks + b] = scale;
      q.fill(8);
      for (let i = 0; i < len; i += 1) q[i] = Math.min(15, Math.max(0, Math.round(w[(k0 + i) * N + n] * inv + 8)));
      const at = (n * blocks + b) * blob;
      for (let j = 0; j < blob; j += 1) packed[at + j] = q[2 * j] | (q[2 * j + 1] << 4);
    }
  }
  return { K, N, packed, scales };
}

/** The float weight `[K, N]` a 4-bit weight stands for (what MatMulNBits multiplies by). */
export function dequantizeInt4(q: Int4Weight): Float32Array {
  const { K, N, packed, scales } = q;
  const blocks = Math.ceil(K / INT4_BLOCK);
  const out = new Float32Array(K * N);
  for (let n = 0; n < N; n += 1) {
    for (let k = 0; k < K; k += 1) {
      const b = Math.floor(k / INT4_BLOCK);
      const i = k % INT4_BLOCK;
      const byte = packed[(n * blocks + b) * (INT4_BLOCK / 2) + (i >> 1)];
      const v = i % 2 === 0 ? byte & 0xf : byte >> 4;
      out[k * N + n] = (v - 8) * scales[n * blocks + b];
    }
  }
  return out;
}

/**
 * Every `MatMul` whose second operand is a constant float `[K, N]` weight — as it is, or behind
 * a `Transpose` of a `[N, K]` weight (`….to_q.weight`, as torch exports `nn.Linear`) — with at
 * least `minElements` values becomes `com.microsoft.MatMulNBits` (bits 4, block 32, symmetric,
 * scales in the weight's precision): about 1/7 of float32's bytes. A constant operand it cannot
 * read (not 2-D, not float) is refused by node name.
 */
export function int4Weights(opts: Int4Options = {}): GraphPass {
  const minElements = opts.minElements ?? 16384;
  return {
    name: 'int4-weights',
    run(g) {
      const refused: PassRefusal[] = [];
      const done = new Map<string, { b: string; scales: string; K: number; N: number }>();
      let rewritten = 0;
      for (const mm of g.nodes.filter((n) => n.opType === 'MatMul')) {
        const found = weightOf(g, mm);
        if (!found) continue;
        if (typeof found === 'string') {
          refused.push({ node: mm.name ?? '', reason: found });
          continue;
        }
        if (found.K * found.N < minElements) continue;
        let q = done.get(found.key);
        if (!q) {
          const half = found.tensor.dataType === DataType.FLOAT16;
          const roundScale = half ? (s: number) => fromFloat16(toFloat16([s]))[0] : (s: number) => Math.fround(s);
          const w = quantizeInt4(found.values(), found.K, found.N, roundScale);
          const base = found.key.replace(/\.weight$/, '');
          const b = `${base}.weight_int4`;
          const scales = `${base}.weight_int4_scales`;
          const blocks = Math.ceil(found.K / INT4_BLOCK);
          g.addInitializer(makeTensor(b, DataType.UINT8, [found.N, blocks, INT4_BLOCK / 2], w.packed));
          g.addInitializer(floatTensor(scales, half ? DataType.FLOAT16 : DataType.FLOAT, [found.N * blocks], w.scales));
          q = { b, scales, K: found.K, N: found.N };
          done.set(found.key, q);
        }
        const attrs = [intAttr('K', q.K), intAttr('N', q.N), intAttr('bits', 4), intAttr('block_size', INT4_BLOCK)];
        if (opts.accuracyLevel) attrs.push(intAttr('accuracy_level', opts.accuracyLevel));
        const remove = found.transpose && g.soleConsumer(found.transpose.output?.[0] ?? '') ? [mm, found.transpose] : [mm];
        g.replace(remove, [
          makeNode(
            'MatMulNBits',
            [mm.input?.[0] ?? '', q.b, q.scales],
            [mm.output?.[0] ?? ''],
            `${mm.name ?? 'MatMul'}_Q4`,
            attrs,
            MS_DOMAIN,
          ),
        ]);
        rewritten += 1;
      }
      if (rewritten > 0) importMsDomain(g.model);
      return { rewritten, refused };
    },
  };
}

interface FoundWeight {
  key: string;
  tensor: TensorProto;
  K: number;
  N: number;
  transpose?: NodeProto;
  values(): Float32Array;
}

function weightOf(g: GraphIndex, mm: NodeProto): FoundWeight | string | undefined {
  const name = mm.input?.[1] ?? '';
  const direct = g.initializer(name);
  if (direct) {
    const dims = tensorDims(direct);
    if (!isFloat(direct) || dims.length !== 2) return `its weight ${name} is not a 2-D float tensor`;
    return { key: name, tensor: direct, K: dims[0], N: dims[1], values: () => tensorFloat32(direct) };
  }
  const t = g.producer(name);
  const src = t?.opType === 'Transpose' ? g.initializer(t.input?.[0] ?? '') : undefined;
  if (!t || !src) return undefined;
  const dims = tensorDims(src);
  const perm = attrInts(t, 'perm') ?? [1, 0];
  if (!isFloat(src) || dims.length !== 2 || perm[0] !== 1 || perm[1] !== 0)
    return `its weight ${src.name ?? ''} behind a Transpose is not a 2-D float tensor`;
  const [N, K] = dims;
  return {
    key: src.name ?? name,
    tensor: src,
    K,
    N,
    transpose: t,
    values: () => {
      const wt = tensorFloat32(src);
      const w = new Float32Array(K * N);
      for (let n = 0; n < N; n += 1) for (let k = 0; k < K; k += 1) w[k * N + n] = wt[n * K + k];
      return w;
    },
  };
}

function isFloat(t: TensorProto): boolean {
  return t.dataType === DataType.FLOAT || t.dataType === DataType.FLOAT16;
}
