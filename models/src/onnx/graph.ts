import onnxProto from 'onnx-proto';
import { toFloat16 } from '@diffmesh/tensor-client';
import { moveToExternalData } from '@diffmesh/stage-host';

export { moveToExternalData };

const { onnx } = onnxProto;

/** ONNX element types used by the built-in models. */
export type ElemType = 'float32' | 'float16' | 'int64' | 'int32' | 'bool';

const ELEM: Record<ElemType, number> = {
  float32: onnx.TensorProto.DataType.FLOAT,
  float16: onnx.TensorProto.DataType.FLOAT16,
  int64: onnx.TensorProto.DataType.INT64,
  int32: onnx.TensorProto.DataType.INT32,
  bool: onnx.TensorProto.DataType.BOOL,
};

/** A float attribute value (plain numbers are taken as ints). */
export interface FloatAttr {
  f: number;
}
/** A list-of-floats attribute value. */
export interface FloatsAttr {
  floats: number[];
}
export type AttrValue = number | number[] | string | FloatAttr | FloatsAttr;

/** Dimension: a fixed size or a symbolic name (e.g. 'batch'). */
export type Dim = number | string;

/** How the layers write attention, norms and GELU (see {@link GraphBuilderOptions.kernels}). */
export type GraphKernels = 'plain' | 'fused';

export interface GraphBuilderOptions {
  /**
   * `fused`: layers write onnxruntime's `com.microsoft` kernels (MultiHeadAttention,
   * SkipLayerNormalization, Gelu), which its CPU, CUDA and WebGPU providers have; `plain`
   * (default): standard ONNX ops only (MatMul/Softmax/Erf), for any provider.
   */
  kernels?: GraphKernels;
}

/**
 * A small, deterministic builder for ONNX graphs (opset 17). Names of intermediate values
 * are generated from a counter, so the same sequence of calls yields the same bytes.
 */
export class GraphBuilder {
  private readonly nodes: InstanceType<typeof onnx.NodeProto>[] = [];
  private readonly initializers: InstanceType<typeof onnx.TensorProto>[] = [];
  private readonly inputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  private readonly outputs: InstanceType<typeof onnx.ValueInfoProto>[] = [];
  private counter = 0;
  private readonly constCache = new Map<string, string>();
  private usesMsDomain = false;
  /** Whether layers write fused `com.microsoft` kernels. */
  readonly fused: boolean;

  constructor(
    readonly name: string,
    opts: GraphBuilderOptions = {},
  ) {
    this.fused = opts.kernels === 'fused';
  }

  /** A fresh value name with a readable prefix. */
  fresh(prefix: string): string {
    this.counter += 1;
    return `${prefix}_${this.counter}`;
  }

