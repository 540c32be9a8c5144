import { open, type FileHandle } from 'node:fs/promises';

/** Element types of ONNX tensors, as diffmesh names them (onnxruntime's names). */
export type OnnxElementType =
  | 'float32'
  | 'uint8'
  | 'int8'
  | 'uint16'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'string'
  | 'bool'
  | 'float16'
  | 'float64'
  | 'uint32'
  | 'uint64'
  | 'bfloat16'
  | 'other';

/** TensorProto.DataType numbers → names. */
const ELEMENT_TYPES: Record<number, OnnxElementType> = {
  1: 'float32',
  2: 'uint8',
  3: 'int8',
  4: 'uint16',
  5: 'int16',
  6: 'int32',
  7: 'int64',
  8: 'string',
  9: 'bool',
  10: 'float16',
  11: 'float64',
  12: 'uint32',
  13: 'uint64',
  16: 'bfloat16',
};

/** A dimension: a fixed size, or a symbolic name (`batch_size`), or unknown (`undefined`). */
export type GraphDim = number | string | undefined;

/** One input or output of a graph. */
export interface GraphValue {
  name: string;
  /** `other` for non-tensor values (sequences, maps). */
  type: OnnxElementType;
  /** `undefined` when the graph does not say (any rank). */
  shape: GraphDim[] | undefined;
}

/** The inputs and outputs of an ONNX model's main graph. */
export interface GraphIo {
  file: string;
  inputs: GraphValue[];
  outputs: GraphValue[];
}

/**
 * Reads the inputs and outputs of `model.onnx` without reading its weights: the protobuf is
 * walked field by field and every initializer, node and attribute is skipped by its length,
 * so a multi-gigabyte model costs a few small reads. Inputs that are also initializers (exports
 * with IR version < 4 list weights as inputs) are left out. Throws an Error naming the file for
 * a file that is not an ONNX model.
 */
export async function readGraphIo(file: string): Promise<GraphIo> {
  const handle = await open(file, 'r');
  try {
    const reader = new WindowReader(handle, (await handle.stat()).size);
    const graph = await findField(reader, 0, reader.size, 7);
    if (!graph) throw new Error(`${file}: not an ONNX model (no graph)`);
    const inputs: GraphValue[] = [];
    const outputs: GraphValue[] = [];
    const initializers = new Set<string>();
    let pos = graph.start;
    while (pos < graph.end) {
      const f = await reader.field(pos);
      if (f.wire === 2 && (f.number === 11 || f.number === 12)) {
        const value = parseValueInfo(await reader.bytes(f.start, f.end));
        (f.number === 11 ? inputs : outputs).push(value);
      } else if (f.wire === 2 && f.number === 5) {
        const name = await tensorName(reader, f.start, f.end);
        if (name !== undefined) initializers.add(name);
      }
      pos = f.next;
    }
    return { file, inputs: inputs.filter((i) => !initializers.has(i.name)), outputs };
  } catch (err) {
    if (err instanceof ProtoError) throw new Error(`${file}: not a readable ONNX model (${err.message})`);
    throw err;
  } finally {
    await handle.close();
  }
}

class ProtoError extends Error {}

interface Field {
  number: number;
  wire: number;
  /** Payload range (length-delimited fields); for others, start = end = the value's position. */
  start: number;
  end: number;
  /** Position of the next field. */
  next: number;
}

/** Random access to a file through a 64 KiB window, for walking protobuf fields. */
class WindowReader {
  private buf = Buffer.alloc(0);
  private at = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
  ) {}

  private async ensure(pos: number, length: number): Promise<void> {
    if (pos >= this.at && pos + length <= this.at + this.buf.length) return;
    const size = Math.min(Math.max(length, 64 * 1024), this.size - pos);
    if (size < length || pos < 0) throw new ProtoError(`truncated at byte ${pos}`);
    const buf = Buffer.alloc(size);
    const { bytesRead } = await this.handle.read(buf, 0, size, pos);
    if (bytesRead < length) throw new ProtoError(`truncated at byte ${pos}`);
    this.buf = buf.subarray(0, bytesRead);
    this.at = pos;
  }

  async bytes(start: number, end: number): Promise<Buffer> {
    await this.ensure(start, end - start);
    return this.buf.subarray(start - this.at, end - this.at);
  }

  /** The field whose tag starts at `pos`. */
  async field(pos: number): Promise<Field> {
    await this.ensure(pos, Math.min(20, this.size - pos));
    const local = new BufferCursor(this.buf, pos - this.at);
    const tag = local.varint();
    const number = Math.floor(tag / 8);
    const wire = tag % 8;
    const start = this.at + local.pos;
    let end = start;
    let next: number;
    switch (wire) {
      case 0:
        local.varint();
        next = this.at + local.pos;
        break;
      case 1:
        next = start + 8;
        break;
      case 2: {
        const length = local.varint();
        const payload = this.at + local.pos;
        end = payload + length;
        if (end > this.size) throw new ProtoError(`field ${number} runs past the end of the file`);
        return { number, wire, start: payload, end, next: end };
      }
      case 5:
        next = start + 4;
        break;
      default:
        throw new ProtoError(`unsupported wire type ${wire} at byte ${pos}`);
    }
    return { number, wire, start, end, next };
  }
}

