import { Option } from 'commander';
import { defineConfig, listFlags, schemaMappings, type ConfigDefinition, type FlagInfo } from '@diffmesh/core';
import type { z } from 'zod';

/** How one field of a command's schema is reached, when not only by its derived names. */
export interface FlagFieldNames {
  /** Flag name without dashes; default: the field's name in kebab-case (`queueUrl` → `queue-url`). */
  flag?: string;
  /** Env variable suffix after the prefix (default: `QUEUE_URL` for `queueUrl`); `false` = no env variable. */
  env?: string | false;
  /** The value's name in `--help` (`--queue-url <url>`); default `value`. */
  value?: string;
}

/** A command's options, declared once as a zod schema: its config definition and the commander options of its fields. */
export interface SchemaOptions<S extends z.ZodObject> {
  definition: ConfigDefinition<S>;
  options: Option[];
}

/**
 * The commander options of every top-level field of `schema`, in the schema's order: flag
 * `--<kebab-name>` (the value commander parses is the field's name again), env variable
 * `<envPrefix><UPPER_SNAKE_NAME>`, default and help text from the schema (`.default()`,
 * `.describe()`), unless `names` says otherwise. A boolean that defaults to true becomes
 * `--no-<flag>`, its help "do not " + the field's description; other booleans are switches;
 * enums take only their values; arrays take several values. The command's flags, env
 * variables, help and typed options (`z.output<S>`) then all come from the schema.
 */
export function schemaOptions<S extends z.ZodObject>(
  name: string,
  schema: S,
  envPrefix: string,
  names: Partial<Record<keyof z.input<S> & string, FlagFieldNames>> = {},
): SchemaOptions<S> {
  const given = names as Record<string, FlagFieldNames | undefined>;
  const mappings = schemaMappings(
    schema,
    Object.fromEntries(
      Object.entries(given).map(([k, n]) => [k, { ...(n?.flag ? { flag: n.flag } : {}), ...(n?.env ? { env: n.env } : {}) }]),
    ) as Partial<Record<keyof z.input<S> & string, { flag?: string; env?: string }>>,
  );
  const env = Object.fromEntries(Object.entries(mappings.env).filter(([, field]) => given[field]?.env !== false));
  const definition = defineConfig({ name, schema, envPrefix, env, flags: mappings.flags });
  const options = listFlags(definition)
    .filter((f) => f.path !== '')
    .map((f) => flagOption(f, given[f.path]?.value ?? 'value'));
  return { definition, options };
}

function flagOption(f: FlagInfo, value: string): Option {
  const description = f.description ?? '';
  let option: Option;
  if (f.type === 'boolean') {
    option = f.default === true ? new Option(`--no-${f.flag.slice(2)}`, `do not ${description}`) : new Option(f.flag, description);
  } else {
    const variadic = f.type.startsWith('comma-separated list') ? '...' : '';
    option = new Option(`${f.flag} <${value}${variadic}>`, description);
    // An enum's type reads `one of a|b` (core's type labels).
    if (f.type.startsWith('one of ')) option.choices(f.type.slice('one of '.length).split('|'));
    if (f.default !== undefined) option.default(f.default);
  }
  if (f.env !== undefined) option.env(f.env);
  return option;
}