  input(name: string, type: ElemType, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, type, dims));
    return name;
  }

  output(value: string, name: string, type: ElemType, dims: Dim[]): void {
    this.op('Identity', [value], {}, name);
    this.outputs.push(valueInfo(name, type, dims));
  }

  /** Adds an initializer (a weight) and returns its name. */
  weight(name: string, data: Float32Array | BigInt64Array | Int32Array, dims: number[]): string {
    const expected = dims.reduce((a, b) => a * b, 1);
    if (data.length !== expected) {
      throw new Error(`weight ${name}: ${data.length} values for dims [${dims.join(',')}]`);
    }
    const t = new onnx.TensorProto({ name, dims });
    if (data instanceof Float32Array) {
      t.dataType = ELEM.float32;
    } else if (data instanceof BigInt64Array) {
      t.dataType = ELEM.int64;
    } else {
      t.dataType = ELEM.int32;
    }
    t.rawData = new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
    this.initializers.push(t);
    return name;
  }

  /** A float32 constant (deduplicated). */
  f32(values: number | number[], dims?: number[]): string {
    const arr = Array.isArray(values) ? values : [values];
    const shape = dims ?? (Array.isArray(values) ? [arr.length] : []);
    const key = `f:${shape.join(',')}:${arr.join(',')}`;
    const hit = this.constCache.get(key);
    if (hit) return hit;
    const name = this.weight(this.fresh('cf'), Float32Array.from(arr), shape);
    this.constCache.set(key, name);
    return name;
  }

  /** An int64 constant (deduplicated); used for shapes, axes and indices. */
  i64(values: number | number[], dims?: number[]): string {
    const arr = Array.isArray(values) ? values : [values];
    const shape = dims ?? (Array.isArray(values) ? [arr.length] : []);
    const key = `i:${shape.join(',')}:${arr.join(',')}`;
    const hit = this.constCache.get(key);
    if (hit) return hit;
    const name = this.weight(this.fresh('ci'), BigInt64Array.from(arr.map((v) => BigInt(v))), shape);
    this.constCache.set(key, name);
    return name;
  }

  /** Appends a node with one output and returns that output's name. */
  op(opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, output?: string): string {
    const out = output ?? this.fresh(opType.toLowerCase());
    this.opN(opType, inputs, [out], attrs);
    return out;
  }

  /**
   * Appends a node with a given node name (as exporters name them, `/down_blocks.0/…/to_q/MatMul`)
   * and one output, named after the node unless `output` is given.
   */
  named(nodeName: string, opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, output?: string): string {
    const out = output ?? `${nodeName}_output_0`;
    this.opN(opType, inputs, [out], attrs, '', nodeName);
    return out;
  }

  /** Appends a node with several outputs. */
  opN(
    opType: string,
    inputs: string[],
    outputs: string[],
    attrs: Record<string, AttrValue> = {},
    domain = '',
    nodeName?: string,
  ): string[] {
    const node = new onnx.NodeProto({
      opType,
      input: inputs,
      output: outputs,
      name: nodeName ?? this.fresh(`n_${opType}`),
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
      domain,
    });
    this.nodes.push(node);
    return outputs;
  }

  /** Appends an onnxruntime contrib node (`com.microsoft` domain); empty output names are optional outputs left out. */
  msOp(opType: string, inputs: string[], outputs: string[], attrs: Record<string, AttrValue> = {}): string[] {
    this.usesMsDomain = true;
    return this.opN(opType, inputs, outputs, attrs, 'com.microsoft');
  }

  /**
   * Serialises the model with its large weights in an external data file, as
   * `onnx.save_model(..., save_as_external_data=True)` does (a model over 2 GB must): every
   * initializer of at least `minBytes` goes to `location` at a 4096-aligned offset. Returns the
   * model and the data file's chunks in order (written one after another; nothing is joined
   * in memory).
   */
  buildExternal(location: string, docString = '', minBytes = 1024): { model: Uint8Array; data: Uint8Array[] } {
    const data = moveToExternalData(this.initializers, location, minBytes);
    return { model: this.build(docString), data };
  }

  /**
   * Turns the graph's float32 computation into float16, keeping float32 at its edges (as
   * onnxconverter-common's `convert_float_to_float16(keep_io_types=True)` does): float32
   * weights become float16, casts to float32 cast to float16, every float32 input gets a cast to
   * float16 and every float32 output a cast back. Ops without float16 kernels (`Range`) run in
   * float32 between casts. Call it once, after the graph is complete and before `build`.
   */
  convertToFloat16(): void {
    const FLOAT = ELEM.float32;
    const HALF = ELEM.float16;
    for (const t of this.initializers) {
      if (t.dataType !== FLOAT) continue;
      const raw = t.rawData;
      const f32 = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
      const half = toFloat16(f32);
      t.dataType = HALF;
      t.rawData = new Uint8Array(half.buffer);
    }
    const castTo = (to: number) => (a: onnxProto.onnx.IAttributeProto) => a.name === 'to' && Number(a.i) === to;
    const inner: InstanceType<typeof onnx.NodeProto>[] = [];
    for (const node of this.nodes) {
      if (node.opType === 'Cast') {
        const to = (node.attribute ?? []).find(castTo(FLOAT));
        if (to) to.i = HALF;
      }
      if (node.opType === 'Range') {
        // Range has no float16 kernel: its inputs go back to float32 and its output to float16.
        node.input = node.input.map((x) => {
          const f = this.fresh('range_in_f32');
          inner.push(this.castNode(x, f, FLOAT));
          return f;
        });
        const out = node.output[0];
        const f = this.fresh('range_out_f32');
        node.output = [f];
        inner.push(node, this.castNode(f, out, HALF));
        continue;
      }
      inner.push(node);
    }
    const head: InstanceType<typeof onnx.NodeProto>[] = [];
    for (const v of this.inputs) {
      if (v.type?.tensorType?.elemType !== FLOAT) continue;
      const name = v.name;
      const half = this.fresh(`${name}_f16`);
      head.push(this.castNode(name, half, HALF));
      for (const n of inner) n.input = n.input.map((x) => (x === name ? half : x));
    }
    for (const v of this.outputs) {
      if (v.type?.tensorType?.elemType !== FLOAT) continue;
      // Outputs come from an Identity (see `output`): cast its input back to float32.
      const producer = inner.find((n) => n.output.includes(v.name));
      if (!producer) continue;
      const f32 = this.fresh(`${v.name}_f32`);
      const cast = this.castNode(producer.input[0], f32, FLOAT);
      producer.input = [f32];
      inner.splice(inner.indexOf(producer), 0, cast);
    }
    this.nodes.splice(0, this.nodes.length, ...head, ...inner);
  }

  private castNode(from: string, to: string, elem: number): InstanceType<typeof onnx.NodeProto> {
    return new onnx.NodeProto({
      opType: 'Cast',
      input: [from],
      output: [to],
      name: this.fresh('n_Cast'),
      attribute: [attribute('to', elem)],
    });
  }

  /** Values held by the graph's weights (initializers). */
  get parameterCount(): number {
    let n = 0;
    for (const t of this.initializers) n += (t.dims ?? []).reduce((a: number, d) => a * Number(d), 1);
    return n;
  }

  /** Serialises the model (IR 8, opset 17). */
  build(docString = ''): Uint8Array {
    const graph = new onnx.GraphProto({
      name: this.name,
      node: this.nodes,
      initializer: this.initializers,
      input: this.inputs,
      output: this.outputs,
    });
    const model = new onnx.ModelProto({
      irVersion: 8,
      producerName: 'diffmesh-models',
      producerVersion: '1',
      docString,
      opsetImport: [
        new onnx.OperatorSetIdProto({ domain: '', version: 17 }),
        ...(this.usesMsDomain ? [new onnx.OperatorSetIdProto({ domain: 'com.microsoft', version: 1 })] : []),
      ],
      graph,
    });
    return onnx.ModelProto.encode(model).finish();
  }
}

