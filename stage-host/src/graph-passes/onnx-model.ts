import { readFile } from 'node:fs/promises';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { fromFloat16, toFloat16 } from '@diffmesh/tensor-client';

const { onnx } = onnxProto;

export type ModelProto = onnxProto.onnx.ModelProto;
export type NodeProto = onnxProto.onnx.INodeProto;
export type TensorProto = onnxProto.onnx.ITensorProto;
export type AttributeProto = onnxProto.onnx.IAttributeProto;

/** ONNX element types the passes read and write. */
export const DataType = onnx.TensorProto.DataType;

/** The contrib-operator domain of onnxruntime's fused kernels. */
export const MS_DOMAIN = 'com.microsoft';

/**
 * Reads an ONNX file with its external data (`model.onnx_data` beside it, as optimum and
 * `onnx.save_model(..., save_as_external_data=True)` write it) pulled into the initializers,
 * so a pass sees every weight's bytes. The file is only read.
 */
export async function readModelFile(file: string): Promise<ModelProto> {
  const model = onnx.ModelProto.decode(await readFile(file));
  const dir = path.dirname(file);
  const files = new Map<string, Promise<Buffer>>();
  for (const t of model.graph?.initializer ?? []) {
    if (t.dataLocation !== onnx.TensorProto.DataLocation.EXTERNAL) continue;
    const entry = (k: string): string | undefined => (t.externalData ?? []).find((e) => e.key === k)?.value ?? undefined;
    const location = entry('location');
    if (!location) throw new Error(`${file}: initializer ${t.name} is external without a location`);
    let data = files.get(location);
    if (!data) {
      data = readFile(path.resolve(dir, location));
      files.set(location, data);
    }
    const buf = await data;
    const offset = Number(entry('offset') ?? 0);
    const length = entry('length') !== undefined ? Number(entry('length')) : buf.length - offset;
    t.rawData = new Uint8Array(buf.buffer, buf.byteOffset + offset, length);
    t.externalData = [];
    t.dataLocation = onnx.TensorProto.DataLocation.DEFAULT;
  }
  return model;
}

/**
 * Moves the raw bytes of every initializer of at least `minBytes` to an external data file
 * named `location`, as `onnx.save_model(..., save_as_external_data=True)` does: each at a
 * 4096-aligned offset, the tensor keeping `data_location = EXTERNAL` and its
 * `location`/`offset`/`length`. Returns the file's chunks in order (padding included).
 */
export function moveToExternalData(initializers: Iterable<TensorProto>, location: string, minBytes: number): Uint8Array[] {
  const data: Uint8Array[] = [];
  let offset = 0;
  for (const t of initializers) {
    const raw = t.rawData;
    if (!raw || raw.length < minBytes) continue;
    const pad = (4096 - (offset % 4096)) % 4096;
    if (pad > 0) data.push(new Uint8Array(pad));
    offset += pad;
    data.push(raw);
    t.externalData = [
      new onnx.StringStringEntryProto({ key: 'location', value: location }),
      new onnx.StringStringEntryProto({ key: 'offset', value: String(offset) }),
      new onnx.StringStringEntryProto({ key: 'length', value: String(raw.length) }),
    ];
    t.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
    t.rawData = new Uint8Array(0);
    offset += raw.length;
  }
  return data;
}

/** Serialises a model (every weight inside it). */
export function encodeModel(model: ModelProto): Uint8Array {
  return onnx.ModelProto.encode(model).finish();
}

/** Decodes a serialised model. */
export function decodeModel(bytes: Uint8Array): ModelProto {
  return onnx.ModelProto.decode(bytes);
}

/** Bytes the model's weights hold. */
export function weightBytes(model: ModelProto): number {
  let n = 0;
  for (const t of model.graph?.initializer ?? []) n += tensorBytes(t);
  return n;
}

function tensorBytes(t: TensorProto): number {
  if (t.rawData && t.rawData.length > 0) return t.rawData.length;
  return 4 * ((t.floatData?.length ?? 0) + (t.int32Data?.length ?? 0)) + 8 * (t.int64Data?.length ?? 0);
}

/** A node, built the way exporters name them. */
export function makeNode(
  opType: string,
  inputs: string[],
  outputs: string[],
  name: string,
  attrs: AttributeProto[] = [],
  domain = '',
): NodeProto {
  return new onnx.NodeProto({ opType, input: inputs, output: outputs, name, attribute: attrs, domain });
}

export function intAttr(name: string, i: number): AttributeProto {
  return new onnx.AttributeProto({ name, type: onnx.AttributeProto.AttributeType.INT, i });
}