async function findField(reader: WindowReader, start: number, end: number, number: number): Promise<Field | undefined> {
  let pos = start;
  let found: Field | undefined;
  while (pos < end) {
    const f = await reader.field(pos);
    if (f.number === number && f.wire === 2) found = f;
    pos = f.next;
  }
  return found;
}

/** TensorProto.name (field 8) of an initializer, skipping its data. */
async function tensorName(reader: WindowReader, start: number, end: number): Promise<string | undefined> {
  let pos = start;
  while (pos < end) {
    const f = await reader.field(pos);
    if (f.number === 8 && f.wire === 2) return (await reader.bytes(f.start, f.end)).toString('utf8');
    pos = f.next;
  }
  return undefined;
}

/** Protobuf decoding of a small in-memory message. */
class BufferCursor {
  constructor(
    private readonly buf: Uint8Array,
    public pos = 0,
  ) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i += 1) {
      if (this.pos >= this.buf.length) throw new ProtoError('truncated varint');
      const b = this.buf[this.pos++];
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
    throw new ProtoError('varint too long');
  }

  /** Each field of the message: its number, wire type, and a cursor on its payload. */
  *fields(): Generator<{ number: number; wire: number; payload?: Uint8Array; value?: number }> {
    while (!this.done) {
      const tag = this.varint();
      const number = Math.floor(tag / 8);
      const wire = tag % 8;
      if (wire === 0) yield { number, wire, value: this.varint() };
      else if (wire === 2) {
        const len = this.varint();
        const payload = this.buf.subarray(this.pos, this.pos + len);
        if (payload.length < len) throw new ProtoError('truncated field');
        this.pos += len;
        yield { number, wire, payload };
      } else if (wire === 1) this.pos += 8;
      else if (wire === 5) this.pos += 4;
      else throw new ProtoError(`unsupported wire type ${wire}`);
    }
  }
}

const text = new TextDecoder();

/** ValueInfoProto { name = 1; type = 2 (TypeProto) }. */
function parseValueInfo(buf: Uint8Array): GraphValue {
  let name = '';
  let type: OnnxElementType = 'other';
  let shape: GraphDim[] | undefined;
  for (const f of new BufferCursor(buf).fields()) {
    if (f.number === 1 && f.payload) name = text.decode(f.payload);
    else if (f.number === 2 && f.payload) {
      // TypeProto { tensor_type = 1 (Tensor { elem_type = 1; shape = 2 }) }
      for (const t of new BufferCursor(f.payload).fields()) {
        if (t.number !== 1 || !t.payload) continue;
        for (const tt of new BufferCursor(t.payload).fields()) {
          if (tt.number === 1 && tt.value !== undefined) type = ELEMENT_TYPES[tt.value] ?? 'other';
          else if (tt.number === 2 && tt.payload) shape = parseShape(tt.payload);
        }
      }
    }
  }
  return { name, type, shape };
}

/** TensorShapeProto { dim = 1 (Dimension { dim_value = 1; dim_param = 2 }) }. */
function parseShape(buf: Uint8Array): GraphDim[] {
  const dims: GraphDim[] = [];
  for (const f of new BufferCursor(buf).fields()) {
    if (f.number !== 1 || !f.payload) continue;
    let dim: GraphDim;
    for (const d of new BufferCursor(f.payload).fields()) {
      if (d.number === 1 && d.value !== undefined) dim = d.value;
      else if (d.number === 2 && d.payload) dim = text.decode(d.payload);
    }
    dims.push(dim);
  }
  return dims;
}

/** `[batch_size, 77, 768]` style text of a shape, for messages. */
export function formatShape(shape: GraphDim[] | undefined): string {
  return shape === undefined ? '(any shape)' : `[${shape.map((d) => (d === undefined ? '?' : String(d))).join(', ')}]`;
}
