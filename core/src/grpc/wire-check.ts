/**
 * A strict reading of the protobuf wire format against a message's descriptor, run on every
 * request message a diffmesh server receives before it is decoded. protobufjs (what the
 * proto-loader deserializers use) trusts the bytes: a field sent with the wrong wire type is
 * read as whatever the schema says, invalid UTF-8 in a string is replaced silently, a group
 * nested a million deep overflows the stack, and a packed field of 16 MiB becomes sixteen
 * million strings. This check finds those first and says where: the field (by number and by
 * its proto name, with the path through nested messages) and what is wrong with it.
 *
 * It allocates nothing per field (it only walks the bytes), so its cost is small beside the
 * decode that follows; bytes fields are skipped, strings are checked with the native
 * `isUtf8`.
 */
import { isUtf8 } from 'node:buffer';
import { ScalarType, type DescField, type DescMessage } from '@bufbuild/protobuf';

/** Nesting of messages (and of groups in unknown fields) beyond which a message is refused, as protobuf's default recursion limit. */
export const MAX_WIRE_DEPTH = 100;

/**
 * Elements one repeated field may hold in one message. No request message has a list
 * anywhere near this long (the longest are tensor shapes); a longer one is an attack on the
 * decoder's memory (each 64-bit element becomes a string).
 */
export const MAX_REPEATED_ELEMENTS = 100_000;

/** What is wrong with a message, and where. */
export interface WireProblem {
  /** Proto field names from the top message down, dot-separated (`params.input_image.data`); `''` when no field is at fault (a malformed tag). */
  path: string;
  /** The same path as field numbers (`3.7.1`). */
  numbers: string;
  /** What is wrong, e.g. `invalid wire type 0 (varint), expected 2 (length-delimited)`. */
  problem: string;
}

const enum WireType {
  Varint = 0,
  Fixed64 = 1,
  LengthDelimited = 2,
  StartGroup = 3,
  EndGroup = 4,
  Fixed32 = 5,
}

const WIRE_TYPE_NAMES = ['varint', '64-bit', 'length-delimited', 'start group', 'end group', '32-bit'];

function wireTypeName(wt: number): string {
  return `${wt} (${WIRE_TYPE_NAMES[wt] ?? 'invalid'})`;
}

/** Largest field number protobuf allows (2^29 - 1). */
const MAX_FIELD_NUMBER = 536_870_911;

/** The wire type a scalar is written with outside a packed list. */
function scalarWireType(t: ScalarType): WireType {
  switch (t) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Fixed64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WireType.Fixed32;
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WireType.LengthDelimited;
    default:
      return WireType.Varint;
  }
}

/** The kind of value a field (or a map entry's key or value) holds: what its bytes must be. */
type ValueKind = { scalar: ScalarType } | { message: DescMessage } | { enum: true };

/** How the bytes of one field number are read. */
interface FieldReading {
  name: string;
  value: ValueKind;
  /** Repeated scalars and enums may also come packed (length-delimited). */
  packable: boolean;
  repeated: boolean;
  /** A map field: each element is an entry message with key 1 and value 2. */
  map?: { key: ValueKind; value: ValueKind };
}

const readings = new WeakMap<DescMessage, Map<number, FieldReading>>();

function valueKindOf(field: DescField): ValueKind {
  switch (field.fieldKind) {
    case 'scalar':
      return { scalar: field.scalar };
    case 'enum':
      return { enum: true };
    case 'message':
      return { message: field.message };
    case 'list':
      if (field.listKind === 'scalar') return { scalar: field.scalar };
      if (field.listKind === 'enum') return { enum: true };
      return { message: field.message };
    case 'map':
      if (field.mapKind === 'scalar') return { scalar: field.scalar };
      if (field.mapKind === 'enum') return { enum: true };
      return { message: field.message };
  }
}

