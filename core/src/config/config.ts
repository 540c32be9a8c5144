import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import type { ConfigPath } from './config-paths.js';
import { arrayElement, coerceString, fieldInfo, objectShape, schemaAt, stripsUnknownKeys, typeLabel } from './schema-info.js';

/**
 * Describes one service's configuration: its schema (with defaults) and the declared
 * mapping of environment variables and command-line flags onto the schema's dotted paths.
 * Nothing is derived by guessing: a variable or flag that is not declared is not read.
 */
export interface ConfigSpec<S extends z.ZodObject = z.ZodObject> {
  /** Service name used in messages and help, e.g. `scheduler`. */
  name: string;
  /** The zod object schema; `.default()` gives defaults, `.describe()` gives help text. */
  schema: S;
  /**
   * Prefix of every environment variable, e.g. `DIFFMESH_SCHEDULER_`. `{prefix}CONFIG`
   * names the config file.
   */
  envPrefix?: string;
  /** Environment variable suffix (after the prefix) → dotted schema path (see {@link schemaMappings}). */
  env?: Record<string, ConfigPath<S>>;
  /** Flag name without dashes (kebab-case) → dotted schema path. `--config` is reserved. */
  flags?: Record<string, ConfigPath<S>>;
}

/** A checked {@link ConfigSpec}, made by {@link defineConfig}. */
export interface ConfigDefinition<S extends z.ZodObject = z.ZodObject> extends Readonly<ConfigSpec<S>> {
  readonly envPrefix: string;
  readonly env: Readonly<Record<string, ConfigPath<S>>>;
  readonly flags: Readonly<Record<string, ConfigPath<S>>>;
}

/** Where a configuration value came from, for error messages. */
export type ConfigSource = string;

/** One problem with a configuration. */
export interface ConfigIssue {
  /** Dotted path of the field (`''` for the whole file), e.g. `queue.maxLength`, `peers[0].host`. */
  path: string;
  /** Where the bad value came from: `file <path>`, `env <NAME>`, `flag --<name>`, `default`, `not set`. */
  source: ConfigSource;
  message: string;
}

/**
 * Thrown when a configuration is invalid. The message has one line per problem, each
 * naming the field, where its value came from and what is wrong, e.g.
 * `config: queue.maxLength (from env DIFFMESH_SCHEDULER_MAX_QUEUE): Too small: expected number to be >0`.
 */
