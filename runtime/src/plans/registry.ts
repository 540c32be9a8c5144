import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { ConfigError, type ConfigIssue } from '../config/index.js';
import type { ExecutionPlan } from '../domain.js';
import { DiffmeshError, invalidParameter, unknownModel } from '../errors/index.js';
import { resolveParams } from './params.js';
import { PlanEntrySchema, PlanFileSchema, type PlanEntry } from './schema.js';

/** The plan registry shipped with diffmesh (`runtime/config/plans.yaml`). */
export const DEFAULT_PLANS_FILE: string = fileURLToPath(new URL('../../config/plans.yaml', import.meta.url));

/**
 * Compiles a model-name glob: `*` matches any run of characters (including `/`), `?` exactly
 * one character; everything else is literal and matching is case-sensitive and anchored.
 */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (const ch of glob) {
    if (ch === '*') source += '.*';
    else if (ch === '?') source += '.';
    else source += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 's');
}

/**
 * The model → execution plan registry. Lookup tries exact `model` entries first, then
 * `pattern` entries in file order; the first that matches wins.
 */
export class PlanRegistry {
  /** Every entry, in file order. */
  readonly entries: readonly PlanEntry[];
  /** Where the entries came from, for messages (e.g. `file runtime/config/plans.yaml`). */
  readonly source: string;
  private readonly exact = new Map<string, PlanEntry>();
  private readonly patterns: { re: RegExp; entry: PlanEntry }[] = [];

  private constructor(entries: PlanEntry[], source: string) {
    this.entries = Object.freeze(entries);
    this.source = source;
    for (const e of entries) {
      if (e.model !== undefined) this.exact.set(e.model, e);
      else if (e.pattern !== undefined) this.patterns.push({ re: globToRegExp(e.pattern), entry: e });
    }
  }

  /**
   * Validates entries (as they would appear under `plans:` in the file) and builds a
   * registry. Throws {@link ConfigError} naming each bad entry.
   */
  static fromEntries(entries: readonly unknown[], source = 'plans'): PlanRegistry {
    const issues: ConfigIssue[] = [];
    const valid: PlanEntry[] = [];
    const seen = new Map<string, number>();
    entries.forEach((raw, i) => {
      const label = entryLabel(raw, i);
      const result = PlanEntrySchema.safeParse(raw);
      if (!result.success) {
        for (const zi of result.error.issues) {
          issues.push({ path: label + subPath(zi.path), source, message: zi.message });
        }
        return;
      }
      const entry = result.data;
      const key = entry.model !== undefined ? `model ${entry.model}` : `pattern ${entry.pattern}`;
      const first = seen.get(key);
      if (first !== undefined) {
        issues.push({ path: label, source, message: `duplicate of plans[${first}]` });
        return;
      }
      seen.set(key, i);
      for (const issue of checkDefaults(entry)) issues.push({ ...issue, path: label + issue.path, source });
      valid.push(entry);
    });
    if (issues.length > 0) throw new ConfigError(issues);
    return new PlanRegistry(valid, source);
  }

  /** The entry serving `model`, or undefined. */
  find(model: string): PlanEntry | undefined {
    const exact = this.exact.get(model);
    if (exact) return exact;
    return this.patterns.find((p) => p.re.test(model))?.entry;
  }

  /**
   * The entry serving `model`. Throws `unknownModel` (NOT_FOUND / UNKNOWN_MODEL) listing the
   * known names and patterns when none matches.
   */
  lookup(model: string): PlanEntry {
    if (typeof model !== 'string' || model.trim() === '') throw invalidParameter('model', 'is required');
    const entry = this.find(model);
    if (!entry) throw unknownModel(model, this.knownNames());
    return entry;
  }

  /** The execution plan for `model` (stages in order, each with its pool). */
  executionPlan(model: string): ExecutionPlan {
    return toExecutionPlan(this.lookup(model), model);
  }

  /** Exact model names, then patterns, in file order. */
  knownNames(): string[] {
    return [
      ...this.entries.filter((e) => e.model !== undefined).map((e) => e.model as string),
      ...this.entries.filter((e) => e.pattern !== undefined).map((e) => e.pattern as string),
    ];
  }
}

/** The {@link ExecutionPlan} of an entry for the model name a request used. */
export function toExecutionPlan(entry: PlanEntry, model: string): ExecutionPlan {
  return {
    model,
    stages: entry.stages.map((s) => (s.version === undefined ? { name: s.name, pool: s.pool } : { ...s })),
  };
}

/** Parses a plan registry file's text (YAML; JSON is YAML too). Throws {@link ConfigError}. */
export function parsePlanRegistry(text: string, source = 'plans'): PlanRegistry {
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new ConfigError([{ path: '', source, message: `cannot parse: ${(err as Error).message.split('\n')[0]}` }]);
  }
  const file = PlanFileSchema.safeParse(data ?? {});
  if (!file.success) {
    throw new ConfigError(
      file.error.issues.map((zi) => ({ path: subPath(zi.path).replace(/^\./, ''), source, message: zi.message })),
    );
  }
  return PlanRegistry.fromEntries(file.data.plans, source);
}

/**
 * Reads a plan registry file; the shipped {@link DEFAULT_PLANS_FILE} when no path is given.
 * Throws {@link ConfigError} for a missing, unreadable or invalid file.
 */
export async function loadPlanRegistry(file: string = DEFAULT_PLANS_FILE): Promise<PlanRegistry> {
  const source = `file ${file}`;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError([
      { path: '', source, message: code === 'ENOENT' ? 'file not found' : `cannot read (${code ?? String(err)})` },
    ]);
  }
  return parsePlanRegistry(text, source);
}

function entryLabel(raw: unknown, i: number): string {
  if (typeof raw === 'object' && raw !== null) {
    const r = raw as Record<string, unknown>;
    if (typeof r.model === 'string') return `plans[${i}] (model "${r.model}")`;
    if (typeof r.pattern === 'string') return `plans[${i}] (pattern "${r.pattern}")`;
  }
  return `plans[${i}]`;
}

function subPath(path: readonly PropertyKey[]): string {
  return path.map((s) => (typeof s === 'number' ? `[${s}]` : `.${String(s)}`)).join('');
}

const DEFAULT_KEYS: Record<string, string> = {
  width: 'width',
  height: 'height',
  num_frames: 'numFrames',
  num_inference_steps: 'steps',
  guidance_scale: 'guidanceScale',
  fps: 'fps',
};

/** The entry's own defaults must pass its constraints; report the first that does not. */
function checkDefaults(entry: PlanEntry): Omit<ConfigIssue, 'source'>[] {
  try {
    resolveParams(entry, { prompt: 'check', seed: '0' });
    return [];
  } catch (err) {
    if (!(err instanceof DiffmeshError) || err.field === undefined) throw err;
    const key = DEFAULT_KEYS[err.field] ?? err.field;
    const detail = err.message.slice(err.message.indexOf(':') + 1).trim();
    return [{ path: `.defaults.${key}`, message: `violates the entry's constraints: ${detail}` }];
  }
}