function readingsOf(desc: DescMessage): Map<number, FieldReading> {
  let byNumber = readings.get(desc);
  if (byNumber) return byNumber;
  byNumber = new Map();
  for (const field of desc.fields) {
    const value = valueKindOf(field);
    const reading: FieldReading = {
      name: field.name,
      value,
      packable: field.fieldKind === 'list' && !('message' in value) && !isLengthDelimitedScalar(value),
      repeated: field.fieldKind === 'list' || field.fieldKind === 'map',
    };
    if (field.fieldKind === 'map') reading.map = { key: { scalar: field.mapKey }, value };
    byNumber.set(field.number, reading);
  }
  readings.set(desc, byNumber);
  return byNumber;
}

function isLengthDelimitedScalar(v: ValueKind): boolean {
  return 'scalar' in v && (v.scalar === ScalarType.STRING || v.scalar === ScalarType.BYTES);
}

function expectedWireType(v: ValueKind): WireType {
  if ('message' in v) return WireType.LengthDelimited;
  if ('enum' in v) return WireType.Varint;
  return scalarWireType(v.scalar);
}

/** Thrown inside the walk, caught at its top: carries the problem without building a path at every level. */
class Problem extends Error {
  /** Innermost first. */
  readonly names: string[] = [];
  readonly numbers: number[] = [];
  constructor(readonly problem: string) {
    super(problem);
  }
}

/** A cursor over the bytes; every read checks the end. */
class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  /** A varint of at most 10 bytes; its value only when it fits a double exactly enough for lengths and tags. */
  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i += 1) {
      if (this.pos >= this.end) throw new Problem('truncated varint (the message ends inside it)');
      const b = this.buf[this.pos++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw new Problem('malformed varint (more than 10 bytes)');
  }

  skip(n: number, what: string): void {
    if (n > this.end - this.pos) {
      throw new Problem(`${what} past the end of the message (${n} bytes declared, ${this.end - this.pos} left)`);
    }
    this.pos += n;
  }
}

/**
 * The first problem of `bytes` read as `desc`, or undefined when they are well-formed:
 * every tag valid, every known field with its type's wire type (repeated scalars also
 * packed), no length past the end of its message, strings valid UTF-8, nesting within
 * {@link MAX_WIRE_DEPTH} and lists within {@link MAX_REPEATED_ELEMENTS}.
 */
export function checkWire(desc: DescMessage, bytes: Uint8Array): WireProblem | undefined {
  try {
    walkMessage(desc, new Reader(bytes, 0, bytes.length), 0, undefined);
    return undefined;
  } catch (err) {
    if (!(err instanceof Problem)) throw err;
    return {
      path: err.names.reverse().join('.'),
      numbers: err.numbers.reverse().join('.'),
      problem: err.problem,
    };
  }
}

/** Reads fields until the reader's end, or until the end group of `group` (a field number). */
function walkMessage(desc: DescMessage | undefined, r: Reader, depth: number, group: number | undefined): void {
  if (depth > MAX_WIRE_DEPTH) throw new Problem(`nested more than ${MAX_WIRE_DEPTH} messages deep`);
  const fields = desc ? readingsOf(desc) : undefined;
  let counts: Map<number, number> | undefined;
  while (r.pos < r.end) {
    const tag = r.varint();
    const number = Math.floor(tag / 8);
    const wt = tag % 8;
    if (number === 0 || number > MAX_FIELD_NUMBER) throw new Problem(`invalid field number ${number} (tag ${tag})`);
    if (wt === WireType.EndGroup) {
      if (group === number) return;
      throw withField(new Problem('end group without a matching start group'), number, fields?.get(number)?.name);
    }
    const field = fields?.get(number);
    try {
      if (!field) {
        skipUnknown(r, wt, number, depth);
        continue;
      }
      const elements = readField(field, r, wt, depth);
      if (field.repeated) {
        counts ??= new Map();
        const n = (counts.get(number) ?? 0) + elements;
        if (n > MAX_REPEATED_ELEMENTS) throw new Problem(`more than ${MAX_REPEATED_ELEMENTS} elements`);
        counts.set(number, n);
      }
    } catch (err) {
      if (err instanceof Problem) throw withField(err, number, field?.name);
      throw err;
    }
  }
  if (group !== undefined) throw new Problem(`group ${group} has no end group`);
}