export class ConfigError extends Error {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

/** Formats one issue as a line of a {@link ConfigError} message. */
export function formatIssue(issue: ConfigIssue): string {
  const where = issue.path === '' ? issue.source : `${issue.path} (${sourcePhrase(issue.source)})`;
  return `config: ${where}: ${issue.message}`;
}

function sourcePhrase(source: string): string {
  return source === 'not set' ? 'not set' : `from ${source}`;
}

const ENV_SUFFIX = /^[A-Z][A-Z0-9_]*$/;
const FLAG_NAME = /^[a-z][a-z0-9-]*$/;

/**
 * Checks a spec and returns it frozen. Throws (a programming error, not a user error) when a
 * declared env var or flag points at a path the schema does not have.
 */
export function defineConfig<S extends z.ZodObject>(spec: ConfigSpec<S>): ConfigDefinition<S> {
  const problems: string[] = [];
  const env = { ...(spec.env ?? {}) };
  const flags = { ...(spec.flags ?? {}) };
  const envPrefix = spec.envPrefix ?? '';
  if (envPrefix !== '' && !/^[A-Z][A-Z0-9_]*$/.test(envPrefix)) {
    problems.push(`envPrefix "${envPrefix}" must be upper-case letters, digits and underscores`);
  }
  for (const [suffix, p] of Object.entries(env)) {
    if (!ENV_SUFFIX.test(suffix)) problems.push(`env ${suffix}: names are upper-case letters, digits and underscores`);
    if (suffix === 'CONFIG') problems.push(`env ${envPrefix}CONFIG is reserved for the config file path`);
    if (!schemaAt(spec.schema, splitPath(p))) problems.push(`env ${envPrefix}${suffix}: schema has no field "${p}"`);
  }
  for (const [flag, p] of Object.entries(flags)) {
    if (!FLAG_NAME.test(flag)) problems.push(`flag --${flag}: names are lower-case kebab-case`);
    if (flag === 'config') problems.push('flag --config is reserved for the config file path');
    if (!schemaAt(spec.schema, splitPath(p))) problems.push(`flag --${flag}: schema has no field "${p}"`);
  }
  if (problems.length > 0) {
    throw new Error(`invalid config definition for ${spec.name}: ${problems.join('; ')}`);
  }
  return Object.freeze({ ...spec, envPrefix, env: Object.freeze(env), flags: Object.freeze(flags) });
}

/** Inputs of {@link loadConfig}; each layer overrides the ones before it. */
export interface LoadConfigOptions {
  /**
   * Config file (YAML, or JSON by a `.json` extension). When omitted, `--config <path>` in
   * `argv`, then the env var `{prefix}CONFIG`, name it; with none of them no file is read.
   */
  file?: string;
  /** Environment; defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Command-line arguments to read declared flags from, e.g. `process.argv.slice(2)`. */
  argv?: readonly string[];
  /** Flag values parsed elsewhere (e.g. by a CLI framework), keyed by flag name; override `argv`. */
  flags?: Readonly<Record<string, unknown>>;
  /** Report env vars that start with the prefix but are not declared (likely typos). Default false. */
  strictEnv?: boolean;
}

/**
 * Builds a service's validated configuration from, in increasing precedence: the schema's
 * defaults, a config file, environment variables and flags. Nested objects merge key by
 * key; arrays are replaced whole. Env vars and flags carry strings, converted by the type of
 * the field they map to (numbers, `true/false/1/0/yes/no/on/off`, comma-separated or JSON
 * lists, JSON objects); an empty env var counts as unset. Unknown keys in the file, unknown
 * flags and stray arguments are errors. Reads the file synchronously (start-up only).
 * Throws {@link ConfigError} naming every bad field and its source.
 */
export function loadConfig<S extends z.ZodObject>(def: ConfigDefinition<S>, opts: LoadConfigOptions = {}): z.output<S> {
  const env = opts.env ?? process.env;
  const issues: ConfigIssue[] = [];
  const sources = new Map<string, ConfigSource>();
  const badPaths = new Set<string>();
  const merged: Record<string, unknown> = {};

  const argv = parseArgv(def, opts.argv ?? [], issues);

  // 1. File.
  const envFile = env[`${def.envPrefix}CONFIG`];
  const file = opts.file ?? argv.configPath ?? (envFile !== undefined && envFile !== '' ? envFile : undefined);
  if (file !== undefined) {
    const source = `file ${file}`;
    const data = readConfigFile(file, issues);
    if (data !== undefined) {
      checkUnknownKeys(def.schema, data, [], source, issues);
      mergeInto(merged, data, [], source, sources);
    }
  }

  // 2. Environment.
  for (const [suffix, p] of Object.entries(def.env)) {
    const name = `${def.envPrefix}${suffix}`;
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    applyValue(def, merged, p, raw, `env ${name}`, sources, issues, badPaths);
  }
  if (opts.strictEnv && def.envPrefix !== '') {
    for (const name of Object.keys(env)) {
      if (!name.startsWith(def.envPrefix) || name === `${def.envPrefix}CONFIG`) continue;
      if (!Object.prototype.hasOwnProperty.call(def.env, name.slice(def.envPrefix.length))) {
        issues.push({ path: '', source: `env ${name}`, message: `unknown variable (known: ${envNames(def).join(', ')})` });
      }
    }
  }

  // 3. Flags: argv first, then pre-parsed values.
  for (const { flag, value } of argv.values) {
    applyValue(def, merged, def.flags[flag], value, `flag --${flag}`, sources, issues, badPaths);
  }
  for (const [flag, value] of Object.entries(opts.flags ?? {})) {
    if (value === undefined) continue;
    const p = def.flags[flag];
    if (p === undefined) {
      issues.push({ path: '', source: `flag --${flag}`, message: `unknown flag (known: ${flagList(def)})` });
      continue;
    }
    applyValue(def, merged, p, value, `flag --${flag}`, sources, issues, badPaths);
  }

  const result = def.schema.safeParse(merged);
  if (!result.success) {
    for (const zi of result.error.issues) {
      const segments = zi.path.map((s) => (typeof s === 'symbol' ? String(s) : s));
      const dotted = segments.map(String).join('.');
      if ([...badPaths].some((b) => dotted === b || dotted.startsWith(`${b}.`))) continue;
      const source = sourceFor(dotted, sources, merged, segments);
      let message = zi.message;
      if (source === 'not set') message = `required; ${whereToSet(def, dotted)}`;
      issues.push({ path: displayPath(segments), source, message });
    }
  }
  if (issues.length > 0) throw new ConfigError(issues);
  if (!result.success) throw new ConfigError([{ path: '', source: 'default', message: 'invalid configuration' }]);
  return result.data;
}

/** One environment variable a config accepts. */
export interface EnvVarInfo {
  name: string;
  /** Dotted schema path it sets. */
  path: string;
  /** Flag that sets the same field, if any (`--name`). */
  flag?: string;
  /** Human-readable type: `integer`, `boolean`, `one of a|b`, … */
  type: string;
  /** True when the field has neither a default nor is optional. */
  required: boolean;
  default?: unknown;
  description?: string;
}

/** Lists the environment variables a config accepts (plus `{prefix}CONFIG`), in declaration order. */
export function listEnvVars(def: ConfigDefinition): EnvVarInfo[] {
  const out: EnvVarInfo[] = [];
  if (def.envPrefix !== '') {
    out.push({
      name: `${def.envPrefix}CONFIG`,
      path: '',
      flag: '--config',
      type: 'path',
      required: false,
      description: 'Config file (YAML or JSON) read before env vars and flags',
    });
  }
  for (const [suffix, p] of Object.entries(def.env)) {
    out.push(describeField(def, `${def.envPrefix}${suffix}`, p));
  }
  return out;
}

/** One command-line flag a config accepts. */
export interface FlagInfo extends Omit<EnvVarInfo, 'name' | 'flag'> {
  /** `--name`. */
  flag: string;
  /** Env var that sets the same field, if any. */
  env?: string;
}

/** Lists the flags a config accepts (plus `--config`), in declaration order. */
export function listFlags(def: ConfigDefinition): FlagInfo[] {
  const out: FlagInfo[] = [{ flag: '--config', path: '', type: 'path', required: false, description: 'Config file (YAML or JSON)' }];
  if (def.envPrefix !== '') out[0].env = `${def.envPrefix}CONFIG`;
  for (const [flag, p] of Object.entries(def.flags)) {
    const info = describeField(def, '', p);
    const envName = Object.entries(def.env).find(([, ep]) => ep === p)?.[0];
    const f: FlagInfo = { flag: `--${flag}`, path: p, type: info.type, required: info.required };
    if (envName !== undefined) f.env = `${def.envPrefix}${envName}`;
    if ('default' in info) f.default = info.default;
    if (info.description !== undefined) f.description = info.description;
    out.push(f);
  }
  return out;
}

/**
 * A Markdown table of every field reachable by env var or flag: path, env var, flag, type,
 * default and description. Meant for README sections and `--help` output.
 */
export function formatConfigTable(def: ConfigDefinition): string {
  const rows: string[][] = [];
  const paths: string[] = [];
  for (const p of [...Object.values(def.env), ...Object.values(def.flags)]) if (!paths.includes(p)) paths.push(p);
  const cell = (s: string): string => s.replace(/\|/g, '\\|');
  if (def.envPrefix !== '') rows.push(['(file)', `\`${def.envPrefix}CONFIG\``, '`--config`', 'path', '', 'Config file (YAML or JSON)']);
  for (const p of paths) {
    const env = Object.entries(def.env)
      .filter(([, ep]) => ep === p)
      .map(([s]) => `\`${def.envPrefix}${s}\``);
    const flags = Object.entries(def.flags)
      .filter(([, fp]) => fp === p)
      .map(([f]) => `\`--${f}\``);
    const info = describeField(def, '', p);
    const dflt = 'default' in info ? `\`${JSON.stringify(info.default)}\`` : info.required ? 'required' : '';
    rows.push([`\`${p}\``, env.join(', '), flags.join(', '), cell(info.type), cell(dflt), cell(info.description ?? '')]);
  }
  const header = ['Field', 'Env var', 'Flag', 'Type', 'Default', 'Description'];
  return [header, header.map(() => '---'), ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

// ---------------------------------------------------------------------------------------

function describeField(def: ConfigDefinition, name: string, p: string): EnvVarInfo {
  const schema = schemaAt(def.schema, splitPath(p));
  if (!schema) throw new Error(`config ${def.name}: no field "${p}"`);
  const info = fieldInfo(schema);
  const out: EnvVarInfo = { name, path: p, type: typeLabel(schema), required: !info.optional && !info.hasDefault };
  const flag = Object.entries(def.flags).find(([, fp]) => fp === p)?.[0];
  if (flag !== undefined) out.flag = `--${flag}`;
  if (info.hasDefault) out.default = info.defaultValue;
  if (info.description !== undefined) out.description = info.description;
  return out;
}

function envNames(def: ConfigDefinition): string[] {
  return Object.keys(def.env).map((s) => `${def.envPrefix}${s}`);
}

function flagList(def: ConfigDefinition): string {
  return ['--config', ...Object.keys(def.flags).map((f) => `--${f}`)].join(', ');
}

function whereToSet(def: ConfigDefinition, dotted: string): string {
  const ways = [`file key ${dotted}`];
  const env = Object.entries(def.env).find(([, p]) => p === dotted)?.[0];
  if (env !== undefined) ways.push(`env ${def.envPrefix}${env}`);
  const flag = Object.entries(def.flags).find(([, p]) => p === dotted)?.[0];
  if (flag !== undefined) ways.push(`flag --${flag}`);
  return `set ${ways.join(', ')}`;
}

function splitPath(p: string): string[] {
  return p.split('.').filter((s) => s.length > 0);
}

function displayPath(segments: readonly (string | number)[]): string {
  let out = '';
  for (const s of segments) out += typeof s === 'number' ? `[${s}]` : out === '' ? s : `.${s}`;
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function readConfigFile(file: string, issues: ConfigIssue[]): Record<string, unknown> | undefined {
  const source = `file ${file}`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    issues.push({ path: '', source, message: code === 'ENOENT' ? 'file not found' : `cannot read (${code ?? String(err)})` });
    return undefined;
  }
  let data: unknown;
  try {
    data = path.extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    issues.push({ path: '', source, message: `cannot parse: ${(err as Error).message.split('\n')[0]}` });
    return undefined;
  }
  if (data === null || data === undefined) return {};
  if (!isPlainObject(data)) {
    issues.push({ path: '', source, message: 'the top level must be a mapping of keys to values' });
    return undefined;
  }
  return data;
}

/** Reports keys a plain `z.object` would silently drop: in a config file they are typos. */
function checkUnknownKeys(schema: z.ZodType, data: unknown, at: (string | number)[], source: string, issues: ConfigIssue[]): void {
  const shape = objectShape(schema);
  if (shape && isPlainObject(data)) {
    const strip = stripsUnknownKeys(schema);
    for (const [key, value] of Object.entries(data)) {
      const child = Object.prototype.hasOwnProperty.call(shape, key) ? shape[key] : undefined;
      if (child) {
        checkUnknownKeys(child, value, [...at, key], source, issues);
      } else if (strip) {
        issues.push({
          path: displayPath([...at, key]),
          source,
          message: `unknown key (expected one of: ${Object.keys(shape).join(', ')})`,
        });
      }
    }
    return;
  }
  const element = arrayElement(schema);
  if (element && Array.isArray(data)) {
    data.forEach((item, i) => checkUnknownKeys(element, item, [...at, i], source, issues));
  }
}

function mergeInto(
  target: Record<string, unknown>,
  data: Record<string, unknown>,
  at: string[],
  source: string,
  sources: Map<string, string>,
): void {
  for (const [key, value] of Object.entries(data)) {
    const p = [...at, key];
    if (isPlainObject(value)) {
      const existing = target[key];
      const child = isPlainObject(existing) ? existing : {};
      target[key] = child;
      mergeInto(child, value, p, source, sources);
    } else {
      target[key] = value;
      sources.set(p.join('.'), source);
    }
  }
}

function applyValue(
  def: ConfigDefinition,
  merged: Record<string, unknown>,
  dotted: string,
  raw: unknown,
  source: string,
  sources: Map<string, string>,
  issues: ConfigIssue[],
  badPaths: Set<string>,
): void {
  const segments = splitPath(dotted);
  const schema = schemaAt(def.schema, segments);
  let value = raw;
  if (schema && typeof raw === 'string') {
    const coerced = coerceString(schema, raw);
    if (!coerced.ok) {
      issues.push({ path: dotted, source, message: coerced.message });
      badPaths.add(dotted);
      return;
    }
    value = coerced.value;
  }
  let node = merged;
  for (const key of segments.slice(0, -1)) {
    const next = node[key];
    if (!isPlainObject(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[segments[segments.length - 1]] = value;
  for (const key of [...sources.keys()]) if (key.startsWith(`${dotted}.`)) sources.delete(key);
  sources.set(dotted, source);
  badPaths.delete(dotted);
}

function sourceFor(
  dotted: string,
  sources: Map<string, string>,
  merged: Record<string, unknown>,
  segments: readonly (string | number)[],
): string {
  const parts = dotted === '' ? [] : dotted.split('.');
  for (let n = parts.length; n > 0; n--) {
    const s = sources.get(parts.slice(0, n).join('.'));
    if (s !== undefined) return s;
  }
  for (const [key, s] of sources) if (dotted === '' || key.startsWith(`${dotted}.`)) return s;
  let node: unknown = merged;
  for (const seg of segments) node = isPlainObject(node) || Array.isArray(node) ? (node as Record<string, unknown>)[seg] : undefined;
  return node === undefined ? 'not set' : 'default';
}

interface ParsedArgv {
  configPath?: string;
  values: { flag: string; value: string | boolean }[];
}

/**
 * Reads declared flags from argv: `--name value`, `--name=value`, `--flag` / `--no-flag` for
 * booleans. Anything else is reported, so a typo never goes unnoticed.
 */
function parseArgv(def: ConfigDefinition, argv: readonly string[], issues: ConfigIssue[]): ParsedArgv {
  const out: ParsedArgv = { values: [] };
  const isBool = (flag: string): boolean => {
    const schema = schemaAt(def.schema, splitPath(def.flags[flag]));
    return schema !== undefined && fieldInfo(schema).kind === 'boolean';
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') break;
    if (!arg.startsWith('--')) {
      issues.push({ path: '', source: `argument ${JSON.stringify(arg)}`, message: 'unexpected argument' });
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    let value: string | boolean | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    if (name === 'config') {
      const v = value ?? argv[++i];
      if (v === undefined) issues.push({ path: '', source: 'flag --config', message: 'needs a file path' });
      else out.configPath = v;
      continue;
    }
    if (!Object.prototype.hasOwnProperty.call(def.flags, name) && name.startsWith('no-') && value === undefined) {
      const positive = name.slice(3);
      if (Object.prototype.hasOwnProperty.call(def.flags, positive) && isBool(positive)) {
        out.values.push({ flag: positive, value: false });
        continue;
      }
    }
    if (!Object.prototype.hasOwnProperty.call(def.flags, name)) {
      issues.push({ path: '', source: `flag --${name}`, message: `unknown flag (known: ${flagList(def)})` });
      if (value === undefined && argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) i++;
      continue;
    }
    if (value === undefined) {
      const next = argv[i + 1];
      if (isBool(name)) {
        if (next !== undefined && /^(true|false|1|0|yes|no|on|off)$/i.test(next)) {
          value = next;
          i++;
        } else {
          value = true;
        }
      } else if (next === undefined || next.startsWith('--')) {
        issues.push({ path: def.flags[name], source: `flag --${name}`, message: 'needs a value' });
        continue;
      } else {
        value = next;
        i++;
      }
    }
    out.values.push({ flag: name, value });
  }
  return out;
}
