/**
 * The proto3 JSON mapping, driven by the loaded descriptors. A protobufjs Root is loaded with
 * the original (snake_case) field names so both spellings can be told apart: JSON objects
 * may use the lowerCamelCase JSON name or the original proto name; output uses the JSON name.
 * protobufjs's `fromObject`/`toObject` do the conversion of values (64-bit integers as
 * decimal strings, enums by name, bytes as base64); this module adds what they leave out:
 * strict type checks with the failing field named, the names, and the well-known types
 * (Timestamp as RFC 3339, Duration as `1.5s`, Any with `@type`).
 */
import { loadDiffmeshPackageDefinition, newDiffmeshRoot } from '@diffmesh/protos';
import { Code, DiffmeshError } from '@diffmesh/core';
import protobuf from 'protobufjs';

/** Options of `toObject` matching the proto3 JSON mapping. */
export const TO_OBJECT_OPTIONS: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  bytes: String,
  defaults: true,
  arrays: true,
  objects: true,
  json: true,
};

const TIMESTAMP = '.google.protobuf.Timestamp';
const DURATION = '.google.protobuf.Duration';
const ANY = '.google.protobuf.Any';
const WRAPPERS = new Set(
  ['Double', 'Float', 'Int64', 'UInt64', 'Int32', 'UInt32', 'Bool', 'String', 'Bytes'].map((t) => `.google.protobuf.${t}Value`),
);

let root: protobuf.Root | undefined;

/** The descriptors of every diffmesh proto, with original field names and comments (loaded once). */
export function protoRoot(): protobuf.Root {
  if (root) return root;
  // @grpc/proto-loader registers google/protobuf/descriptor.proto, which the HTTP annotations import.
  loadDiffmeshPackageDefinition();
  root = newDiffmeshRoot({ keepCase: true, alternateCommentMode: true });
  return root;
}