export function floatAttr(name: string, f: number): AttributeProto {
  return new onnx.AttributeProto({ name, type: onnx.AttributeProto.AttributeType.FLOAT, f });
}

/** A tensor with raw little-endian bytes. */
export function makeTensor(name: string, dataType: number, dims: number[], raw: Uint8Array): TensorProto {
  return new onnx.TensorProto({ name, dataType, dims, rawData: raw });
}

/** A float tensor (float32 or float16, as `dataType` says) from float32 values. */
export function floatTensor(name: string, dataType: number, dims: number[], values: Float32Array): TensorProto {
  const raw = dataType === DataType.FLOAT16 ? toFloat16(values) : values;
  return makeTensor(name, dataType, dims, new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength).slice());
}

/** Reads an attribute of a node (ints come back as numbers). */
export function attr(node: NodeProto, name: string): AttributeProto | undefined {
  return (node.attribute ?? []).find((a) => a.name === name);
}

export function attrInt(node: NodeProto, name: string, fallback?: number): number | undefined {
  const a = attr(node, name);
  return a?.i !== undefined && a.i !== null ? Number(a.i) : fallback;
}

export function attrInts(node: NodeProto, name: string): number[] | undefined {
  const a = attr(node, name);
  return a?.ints && a.ints.length > 0 ? a.ints.map(Number) : undefined;
}

export function attrFloat(node: NodeProto, name: string, fallback?: number): number | undefined {
  const a = attr(node, name);
  return a?.f !== undefined && a.f !== null ? a.f : fallback;
}

/** A tensor's values as numbers (float32, float16, int64, int32, double). */
export function tensorValues(t: TensorProto): number[] {
  return Array.from(tensorFloat32(t));
}

/** A float or integer tensor's values as float32 (int64 exact up to 2^24). */
export function tensorFloat32(t: TensorProto): Float32Array {
  const raw = t.rawData && t.rawData.length > 0 ? t.rawData : undefined;
  const dt = t.dataType ?? 0;
  const view = (bytes: Uint8Array): ArrayBuffer => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  switch (dt) {
    case DataType.FLOAT:
      return raw ? new Float32Array(view(raw)) : Float32Array.from(t.floatData ?? []);
    case DataType.FLOAT16:
      return raw ? fromFloat16(new Uint16Array(view(raw))) : fromFloat16(Uint16Array.from((t.int32Data ?? []).map(Number)));
    case DataType.DOUBLE:
      return raw ? Float32Array.from(new Float64Array(view(raw))) : Float32Array.from(t.doubleData ?? []);
    case DataType.INT64:
      return raw ? Float32Array.from(new BigInt64Array(view(raw)), Number) : Float32Array.from((t.int64Data ?? []).map(Number));
    case DataType.INT32:
      return raw ? Float32Array.from(new Int32Array(view(raw))) : Float32Array.from((t.int32Data ?? []).map(Number));
    default:
      throw new Error(`tensor ${t.name ?? ''}: element type ${dt} is not read by the graph passes`);
  }
}

/** A tensor's dims as numbers. */
export function tensorDims(t: TensorProto): number[] {
  return (t.dims ?? []).map(Number);
}

/**
 * An index over one graph: who produces and who consumes each value, the initializers and
 * `Constant` nodes by name. Passes find patterns through it and edit the graph with
 * {@link GraphIndex.replace}; the index is rebuilt after each edit batch ({@link GraphIndex.commit}).
 */
export class GraphIndex {
  private producers = new Map<string, NodeProto>();
  private consumers = new Map<string, NodeProto[]>();
  private initializers = new Map<string, TensorProto>();
  private readonly removed = new Set<NodeProto>();
  private readonly added = new Map<NodeProto, NodeProto[]>();
  private readonly graphOutputs: Set<string>;

  constructor(readonly model: ModelProto) {
    this.graphOutputs = new Set((model.graph?.output ?? []).map((o) => o.name ?? ''));
    this.reindex();
  }

  get nodes(): NodeProto[] {
    return this.model.graph?.node ?? [];
  }

  producer(value: string): NodeProto | undefined {
    return this.producers.get(value);
  }

  consumersOf(value: string): NodeProto[] {
    return this.consumers.get(value) ?? [];
  }

  /** The only consumer of a value that is not a graph output, else undefined. */
  soleConsumer(value: string): NodeProto | undefined {
    const c = this.consumersOf(value);
    return c.length === 1 && !this.graphOutputs.has(value) ? c[0] : undefined;
  }

