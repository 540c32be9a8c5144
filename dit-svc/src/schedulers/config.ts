import { invalidField, SchedulerError, unsupported } from './errors.js';
import type { SchedulerClassName } from './types.js';
import { parsePythonJson } from '@diffmesh/model-layout';

/**
 * Reads typed fields out of a raw `scheduler_config.json` object. Like diffusers'
 * `from_config`, it ignores keys a class does not know; a `null` value means "not set" and
 * gives the class default. Every error names the field.
 */
export class ConfigReader {
  /** The fields a class read, with the values it used (for the fingerprint). */
  readonly used: Record<string, unknown> = {};

  constructor(
    readonly className: SchedulerClassName,
    private readonly raw: Readonly<Record<string, unknown>>,
  ) {}

  private get(name: string): unknown {
    const v = this.raw[name];
    return v === null ? undefined : v;
  }

  /** A finite number (or ±Infinity with `allowInfinite`), optionally bounded. */
  number(name: string, def: number, range: { min?: number; max?: number; gt?: number; lt?: number; allowInfinite?: boolean } = {}): number {
    const v = this.get(name);
    const out = v === undefined ? def : v;
    if (typeof out !== 'number' || Number.isNaN(out)) throw invalidField(name, `must be a number, got ${show(v)}`);
    if (!Number.isFinite(out) && !range.allowInfinite) throw invalidField(name, `must be finite, got ${out}`);
    if (range.min !== undefined && out < range.min) throw invalidField(name, `must be ≥ ${range.min}, got ${out}`);
    if (range.max !== undefined && out > range.max) throw invalidField(name, `must be ≤ ${range.max}, got ${out}`);
    if (range.gt !== undefined && !(out > range.gt)) throw invalidField(name, `must be > ${range.gt}, got ${out}`);
    if (range.lt !== undefined && !(out < range.lt)) throw invalidField(name, `must be < ${range.lt}, got ${out}`);
    this.used[name] = out;
    return out;
  }

  /** A number that may be left unset (`null`/absent): `undefined` then. */
  optionalNumber(name: string, range: { gt?: number; lt?: number } = {}): number | undefined {
    const v = this.get(name);
    if (v === undefined) return undefined;
    return this.number(name, 0, range);
  }

  int(name: string, def: number, min: number): number {
    const v = this.get(name);
    const out = v === undefined ? def : v;
    if (typeof out !== 'number' || !Number.isInteger(out)) throw invalidField(name, `must be an integer, got ${show(v)}`);
    if (out < min) throw invalidField(name, `must be ≥ ${min}, got ${out}`);
    this.used[name] = out;
    return out;
  }

  bool(name: string, def: boolean): boolean {
    const v = this.get(name);
    const out = v === undefined ? def : v;
    if (typeof out !== 'boolean') throw invalidField(name, `must be true or false, got ${show(v)}`);
    this.used[name] = out;
    return out;
  }

  /**
   * A string from a known list. `supported` (default: all of `known`) are the values this
   * implementation runs; the others of `known` are valid diffusers values and are refused as
   * unsupported.
   */
  choice<T extends string>(name: string, def: T, known: readonly string[], supported: readonly T[] = known as T[]): T {
    const v = this.get(name);
    const out = v === undefined ? def : v;
    if (typeof out !== 'string' || !known.includes(out)) {
      throw invalidField(name, `must be one of ${known.map((k) => `"${k}"`).join(', ')}, got ${show(v)}`);
    }
    if (!(supported as readonly string[]).includes(out)) {
      throw unsupported(this.className, name, `"${out}" is not supported (supported: ${supported.map((k) => `"${k}"`).join(', ')})`);
    }
    this.used[name] = out;
    return out as T;
  }

  /** An optional array of numbers (`trained_betas`). */
  numberArray(name: string): number[] | undefined {
    const v = this.get(name);
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'number' || !Number.isFinite(x))) {
      throw invalidField(name, 'must be an array of finite numbers');
    }
    this.used[name] = v;
    return v as number[];
  }

  /** A boolean option this implementation supports only as `false`. */
  refuseIfTrue(name: string, why: string): void {
    if (this.bool(name, false)) throw unsupported(this.className, name, `= true is not supported: ${why}`);
  }
}

function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return `"${v}"`;
  try {
    return JSON.stringify(v) ?? typeof v;
  } catch {
    return typeof v;
  }
}

/**
 * Parses the text of a `scheduler_config.json` (with model-layout's reader of Python's JSON). Python's `json.dumps`, which diffusers'
 * `save_config` uses, writes `-Infinity`, `Infinity` and `NaN` (e.g. DPM-Solver's
 * `"lambda_min_clipped": -Infinity`); `JSON.parse` refuses them, this accepts them.
 */
export function parseSchedulerConfigJson(text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = parsePythonJson(text);
  } catch (err) {
    throw new SchedulerError('INVALID_FIELD', `scheduler config is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SchedulerError('INVALID_FIELD', 'scheduler config must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}
