import type { z } from 'zod';
import type { ConfigDefinition } from './config.js';
import type { ConfigPath, ConfigValues } from './config-paths.js';
import { fieldInfo, objectShape } from './schema-info.js';

/** How one top-level field is reached, when not by its derived names (see {@link schemaMappings}). */
export interface FieldNames {
  /** Flag name without dashes; default: the field's name in kebab-case (`maxBatch` → `max-batch`). */
  flag?: string;
  /** Env variable suffix; default: the field's name in upper snake case (`maxBatch` → `MAX_BATCH`). */
  env?: string;
}

/** Env variable and flag mappings, as {@link ConfigSpec} takes them. */
export interface ConfigMappings<P extends string = string> {
  env: Record<string, P>;
  flags: Record<string, P>;
}

/** `maxBatch` → `max-batch`, `s3Endpoint` → `s3-endpoint`. */
export function kebabCase(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();
}

/** `maxBatch` → `MAX_BATCH`. */
export function upperSnakeCase(name: string): string {
  return kebabCase(name).replace(/-/g, '_').toUpperCase();
}

/**
 * The env variables and flags of every top-level field of `schema` that is not an object
 * (objects such as `tls` and `log` bring their own mappings: {@link tlsConfigMappings},
 * {@link logConfigMappings}): flag `--max-batch` and env `<PREFIX>MAX_BATCH` for field `maxBatch`,
 * unless `names` says otherwise (`{ natsUrl: { flag: 'nats' } }`). A field is declared once, in
 * the schema; `names` can only name fields the schema has.
 */
export function schemaMappings<S extends z.ZodObject>(
  schema: S,
  names: Partial<Record<keyof z.input<S> & string, FieldNames>> = {},
): ConfigMappings<ConfigPath<S>> {
  const out: ConfigMappings = { env: {}, flags: {} };
  const shape = objectShape(schema) ?? {};
  for (const [key, field] of Object.entries(shape)) {
    if (objectShape(fieldInfo(field).inner)) continue;
    const given = (names as Record<string, FieldNames | undefined>)[key] ?? {};
    out.env[given.env ?? upperSnakeCase(key)] = key;
    out.flags[given.flag ?? kebabCase(key)] = key;
  }
  return out as ConfigMappings<ConfigPath<S>>;
}

/**
 * The command-line arguments that give a service of definition `def` these values, e.g.
 * `configArgs(stageConfig, { pool: 'dit', maxBatch: 4, log: { level: 'info' } })` →
 * `['--pool', 'dit', '--max-batch', '4', '--log-level', 'info']`: the flags of the fields,
 * from the definition, so a child process is started with names that the schema checked at
 * compile time. Lists are comma-separated, objects JSON, booleans `--flag` / `--flag=false`;
 * undefined values are left out. Throws for a field no flag sets (a programming error).
 */
export function configArgs<S extends z.ZodObject>(def: ConfigDefinition<S>, values: ConfigValues<S>): string[] {
  const flagOf = new Map<string, string>();
  for (const [flag, p] of Object.entries(def.flags)) if (!flagOf.has(p)) flagOf.set(p, flag);
  const args: string[] = [];
  const visit = (value: unknown, at: string): void => {
    if (value === undefined) return;
    const flag = flagOf.get(at);
    if (flag === undefined && isPlainObject(value)) {
      for (const [k, v] of Object.entries(value)) visit(v, at === '' ? k : `${at}.${k}`);
      return;
    }
    if (flag === undefined) throw new Error(`configArgs ${def.name}: no flag sets "${at}"`);
    if (typeof value === 'boolean') args.push(value ? `--${flag}` : `--${flag}=false`);
    else if (Array.isArray(value)) args.push(`--${flag}`, value.map((v) => `${v as string | number}`).join(','));
    else if (typeof value === 'object' && value !== null) args.push(`--${flag}`, JSON.stringify(value));
    else args.push(`--${flag}`, `${value as string | number | bigint}`);
  };
  visit(values, '');
  return args;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
