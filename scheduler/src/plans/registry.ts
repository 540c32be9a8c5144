import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { looksLikePath } from '@diffmesh/model-layout';
import { expandDirectoryEntries } from './directory-entries.js';
import { parse as parseYaml } from 'yaml';
import {
  ConfigError,
  type ConfigIssue,
  type ExecutionPlan,
  DiffmeshError,
  invalidParameter,
  unknownModel,
  globToRegExp,
} from '@diffmesh/core';
import { resolveParams } from './params.js';
import { PlanEntrySchema, PlanFileSchema, type PlanEntry } from './schema.js';

/** The plan registry shipped with diffmesh (`runtime/config/plans.yaml`). */
export const DEFAULT_PLANS_FILE: string = fileURLToPath(new URL('../../config/plans.yaml', import.meta.url));

export class PlanRegistry {
  /** Every entry, in file order. */
  readonly entries: readonly PlanEntry[];
  /** Where the entries came from, for messages (e.g. `file runtime/config/plans.yaml`). */
  readonly source: string;
  private readonly exact = new Map<string, PlanEntry>();
  private readonly patterns: { re: RegExp; entry: PlanEntry }[] = [];
  private readonly directories = new Map<string, PlanEntry>();

  private constructor(entries: PlanEntry[], source: string) {
    this.entries = Object.freeze(entries);
    this.source = source;
    for (const e of entries) {
      if (e.model !== undefined) this.exact.set(e.model, e);
      else if (e.pattern !== undefined) this.patterns.push({ re: globToRegExp(e.pattern), entry: e });
      if (e.directory !== undefined && !this.directories.has(e.directory)) this.directories.set(e.directory, e);
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

  /**
   * The entry serving `model`, or undefined. A path (absolute, `./…`, `../…`) also finds the
   * entry of the model directory it leads to, whatever id that entry serves it under.
   */
  find(model: string): PlanEntry | undefined {
    const exact = this.exact.get(model);
    if (exact) return exact;
    const pattern = this.patterns.find((p) => p.re.test(model))?.entry;
    if (pattern || this.directories.size === 0 || !looksLikePath(model)) return pattern;
    return this.directories.get(realDirectory(model));
  }

  /**
   * The id a request for `model` runs under: the model itself, or, for a path to a served
   * model directory, that directory's model id (its real path, or the id the entry gives), so
   * that every stage sees the id it serves.
   */
  canonicalModel(model: string): string {
    if (this.exact.has(model) || !looksLikePath(model)) return model;
    const entry = this.find(model);
    return entry?.directory !== undefined && entry.model !== undefined ? entry.model : model;
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
    stages: entry.stages.map((s) => ({
      name: s.name,
      pool: s.pool,
      ...(s.version !== undefined ? { version: s.version } : {}),
      ...(s.requires !== undefined ? { requires: s.requires } : {}),
    })),
  };
}

/** Parses a plan registry file's text (YAML; JSON is YAML too). Throws {@link ConfigError}. */
export function parsePlanRegistry(text: string, source = 'plans'): PlanRegistry {
  return PlanRegistry.fromEntries(parsePlanFile(text, source), source);
}

/** The raw entries of a plan registry file's text. Throws {@link ConfigError}. */
function parsePlanFile(text: string, source: string): unknown[] {
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new ConfigError([{ path: '', source, message: `cannot parse: ${(err as Error).message.split('\n')[0]}` }]);
  }
  const file = PlanFileSchema.safeParse(data ?? {});
  if (!file.success) {
    throw new ConfigError(file.error.issues.map((zi) => ({ path: subPath(zi.path).replace(/^\./, ''), source, message: zi.message })));
  }
  return file.data.plans;
}

/**
 * Reads a plan registry file; the shipped {@link DEFAULT_PLANS_FILE} when no path is given.
 * Throws {@link ConfigError} for a missing, unreadable or invalid file.
 */
export async function loadPlanRegistry(file: string = DEFAULT_PLANS_FILE, opts: LoadPlanRegistryOptions = {}): Promise<PlanRegistry> {
  const source = `file ${file}`;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError([{ path: '', source, message: code === 'ENOENT' ? 'file not found' : `cannot read (${code ?? String(err)})` }]);
  }
  const entries = await expandDirectoryEntries(parsePlanFile(text, source), source, {
    baseDir: path.dirname(path.resolve(file)),
    extra: opts.directories ?? [],
  });
  return PlanRegistry.fromEntries(entries, source);
}

/** Options of {@link loadPlanRegistry}. */
export interface LoadPlanRegistryOptions {
  /**
   * Model directories (diffusers/optimum ONNX layout) to serve besides the file's entries, each
   * under its absolute real path, with the plan, pools and defaults derived from its files.
   */
  directories?: readonly string[];
}

/** The real path of a directory given as a model id (the path itself when it cannot be resolved). */
function realDirectory(model: string): string {
  const abs = path.resolve(model);
  try {
    return realpathSync(abs);
  } catch {
    return abs;
  }
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