  isGraphOutput(value: string): boolean {
    return this.graphOutputs.has(value);
  }

  initializer(name: string): TensorProto | undefined {
    return this.initializers.get(name);
  }

  /** The value of a constant (initializer or `Constant` node), or undefined when it is computed. */
  constant(name: string): TensorProto | undefined {
    const init = this.initializers.get(name);
    if (init) return init;
    const p = this.producers.get(name);
    if (p?.opType === 'Constant') return attr(p, 'value')?.t ?? undefined;
    return undefined;
  }

  /** A scalar constant's value (a one-element tensor), or undefined. */
  scalar(name: string): number | undefined {
    const t = this.constant(name);
    if (!t) return undefined;
    const v = tensorValues(t);
    return v.length === 1 ? v[0] : undefined;
  }

  /** Adds a weight. */
  addInitializer(t: TensorProto): void {
    this.model.graph?.initializer?.push(t);
    this.initializers.set(t.name ?? '', t);
  }

  /** Marks `remove` for deletion and puts `add` where the first of them stood. */
  replace(remove: NodeProto[], add: NodeProto[]): void {
    for (const n of remove) this.removed.add(n);
    const at = remove[0];
    this.added.set(at, [...(this.added.get(at) ?? []), ...add]);
  }

  /** Applies the replacements (in topological order), drops initializers nobody reads, rebuilds the index. */
  commit(): void {
    const graph = this.model.graph;
    if (!graph) return;
    const out: NodeProto[] = [];
    const pending = new Map(this.added);
    for (const n of graph.node ?? []) {
      const adds = pending.get(n);
      if (!this.removed.has(n)) out.push(n);
      if (adds) out.push(...adds);
    }
    graph.node = topologicalOrder(out, new Set([...(graph.input ?? []).map((i) => i.name ?? ''), ...this.initializers.keys()]));
    this.removed.clear();
    this.added.clear();
    const used = new Set<string>();
    for (const n of graph.node) for (const i of n.input ?? []) used.add(i);
    for (const o of graph.output ?? []) used.add(o.name ?? '');
    graph.initializer = (graph.initializer ?? []).filter((t) => used.has(t.name ?? ''));
    this.reindex();
  }

  private reindex(): void {
    this.producers = new Map();
    this.consumers = new Map();
    this.initializers = new Map();
    for (const t of this.model.graph?.initializer ?? []) this.initializers.set(t.name ?? '', t);
    for (const n of this.nodes) {
      for (const o of n.output ?? []) this.producers.set(o, n);
      for (const i of n.input ?? []) {
        if (!i) continue;
        const list = this.consumers.get(i) ?? [];
        list.push(n);
        this.consumers.set(i, list);
      }
    }
  }
}

/** Orders nodes so that each comes after the producers of its inputs (stable where it already holds). */
function topologicalOrder(nodes: NodeProto[], available: Set<string>): NodeProto[] {
  const ready = new Set(available);
  ready.add('');
  const out: NodeProto[] = [];
  let rest = nodes;
  while (rest.length > 0) {
    const next: NodeProto[] = [];
    for (const n of rest) {
      if ((n.input ?? []).every((i) => ready.has(i))) {
        out.push(n);
        for (const o of n.output ?? []) ready.add(o);
      } else {
        next.push(n);
      }
    }
    // Inputs produced nowhere (outer-scope values of subgraphs): keep the rest as it was.
    if (next.length === rest.length) return [...out, ...next];
    rest = next;
  }
  return out;
}

/** Makes sure the model imports the `com.microsoft` domain (opset 1). */
export function importMsDomain(model: ModelProto): void {
  const opsets = model.opsetImport ?? [];
  if (!opsets.some((o) => o.domain === MS_DOMAIN)) {
    opsets.push(new onnx.OperatorSetIdProto({ domain: MS_DOMAIN, version: 1 }));
    model.opsetImport = opsets;
  }
}

/** The model's default-domain opset version. */
export function opsetVersion(model: ModelProto): number {
  const o = (model.opsetImport ?? []).find((x) => !x.domain || x.domain === 'ai.onnx');
  return Number(o?.version ?? 0);
}

/** The element type of a value when the graph states it (inputs, outputs, value_info) or a weight has it. */
export function elemTypeOf(index: GraphIndex, value: string): number | undefined {
  const g = index.model.graph;
  for (const v of [...(g?.input ?? []), ...(g?.output ?? []), ...(g?.valueInfo ?? [])]) {
    if (v.name === value) return v.type?.tensorType?.elemType ?? undefined;
  }
  return index.initializer(value)?.dataType ?? undefined;
}
