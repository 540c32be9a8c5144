import type { z } from 'zod';

/**
 * Just enough zod introspection to turn environment variables and flags (always strings)
 * into the values a schema expects, and to describe a schema's fields for help texts.
 * Only the `def` shapes documented by zod 4 are read.
 */

/** Minimal view of a zod 4 schema definition. */
interface Def {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  options?: z.ZodType[];
  entries?: Record<string, string | number>;
  values?: unknown[];
  defaultValue?: unknown;
  getter?: () => z.ZodType;
}

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'catch', 'readonly', 'nonoptional']);

/** What a (wrapped) schema is underneath optional/default/pipe wrappers. */
export interface FieldInfo {
  /** The innermost schema. */
  inner: z.ZodType;
  kind: string;
  optional: boolean;
  hasDefault: boolean;
  defaultValue?: unknown;
  description?: string;
}

function describe(schema: z.ZodType): string | undefined {
  const d = (schema as unknown as { description?: string }).description;
  return typeof d === 'string' && d.length > 0 ? d : undefined;
}

/** Unwraps optional/nullable/default/pipe/lazy layers, remembering defaults and descriptions. */
export function fieldInfo(schema: z.ZodType): FieldInfo {
  let current = schema;
  let optional = false;
  let hasDefault = false;
  let defaultValue: unknown;
  let description = describe(current);
  for (let depth = 0; depth < 32; depth++) {
    const def = defOf(current);
    let next: z.ZodType | undefined;
    if (WRAPPERS.has(def.type)) {
      if (def.type === 'optional') optional = true;
      if ((def.type === 'default' || def.type === 'prefault') && !hasDefault) {
        hasDefault = true;
        const v = def.defaultValue;
        defaultValue = typeof v === 'function' ? (v as () => unknown)() : v;
      }
      next = def.innerType;
    } else if (def.type === 'pipe') {
      next = def.in;
    } else if (def.type === 'lazy' && def.getter) {
      next = def.getter();
    }
    if (!next) break;
    current = next;
    description ??= describe(current);
  }
  const info: FieldInfo = { inner: current, kind: defOf(current).type, optional, hasDefault };
  if (hasDefault) info.defaultValue = defaultValue;
  if (description !== undefined) info.description = description;
  return info;
}

/** The shape of an object schema (after unwrapping), or undefined if it is not an object. */
export function objectShape(schema: z.ZodType): Record<string, z.ZodType> | undefined {
  const { inner, kind } = fieldInfo(schema);
  return kind === 'object' ? defOf(inner).shape : undefined;
}

/** True when an object schema silently strips unknown keys (plain `z.object`). */
export function stripsUnknownKeys(schema: z.ZodType): boolean {
  const { inner, kind } = fieldInfo(schema);
  return kind === 'object' && defOf(inner).catchall === undefined;
}

/** Element schema of an array schema. */
export function arrayElement(schema: z.ZodType): z.ZodType | undefined {
  const { inner, kind } = fieldInfo(schema);
  return kind === 'array' ? defOf(inner).element : undefined;
}

/** The schema found at a dotted path inside an object schema. */
export function schemaAt(root: z.ZodType, path: readonly string[]): z.ZodType | undefined {
  let current: z.ZodType | undefined = root;
  for (const key of path) {
    const shape: Record<string, z.ZodType> | undefined = current ? objectShape(current) : undefined;
    if (!shape || !Object.prototype.hasOwnProperty.call(shape, key)) return undefined;
    current = shape[key];
  }
  return current;
}

/** Human-readable type of a field, for help texts: `integer`, `boolean`, `one of a|b`, … */
export function typeLabel(schema: z.ZodType): string {
  const { inner, kind } = fieldInfo(schema);
  const def = defOf(inner);
  switch (kind) {
    case 'number':
      return (inner as unknown as { isInt?: boolean }).isInt ? 'integer' : 'number';
    case 'enum':
      return `one of ${Object.values(def.entries ?? {}).join('|')}`;
    case 'literal':
      return (def.values ?? []).map((v) => JSON.stringify(v)).join('|');
    case 'array': {
      const el = def.element;
      return el ? `comma-separated list of ${typeLabel(el)}` : 'list';
    }
    case 'object':
    case 'record':
      return 'JSON object';
    case 'string':
    case 'boolean':
    case 'bigint':
      return kind;
    default:
      return 'JSON';
  }
}

/** Result of turning a string from env/argv into a value for a schema field. */
export type Coerced = { ok: true; value: unknown } | { ok: false; message: string };

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

/**
 * Converts the string an env var or flag carries into what `schema` expects. Strings of the
 * wrong shape are rejected here with a message that quotes them; range checks stay with zod.
 */
export function coerceString(schema: z.ZodType, raw: string): Coerced {
  const { inner, kind } = fieldInfo(schema);
  const text = raw.trim();
  switch (kind) {
    case 'string':
    case 'enum':
    case 'any':
    case 'unknown':
      return { ok: true, value: raw };
    case 'number': {
      const n = text === '' ? Number.NaN : Number(text);
      return Number.isFinite(n) ? { ok: true, value: n } : { ok: false, message: `expected a number, got ${JSON.stringify(raw)}` };
    }
    case 'bigint':
      try {
        return { ok: true, value: BigInt(text) };
      } catch {
        return { ok: false, message: `expected an integer, got ${JSON.stringify(raw)}` };
      }
    case 'boolean': {
      const lower = text.toLowerCase();
      if (TRUE.has(lower)) return { ok: true, value: true };
      if (FALSE.has(lower)) return { ok: true, value: false };
      return { ok: false, message: `expected true or false, got ${JSON.stringify(raw)}` };
    }
    case 'literal': {
      const values = defOf(inner).values ?? [];
      const match = values.find((v) => String(v) === text);
      return match !== undefined ? { ok: true, value: match } : { ok: true, value: raw };
    }
    case 'array': {
      if (text.startsWith('[')) return parseJson(raw);
      const element = defOf(inner).element;
      const out: unknown[] = [];
      for (const part of text
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p.length > 0)) {
        const c = element ? coerceString(element, part) : { ok: true as const, value: part };
        if (!c.ok) return { ok: false, message: `list item ${JSON.stringify(part)}: ${c.message}` };
        out.push(c.value);
      }
      return { ok: true, value: out };
    }
    case 'object':
    case 'record':
      return parseJson(raw);
    default: {
      // Unions and the like: JSON if it parses, the plain string otherwise.
      const parsed = parseJson(raw);
      return parsed.ok ? parsed : { ok: true, value: raw };
    }
  }
}

function parseJson(raw: string): Coerced {
  try {
    return { ok: true, value: JSON.parse(raw) as unknown };
  } catch {
    return { ok: false, message: `expected JSON, got ${JSON.stringify(raw)}` };
  }
}
