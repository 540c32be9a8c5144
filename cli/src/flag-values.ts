import {
  Code,
  DiffmeshError,
  DEFAULT_ADAPTER_SCALE,
  DEFAULT_PREVIEW_SIDE,
  invalidParameter,
  MAX_STEPS,
  type AdapterParams,
  type GenerationParams,
} from '@diffmesh/core/client';
import { isUnreachable } from '@diffmesh/client';
import { EXIT } from './exit-codes.js';
import type { GenerationFlags } from './commands/shared-options.js';

/** Flags whose names differ from the API field they set (for error messages). */
export const FLAG_OF_FIELD: Record<string, string> = {
  num_inference_steps: '--steps',
  guidance_scale: '--guidance',
  negative_prompt: '--negative',
  num_frames: '--frames',
  width: '--width',
  height: '--height',
  seed: '--seed',
  fps: '--fps',
  model: '--model',
  output: '--output',
  prompt: 'PROMPT',
  timeout_ms: '--timeout-ms',
  execution_providers: '--execution-providers',
  request_id: '--request-id',
  req_id: 'REQ-ID',
  input_image: '--image',
  strength: '--strength',
  'step_cache.threshold': '--step-cache',
  'step_cache.max_skipped_steps': '--step-cache-max-skip',
  'preview.every_steps': '--preview-every',
  lora_dir: '--lora-dir',
  max_bytes: '--max-bytes',
};

/** Statuses that mean the input was wrong (a flag, a model or a request id), not the run. */
const USAGE_CODES: ReadonlySet<Code> = new Set([Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.FAILED_PRECONDITION]);

/** `REQUEST_STATUS_CANCELLED` → `cancelled`. */
export function statusName(status: unknown): string {
  return String(status)
    .replace(/^REQUEST_STATUS_/, '')
    .toLowerCase();
}

/** Prints what went wrong (naming the flag of a bad field) and returns the exit status. */
export function reportError(err: unknown, interrupted: boolean): number {
  if (interrupted) {
    process.stderr.write('diffmesh: interrupted; nothing written\n');
    return EXIT.interrupted;
  }
  if (err instanceof DiffmeshError) {
    const field = err.field;
    const flag = field ? (FLAG_OF_FIELD[field] ?? (field.startsWith('adapters') ? '--lora' : undefined)) : undefined;
    const where = flag && flag !== field ? ` (${flag})` : '';
    process.stderr.write(`diffmesh: ${err.message}${where}\n`);
    if (isUnreachable(err)) return EXIT.unreachable;
    return USAGE_CODES.has(err.code) ? EXIT.usage : EXIT.failed;
  }
  process.stderr.write(`diffmesh: ${err instanceof Error ? err.message : String(err)}\n`);
  return EXIT.failed;
}

export function parseParams(f: GenerationFlags): Partial<GenerationParams> {
  const p: Partial<GenerationParams> = { negativePrompt: f.negative ?? '' };
  if (f.seed !== undefined) {
    if (!/^\d+$/.test(f.seed) || BigInt(f.seed) >= 2n ** 64n) {
      throw invalidParameter('seed', `expected an unsigned 64-bit integer, got "${f.seed}"`);
    }
    p.seed = f.seed;
  }
  if (f.steps !== undefined) p.numInferenceSteps = parseInteger(f.steps, 'num_inference_steps');
  if (f.guidance !== undefined) p.guidanceScale = parseNumber(f.guidance, 'guidance_scale');
  if (f.width !== undefined) p.width = parseInteger(f.width, 'width');
  if (f.height !== undefined) p.height = parseInteger(f.height, 'height');
  if (f.frames !== undefined) p.numFrames = parseInteger(f.frames, 'num_frames');
  if (f.fps !== undefined) p.fps = parseInteger(f.fps, 'fps');
  if (f.strength !== undefined) {
    const strength = parseNumber(f.strength, 'strength');
    // Checked here too, so that a bad value is refused before an image is read or a mesh is reached.
    if (strength <= 0 || strength > 1) throw invalidParameter('strength', `must be a number greater than 0 and at most 1, got ${strength}`);
    if (f.image === undefined) throw invalidParameter('strength', 'applies only with an input image (give --image)');
    p.strength = strength;
  }
  if (f.stepCache !== undefined || f.stepCacheMaxSkip !== undefined) {
    const threshold = f.stepCache !== undefined ? parseNumber(f.stepCache, 'step_cache.threshold') : undefined;
    if (threshold !== undefined && threshold < 0) throw invalidParameter('step_cache.threshold', `must be ≥ 0 (0 = off), got ${threshold}`);
    const maxSkippedSteps =
      f.stepCacheMaxSkip !== undefined ? parseInteger(f.stepCacheMaxSkip, 'step_cache.max_skipped_steps', 0, 200) : undefined;
    p.stepCache = { ...(threshold !== undefined ? { threshold } : {}), ...(maxSkippedSteps !== undefined ? { maxSkippedSteps } : {}) };
  }
  const adapters = parseLoras(f.lora);
  if (adapters.length > 0) p.adapters = adapters;
  return p;
}

/** `--lora NAME[:SCALE]` values → adapters (scale 1 when left out); errors name `adapters[i].name` / `.scale`. */
export function parseLoras(values: string[] | undefined): AdapterParams[] {
  return (values ?? []).map((v, i) => {
    const at = v.lastIndexOf(':');
    const name = at < 0 ? v : v.slice(0, at);
    if (name === '') throw invalidParameter(`adapters[${i}].name`, `expected NAME[:SCALE], got "${v}"`);
    if (at < 0) return { name, scale: DEFAULT_ADAPTER_SCALE };
    const raw = v.slice(at + 1);
    const scale = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(scale))
      throw invalidParameter(`adapters[${i}].scale`, `expected a number after "${name}:", got "${raw}"`);
    return { name, scale };
  });
}

/** `--preview-every` / `--preview-dir`: previews only when there is somewhere to write them. */
export function parsePreview(f: { previewDir?: string; previewEvery?: string }): Partial<GenerationParams> {
  if (f.previewDir === undefined) {
    if (f.previewEvery !== undefined) throw invalidParameter('preview.every_steps', 'needs --preview-dir (the folder the previews go to)');
    return {};
  }
  const everySteps = f.previewEvery === undefined ? 1 : parseInteger(f.previewEvery, 'preview.every_steps', 1, MAX_STEPS);
  return { preview: { everySteps, maxSide: DEFAULT_PREVIEW_SIDE } };
}

export function parseInteger(raw: string, field: string, min = -Infinity, max = Infinity): number {
  if (!/^-?\d+$/.test(raw.trim())) throw invalidParameter(field, `expected an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw invalidParameter(field, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function parseNumber(raw: string, field: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw invalidParameter(field, `expected a number, got "${raw}"`);
  return n;
}