function withField(p: Problem, number: number, name: string | undefined): Problem {
  p.numbers.push(number);
  p.names.push(name ?? `<unknown field ${number}>`);
  return p;
}

/** Reads one occurrence of a known field; returns how many list elements it held. */
function readField(field: FieldReading, r: Reader, wt: number, depth: number): number {
  const expected = field.map ? WireType.LengthDelimited : expectedWireType(field.value);
  if (wt !== expected) {
    if (field.packable && wt === WireType.LengthDelimited) return readPacked(field.value, r);
    throw new Problem(`invalid wire type ${wireTypeName(wt)}, expected ${wireTypeName(expected)}`);
  }
  if (field.map) {
    readMapEntry(field.map, r, depth);
    return 1;
  }
  readValue(field.value, r, wt, depth);
  return 1;
}

function readValue(v: ValueKind, r: Reader, wt: number, depth: number): void {
  switch (wt) {
    case WireType.Varint:
      r.varint();
      return;
    case WireType.Fixed64:
      r.skip(8, '64-bit value');
      return;
    case WireType.Fixed32:
      r.skip(4, '32-bit value');
      return;
    default: {
      const len = r.varint();
      const start = r.pos;
      r.skip(len, 'length');
      if ('message' in v) walkMessage(v.message, new Reader(r.buf, start, start + len), depth + 1, undefined);
      else if ('scalar' in v && v.scalar === ScalarType.STRING && !isUtf8(r.buf.subarray(start, start + len))) {
        throw new Problem('invalid UTF-8 in a string');
      }
    }
  }
}

/** A packed list: varints to its end, or a whole number of fixed-size elements. */
function readPacked(v: ValueKind, r: Reader): number {
  const len = r.varint();
  const start = r.pos;
  r.skip(len, 'length');
  const wt = expectedWireType(v);
  if (wt === WireType.Fixed64 || wt === WireType.Fixed32) {
    const size = wt === WireType.Fixed64 ? 8 : 4;
    if (len % size !== 0) throw new Problem(`packed ${size * 8}-bit values: length ${len} is not a multiple of ${size}`);
    return len / size;
  }
  const inner = new Reader(r.buf, start, start + len);
  let n = 0;
  while (inner.pos < inner.end) {
    inner.varint();
    n += 1;
  }
  return n;
}

/** A map entry: key 1 and value 2 with their wire types, anything else skipped as unknown. */
function readMapEntry(map: { key: ValueKind; value: ValueKind }, r: Reader, depth: number): void {
  const len = r.varint();
  const start = r.pos;
  r.skip(len, 'length');
  const inner = new Reader(r.buf, start, start + len);
  while (inner.pos < inner.end) {
    const tag = inner.varint();
    const number = Math.floor(tag / 8);
    const wt = tag % 8;
    if (number === 0 || number > MAX_FIELD_NUMBER) throw new Problem(`invalid field number ${number} in a map entry`);
    const part = number === 1 ? map.key : number === 2 ? map.value : undefined;
    if (!part) {
      skipUnknown(inner, wt, number, depth + 1);
      continue;
    }
    const expected = expectedWireType(part);
    const name = number === 1 ? 'key' : 'value';
    if (wt !== expected) {
      throw withField(new Problem(`invalid wire type ${wireTypeName(wt)}, expected ${wireTypeName(expected)}`), number, name);
    }
    try {
      readValue(part, inner, wt, depth + 1);
    } catch (err) {
      if (err instanceof Problem) throw withField(err, number, name);
      throw err;
    }
  }
}

/** Skips a field the schema does not know (a newer client's); groups are walked for their end, within the depth limit. */
function skipUnknown(r: Reader, wt: number, number: number, depth: number): void {
  switch (wt) {
    case WireType.Varint:
    case WireType.Fixed64:
    case WireType.Fixed32:
    case WireType.LengthDelimited:
      readValue({ scalar: ScalarType.BYTES }, r, wt, depth);
      return;
    case WireType.StartGroup:
      walkMessage(undefined, r, depth + 1, number);
      return;
    default:
      throw new Problem(`invalid wire type ${wireTypeName(wt)}`);
  }
}