function valueInfo(name: string, type: ElemType, dims: Dim[]): InstanceType<typeof onnx.ValueInfoProto> {
  return new onnx.ValueInfoProto({
    name,
    type: new onnx.TypeProto({
      tensorType: new onnx.TypeProto.Tensor({
        elemType: ELEM[type],
        shape: new onnx.TensorShapeProto({
          dim: dims.map((d) =>
            typeof d === 'number'
              ? new onnx.TensorShapeProto.Dimension({ dimValue: d })
              : new onnx.TensorShapeProto.Dimension({ dimParam: d }),
          ),
        }),
      }),
    }),
  });
}

function attribute(name: string, v: AttrValue): InstanceType<typeof onnx.AttributeProto> {
  const A = onnx.AttributeProto.AttributeType;
  if (typeof v === 'number') return new onnx.AttributeProto({ name, type: A.INT, i: v });
  if (typeof v === 'string') {
    return new onnx.AttributeProto({ name, type: A.STRING, s: new TextEncoder().encode(v) });
  }
  if (Array.isArray(v)) return new onnx.AttributeProto({ name, type: A.INTS, ints: v });
  if ('f' in v) return new onnx.AttributeProto({ name, type: A.FLOAT, f: v.f });
  return new onnx.AttributeProto({ name, type: A.FLOATS, floats: v.floats });
}

/**
 * Deterministic pseudo-random numbers for weights (mulberry32 + Box–Muller), so that
 * a builder run twice writes identical files on every machine.
 */
export class WeightRng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  uniform(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  normal(): number {
    const u1 = Math.max(this.uniform(), 1e-12);
    const u2 = this.uniform();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }
  /** `n` values from N(0, std²), rounded through float32. */
  normals(n: number, std: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i += 1) out[i] = this.normal() * std;
    return out;
  }
}