/** The proto3 JSON name of a field: lowerCamelCase of its proto name, unless `json_name` is set. */
export function jsonName(field: protobuf.Field): string {
  const explicit = field.options?.json_name;
  if (typeof explicit === 'string') return explicit;
  return field.name.replace(/_+([a-zA-Z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** A request the gateway cannot convert: INVALID_ARGUMENT naming the field (dotted path). */
export function badField(path: string, message: string): DiffmeshError {
  return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', path ? `${path}: ${message}` : message, {
    metadata: path ? { field: path } : {},
  });
}

/** The start of a client's string, for an error message: at most `max` characters, then `…`. */
export function preview(s: string, max = 40): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** A field name the client wrote, for an error (a long unknown key is cut short; the empty key is `""`, so that it is still named). */
export function previewName(key: string): string {
  return key === '' ? '""' : preview(key, 64);
}

function join2(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${previewName(key)}` : previewName(key);
}

/**
 * A client's value for an error message: its type, with a short preview of a string. Never
 * the whole value, which may be megabytes long or nested too deep to serialize.
 */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(preview(value));
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value === undefined) return String(value);
  return typeof value;
}

/** Finds a field by its JSON name or its proto name. */
export function fieldByName(type: protobuf.Type, name: string): protobuf.Field | undefined {
  // An own property only: `constructor` or `__proto__` must not reach Object.prototype.
  if (Object.hasOwn(type.fields, name)) return type.fields[name];
  return type.fieldsArray.find((f) => jsonName(f) === name);
}

/** Options of {@link jsonToObject}. */
export interface FromJsonOptions {
  /**
   * Values come from a URL (path variables, query parameters): every scalar is a string, so
   * booleans may be `true`/`false` strings too.
   */
  fromUrl?: boolean;
}

const INT32 = new Set(['int32', 'sint32', 'sfixed32']);
const UINT32 = new Set(['uint32', 'fixed32']);
const INT64 = new Set(['int64', 'sint64', 'sfixed64']);
const UINT64 = new Set(['uint64', 'fixed64']);
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * A decimal integer string (`-?\d+`) as a bigint, or undefined when it has more significant
 * digits than any 64-bit integer. BigInt need not read megabytes of digits (the time that
 * takes would hold up every other request).
 */
export function smallBigInt(text: string): bigint | undefined {
  const significant = text.replace(/^(-?)0+(?=\d)/, '$1');
  return significant.replace('-', '').length > 20 ? undefined : BigInt(significant);
}

function integer(value: unknown, path: string, min: bigint, max: bigint, kind: string): string | number {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw badField(path, `expected ${kind}, got ${value}`);
    if (!Number.isSafeInteger(value)) throw badField(path, `${value} is too large to be exact; send it as a string`);
    text = String(value);
  } else if (typeof value === 'string' && /^-?\d+$/.test(value.trim())) {
    text = value.trim();
  } else if (typeof value === 'string' && /^-?\d+(\.0*)?(e\+?\d+)?$/i.test(value.trim()) && Number.isSafeInteger(Number(value))) {
    text = String(Number(value));
  } else {
    throw badField(path, `expected ${kind}, got ${describeValue(value)}`);
  }
  const n = smallBigInt(text);
  if (n === undefined || n < min || n > max) throw badField(path, `${preview(text)} is out of range for ${kind} (${min}..${max})`);
  return max > 0xffffffffn ? n.toString() : Number(n);
}

function scalar(field: protobuf.Field, value: unknown, path: string, opts: FromJsonOptions): unknown {
  const t = field.type;
  if (field.resolvedType instanceof protobuf.Enum) {
    const e = field.resolvedType;
    if (typeof value === 'string' && Object.prototype.hasOwnProperty.call(e.values, value)) return value;
    if (typeof value === 'number' && Number.isInteger(value)) return value;
    if (typeof value === 'string' && /^-?\d+$/.test(value)) return Number(value);
    throw badField(path, `expected one of ${Object.keys(e.values).join(', ')}, got ${describeValue(value)}`);
  }
  if (INT32.has(t)) return integer(value, path, -(2n ** 31n), 2n ** 31n - 1n, 'a 32-bit integer');
  if (UINT32.has(t)) return integer(value, path, 0n, 2n ** 32n - 1n, 'a non-negative 32-bit integer');
  if (INT64.has(t)) return integer(value, path, -(2n ** 63n), 2n ** 63n - 1n, 'a 64-bit integer');
  if (UINT64.has(t)) return integer(value, path, 0n, 2n ** 64n - 1n, 'a non-negative 64-bit integer');
  switch (t) {
    case 'double':
    case 'float': {
      if (typeof value === 'number' && Number.isFinite(value)) return value;
      if (value === 'NaN') return NaN;
      if (value === 'Infinity') return Infinity;
      if (value === '-Infinity') return -Infinity;
      if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
      throw badField(path, `expected a number, got ${describeValue(value)}`);
    }
    case 'bool':
      if (typeof value === 'boolean') return value;
      if (opts.fromUrl && (value === 'true' || value === 'false')) return value === 'true';
      throw badField(path, `expected true or false, got ${describeValue(value)}`);
    case 'string':
      if (typeof value === 'string') return value;
      throw badField(path, `expected a string, got ${describeValue(value)}`);
    case 'bytes':
      if (typeof value === 'string' && BASE64.test(value)) {
        return value.replace(/-/g, '+').replace(/_/g, '/');
      }
      throw badField(path, `expected base64-encoded bytes, got ${describeValue(value)}`);
    default:
      throw badField(path, `unsupported field type ${t}`);
  }
}

const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

function parseTimestamp(value: unknown, path: string): { seconds: string; nanos: number } {
  const m = typeof value === 'string' ? RFC3339.exec(value) : null;
  const ms = m ? Date.parse(`${m[1]}T${m[2]}${m[4].toUpperCase()}`) : NaN;
  if (!m || Number.isNaN(ms))
    throw badField(path, `expected an RFC 3339 timestamp such as 2024-05-01T12:00:00Z, got ${describeValue(value)}`);
  const nanos = m[3] ? Number(m[3].padEnd(9, '0')) : 0;
  return { seconds: String(Math.floor(ms / 1000)), nanos };
}

function parseDuration(value: unknown, path: string): { seconds: string; nanos: number } {
  const m = typeof value === 'string' ? /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(value) : null;
  if (!m) throw badField(path, `expected a duration such as "1.5s", got ${describeValue(value)}`);
  const sign = m[1] ? -1 : 1;
  const nanos = m[3] ? Number(m[3].padEnd(9, '0')) : 0;
  return { seconds: String(sign * Number(m[2])), nanos: sign * nanos };
}

/** Formats a Timestamp as RFC 3339 with 0, 3, 6 or 9 fractional digits. */
export function formatTimestamp(seconds: string | number, nanos: number): string {
  const date = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
  if (!nanos) return `${date}Z`;
  const digits = nanos % 1_000_000 === 0 ? 3 : nanos % 1000 === 0 ? 6 : 9;
  return `${date}.${String(nanos).padStart(9, '0').slice(0, digits)}Z`;
}

function formatDuration(seconds: string | number, nanos: number): string {
  const s = Number(seconds);
  const negative = s < 0 || nanos < 0;
  const whole = Math.abs(s);
  const n = Math.abs(nanos);
  // proto3 JSON: 0, 3, 6 or 9 fractional digits.
  const digits = n === 0 ? 0 : n % 1_000_000 === 0 ? 3 : n % 1000 === 0 ? 6 : 9;
  const frac = digits === 0 ? '' : `.${String(n).padStart(9, '0').slice(0, digits)}`;
  return `${negative ? '-' : ''}${whole}${frac}s`;
}

function message(type: protobuf.Type, value: unknown, path: string, opts: FromJsonOptions): unknown {
  const name = type.fullName;
  if (name === TIMESTAMP) return parseTimestamp(value, path);
  if (name === DURATION) return parseDuration(value, path);
  if (WRAPPERS.has(name)) return { value: scalar(type.fields.value, value, path, opts) };
  if (name === ANY) return anyFromJson(value, path, opts);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badField(path, `expected an object, got ${describeValue(value)}`);
  }
  return jsonToObject(type, value as Record<string, unknown>, path, opts);
}

function anyFromJson(value: unknown, path: string, opts: FromJsonOptions): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badField(path, `expected an object, got ${describeValue(value)}`);
  const { '@type': url, ...rest } = value as Record<string, unknown>;
  if (typeof url !== 'string') throw badField(join2(path, '@type'), 'is required in an Any');
  let inner: protobuf.Type;
  try {
    inner = protoRoot().lookupType(url.slice(url.lastIndexOf('/') + 1));
  } catch {
    throw badField(join2(path, '@type'), `unknown type ${describeValue(url)}`);
  }
  const special = [TIMESTAMP, DURATION, ANY].includes(inner.fullName) || WRAPPERS.has(inner.fullName);
  const obj = special ? message(inner, rest.value, join2(path, 'value'), opts) : jsonToObject(inner, rest, path, opts);
  return { type_url: url, value: inner.encode(inner.fromObject(obj as Record<string, unknown>)).finish() };
}

function fieldValue(field: protobuf.Field, value: unknown, path: string, opts: FromJsonOptions): unknown {
  return field.resolvedType instanceof protobuf.Type ? message(field.resolvedType, value, path, opts) : scalar(field, value, path, opts);
}

/**
 * Converts a parsed JSON object to a plain object keyed by proto field names that
 * `type.fromObject` accepts. Checks every value's type and rejects unknown fields;
 * errors are INVALID_ARGUMENT naming the field by the path as the client wrote it.
 */
export function jsonToObject(
  type: protobuf.Type,
  json: Readonly<Record<string, unknown>>,
  path = '',
  opts: FromJsonOptions = {},
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const seen = new Map<string, string>();
  for (const [key, value] of Object.entries(json)) {
    const p = join2(path, key);
    const field = fieldByName(type, key);
    if (!field) throw badField(p, `unknown field (known: ${type.fieldsArray.map(jsonName).join(', ')})`);
    const previous = seen.get(field.name);
    if (previous !== undefined) throw badField(p, `set twice (also as "${previous}")`);
    seen.set(field.name, key);
    if (value === null) continue; // proto3 JSON: null means the default value
    if (field.map) {
      if (typeof value !== 'object' || Array.isArray(value)) throw badField(p, `expected an object, got ${describeValue(value)}`);
      const keyType = (field as unknown as protobuf.MapField).keyType;
      // fromEntries makes every key an own property, `__proto__` included.
      out[field.name] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([k, v]) => {
          if (keyType !== 'string') scalar({ type: keyType } as protobuf.Field, k, join2(p, k), { fromUrl: true });
          return [k, fieldValue(field, v, join2(p, k), opts)];
        }),
      );
    } else if (field.repeated) {
      const items = Array.isArray(value) ? value : opts.fromUrl ? [value] : undefined;
      if (!items) throw badField(p, `expected an array, got ${describeValue(value)}`);
      out[field.name] = items.map((v, i) => fieldValue(field, v, join2(p, i), opts));
    } else {
      if (field.partOf && !field.partOf.name.startsWith('_')) {
        const other = field.partOf.fieldsArray.find((f) => f !== field && seen.has(f.name));
        if (other) throw badField(p, `only one of ${field.partOf.fieldsArray.map(jsonName).join(', ')} may be set`);
      }
      out[field.name] = fieldValue(field, value, p, opts);
    }
  }
  return out;
}

/** Encodes a plain object keyed by proto names (from {@link jsonToObject}) as a message. */
export function encodeObject(type: protobuf.Type, obj: Record<string, unknown>): Buffer {
  const bytes = type.encode(type.fromObject(obj)).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Decodes a message to a plain object keyed by proto names (proto3 JSON value conversions). */
export function decodeObject(type: protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  return type.toObject(type.decode(bytes), TO_OBJECT_OPTIONS);
}

function valueToJson(field: protobuf.Field, value: unknown): unknown {
  return field.resolvedType instanceof protobuf.Type ? messageToJson(field.resolvedType, value) : value;
}

/**
 * Converts a `toObject` result (proto names) to proto3 JSON: JSON names, RFC 3339
 * timestamps, durations as strings, Any with `@type`. Unset message fields are left out.
 */
export function messageToJson(type: protobuf.Type, obj: unknown): unknown {
  if (obj === null || obj === undefined) return undefined;
  const o = obj as Record<string, unknown>;
  const name = type.fullName;
  if (name === TIMESTAMP) return formatTimestamp(o.seconds as string, Number(o.nanos ?? 0));
  if (name === DURATION) return formatDuration(o.seconds as string, Number(o.nanos ?? 0));
  if (WRAPPERS.has(name)) return o.value;
  if (name === ANY) return anyToJson(o);
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    const value = o[field.name];
    if (value === undefined || value === null) continue;
    let converted: unknown;
    if (field.map) {
      converted = Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, valueToJson(field, v)]));
    } else if (field.repeated) {
      converted = (value as unknown[]).map((v) => valueToJson(field, v));
    } else {
      converted = valueToJson(field, value);
    }
    if (converted !== undefined) out[jsonName(field)] = converted;
  }
  return out;
}

function anyToJson(o: Record<string, unknown>): unknown {
  // With `json: true`, protobufjs has already unpacked a known type into `@type` + fields.
  const unpacked = typeof o['@type'] === 'string';
  const url = String(unpacked ? o['@type'] : (o.type_url ?? ''));
  const name = url.slice(url.lastIndexOf('/') + 1);
  let inner: protobuf.Type | undefined;
  try {
    inner = name ? protoRoot().lookupType(name) : undefined;
  } catch {
    inner = undefined;
  }
  if (!inner) return { '@type': url, value: o.value };
  let fields: Record<string, unknown>;
  if (unpacked) {
    const { '@type': _t, ...rest } = o;
    fields = rest;
  } else {
    const bytes = typeof o.value === 'string' ? Buffer.from(o.value, 'base64') : (o.value as Uint8Array);
    fields = decodeObject(inner, bytes);
  }
  const decoded = messageToJson(inner, fields);
  const special = [TIMESTAMP, DURATION, ANY].includes(inner.fullName) || WRAPPERS.has(inner.fullName);
  return special ? { '@type': url, value: decoded } : { '@type': url, ...(decoded as object) };
}

/** Reads a message (bytes) straight to proto3 JSON. */
export function bytesToJson(type: protobuf.Type, bytes: Uint8Array): unknown {
  return messageToJson(type, decodeObject(type, bytes));
}

/** Sets a (dotted, proto-name) field path on a plain object, converting a URL string to the field's type. */
export function setFieldPath(type: protobuf.Type, obj: Record<string, unknown>, fieldPath: string, raw: string, label = fieldPath): void {
  const parts = fieldPath.split('.');
  let t = type;
  let node = obj;
  for (let i = 0; i < parts.length; i++) {
    const field = fieldByName(t, parts[i]);
    const p = parts.slice(0, i + 1).join('.');
    if (!field) throw badField(label, `unknown field "${p}"`);
    if (i === parts.length - 1) {
      if (
        field.map ||
        (field.resolvedType instanceof protobuf.Type &&
          field.resolvedType.fullName !== TIMESTAMP &&
          field.resolvedType.fullName !== DURATION &&
          !WRAPPERS.has(field.resolvedType.fullName))
      ) {
        throw badField(label, 'cannot be set from the URL (not a scalar field)');
      }
      const value = fieldValue(field, raw, label, { fromUrl: true });
      if (field.repeated) {
        const list = (node[field.name] as unknown[] | undefined) ?? [];
        list.push(value);
        node[field.name] = list;
      } else {
        // As grpc-gateway: a single field given twice is an error, not "the last one wins".
        if (node[field.name] !== undefined) throw badField(label, 'is given more than once, but it is not a repeated field');
        node[field.name] = value;
      }
      return;
    }
    if (!(field.resolvedType instanceof protobuf.Type) || field.repeated || field.map) {
      throw badField(label, `"${p}" is not a message field`);
    }
    const child = node[field.name];
    node[field.name] = child && typeof child === 'object' ? child : {};
    node = node[field.name] as Record<string, unknown>;
    t = field.resolvedType;
  }
}

/** Walks a plain object (proto names) and yields every string value with its JSON path. */
export function* stringFields(
  type: protobuf.Type,
  obj: Record<string, unknown>,
  path = '',
): Generator<{ field: protobuf.Field; path: string; value: string }> {
  for (const field of type.fieldsArray) {
    const value = obj[field.name];
    if (value === undefined || value === null) continue;
    const p = join2(path, field.name);
    if (field.type === 'string' && typeof value === 'string') yield { field, path: p, value };
    else if (field.resolvedType instanceof protobuf.Type && !field.map) {
      const items = field.repeated ? (value as unknown[]) : [value];
      for (const [i, v] of items.entries()) {
        if (v && typeof v === 'object')
          yield* stringFields(field.resolvedType, v as Record<string, unknown>, field.repeated ? join2(p, i) : p);
      }
    }
  }
}
