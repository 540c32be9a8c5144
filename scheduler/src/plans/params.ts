import {
  type AdapterParams,
  type GenerationParams,
  ADAPTER_NAME_PATTERN,
  DEFAULT_ADAPTER_SCALE,
  MAX_ADAPTER_SCALE,
  MAX_ADAPTERS,
  type StepCacheParams,
  type PreviewParams,
  invalidParameter,
  DEFAULT_STEP_CACHE_MAX_SKIPPED,
  DEFAULT_PREVIEW_SIDE,
  DEFAULT_STRENGTH,
  MAX_PREVIEW_SIDE,
  MIN_PREVIEW_SIDE,
  MAX_FPS,
  MAX_PROMPT_LENGTH,
  MAX_SEED,
  MAX_STEPS,
  MIN_FPS,
  MIN_STEPS,
  randomSeed,
} from '@diffmesh/core';
import type { FrameRule, PlanEntry } from './schema.js';

/**
 * Generation parameters as a caller gives them: every field optional (left-out fields take
 * the plan's defaults). `null` counts as left out, so JSON bodies may carry explicit nulls.
 * The seed may be a decimal string, a safe integer or a bigint.
 */
export interface GenerationParamsInput {
  prompt?: string | null;
  negativePrompt?: string | null;
  width?: number | null;
  height?: number | null;
  numFrames?: number | null;
  numInferenceSteps?: number | null;
  guidanceScale?: number | null;
  seed?: string | number | bigint | null;
  fps?: number | null;
  /** img2img strength in (0, 1]; only with an input image. */
  strength?: number | null;
  /** Step caching; fields left out take the plan's (off by default). */
  stepCache?: { threshold?: number | null; maxSkippedSteps?: number | null } | null;
  /** Live previews: every N denoising steps (0 = off), at most `maxSide` pixels a side. */
  preview?: { everySteps?: number | null; maxSide?: number | null } | null;
  /** LoRA adapters by name, each at a scale (default 1). */
  adapters?: Array<{ name?: string | null; scale?: number | null }> | null;
}

/** Options of {@link resolveParams}. */
export interface ResolveParamsOptions {
  /** Default {@link MAX_PROMPT_LENGTH}. */
  maxPromptLength?: number;
  /** Seed for requests that give none; default: 64 random bits. */
  randomSeed?: () => string;
  /** Whether the request has an input image: `strength` is set (and allowed) only then. */
  inputImage?: boolean;
}

/**
 * Fills a request's missing parameters from the plan entry's defaults and checks every
 * value against the entry's constraints. The result records the seed actually used (a
 * random one when none was given), so a run can be repeated.
 *
 * Throws `invalidParameter(field, …)` naming the first bad field as the user wrote it
 * (snake_case: `prompt`, `negative_prompt`, `width`, `height`, `num_frames`,
 * `num_inference_steps`, `guidance_scale`, `seed`, `fps`, `strength`, `preview.every_steps`,
 * `preview.max_side`, `adapters`, `adapters[i].name`, `adapters[i].scale`).
 */
export function resolveParams(entry: PlanEntry, input: GenerationParamsInput, opts: ResolveParamsOptions = {}): GenerationParams {
  const { defaults, constraints } = entry;
  const maxPrompt = opts.maxPromptLength ?? MAX_PROMPT_LENGTH;

  const prompt = checkPrompt('prompt', input.prompt, maxPrompt, true);
  const negativePrompt = checkPrompt('negative_prompt', input.negativePrompt, maxPrompt, false);
  const width = checkSize('width', given(input.width) ?? defaults.width, constraints.sizeMultiple, constraints.maxWidth);
  const height = checkSize('height', given(input.height) ?? defaults.height, constraints.sizeMultiple, constraints.maxHeight);
  const numFrames = checkFrames(given(input.numFrames) ?? defaults.numFrames, constraints.maxFrames, constraints.frameRule);

  const numInferenceSteps = given(input.numInferenceSteps) ?? defaults.steps;
  if (!Number.isInteger(numInferenceSteps) || numInferenceSteps < MIN_STEPS || numInferenceSteps > MAX_STEPS) {
    throw invalidParameter('num_inference_steps', `must be an integer from ${MIN_STEPS} to ${MAX_STEPS}, got ${show(numInferenceSteps)}`);
  }

  const guidanceScale = given(input.guidanceScale) ?? defaults.guidanceScale;
  if (typeof guidanceScale !== 'number' || !Number.isFinite(guidanceScale) || guidanceScale < 0) {
    throw invalidParameter('guidance_scale', `must be a finite number ≥ 0, got ${show(guidanceScale)}`);
  }

  const seedInput = given(input.seed);
  const seed = seedInput === undefined || seedInput === '' ? (opts.randomSeed ?? randomSeed)() : checkSeed(seedInput);

  const fps = given(input.fps) ?? defaults.fps;
  if (typeof fps !== 'number' || !Number.isFinite(fps) || fps < MIN_FPS || fps > MAX_FPS) {
    throw invalidParameter('fps', `must be a number from ${MIN_FPS} to ${MAX_FPS}, got ${show(fps)}`);
  }

  const strength = checkStrength(given(input.strength), opts.inputImage === true, defaults.strength ?? DEFAULT_STRENGTH);
  const stepCache = checkStepCache(given(input.stepCache) ?? {}, defaults.stepCache);
  const preview = checkPreview(given(input.preview));
  const adapters = checkAdapters(given(input.adapters));

  return {
    prompt,
    negativePrompt,
    width,
    height,
    numFrames,
    numInferenceSteps,
    guidanceScale,
    seed,
    fps,
    ...(strength !== undefined ? { strength } : {}),
    ...(stepCache !== undefined ? { stepCache } : {}),
    ...(preview ? { preview } : {}),
    ...(adapters.length > 0 ? { adapters } : {}),
  };
}

/**
 * Adapters: at most {@link MAX_ADAPTERS}, each a name of the adapter-file form (no path) given
 * once, at a finite scale within ±{@link MAX_ADAPTER_SCALE}. Whether an adapter by that name
 * exists is the denoising stage's to say.
 */
function checkAdapters(value: GenerationParamsInput['adapters']): AdapterParams[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalidParameter('adapters', `must be a list of {name, scale}, got ${show(value)}`);
  if (value.length > MAX_ADAPTERS) throw invalidParameter('adapters', `at most ${MAX_ADAPTERS} adapters, got ${value.length}`);
  const seen = new Set<string>();
  return value.map((a, i) => {
    const name = a?.name;
    if (typeof name !== 'string' || !ADAPTER_NAME_PATTERN.test(name)) {
      throw invalidParameter(
        `adapters[${i}].name`,
        `must be an adapter name (letters, digits, '.', '_', '-'; no path, not starting with '.'), got ${show(name)}`,
      );
    }
    if (seen.has(name)) throw invalidParameter(`adapters[${i}].name`, `${name} is given twice`);
    seen.add(name);
    const scale = given(a.scale) ?? DEFAULT_ADAPTER_SCALE;
    if (typeof scale !== 'number' || !Number.isFinite(scale) || Math.abs(scale) > MAX_ADAPTER_SCALE) {
      throw invalidParameter(
        `adapters[${i}].scale`,
        `must be a finite number from -${MAX_ADAPTER_SCALE} to ${MAX_ADAPTER_SCALE}, got ${show(scale)}`,
      );
    }
    return { name, scale };
  });
}

/**
 * Step caching: the request's fields over the plan's. Returns the settings only when caching
 * is on (threshold > 0 and at least one step may be skipped), so a run without it carries none.
 */
function checkStepCache(
  input: { threshold?: unknown; maxSkippedSteps?: unknown },
  plan: StepCacheParams | undefined,
): Required<StepCacheParams> | undefined {
  const threshold = given(input.threshold) ?? plan?.threshold ?? 0;
  if (typeof threshold !== 'number' || !Number.isFinite(threshold) || threshold < 0) {
    throw invalidParameter('step_cache.threshold', `must be a finite number ≥ 0 (0 = off), got ${show(threshold)}`);
  }
  const maxSkippedSteps = given(input.maxSkippedSteps) ?? plan?.maxSkippedSteps ?? DEFAULT_STEP_CACHE_MAX_SKIPPED;
  if (typeof maxSkippedSteps !== 'number' || !Number.isInteger(maxSkippedSteps) || maxSkippedSteps < 0 || maxSkippedSteps > MAX_STEPS) {
    throw invalidParameter('step_cache.max_skipped_steps', `must be an integer from 0 to ${MAX_STEPS}, got ${show(maxSkippedSteps)}`);
  }
  return threshold > 0 && maxSkippedSteps > 0 ? { threshold, maxSkippedSteps } : undefined;
}

/** Preview params: `every_steps` from 0 (off) to the step limit, `max_side` in range; undefined when off. */
function checkPreview(value: GenerationParamsInput['preview']): PreviewParams | undefined {
  if (value === undefined || value === null) return undefined;
  const everySteps = given(value.everySteps) ?? 0;
  if (typeof everySteps !== 'number' || !Number.isInteger(everySteps) || everySteps < 0 || everySteps > MAX_STEPS) {
    throw invalidParameter('preview.every_steps', `must be an integer from 0 (no previews) to ${MAX_STEPS}, got ${show(everySteps)}`);
  }
  const maxSide = given(value.maxSide) ?? DEFAULT_PREVIEW_SIDE;
  if (typeof maxSide !== 'number' || !Number.isInteger(maxSide) || maxSide < MIN_PREVIEW_SIDE || maxSide > MAX_PREVIEW_SIDE) {
    throw invalidParameter('preview.max_side', `must be an integer from ${MIN_PREVIEW_SIDE} to ${MAX_PREVIEW_SIDE}, got ${show(maxSide)}`);
  }
  return everySteps === 0 ? undefined : { everySteps, maxSide };
}

/** img2img strength: in (0, 1], and only for a request with an input image (default: the plan's). */
function checkStrength(value: unknown, inputImage: boolean, fallback: number): number | undefined {
  if (value === undefined) return inputImage ? fallback : undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 1) {
    throw invalidParameter('strength', `must be a number greater than 0 and at most 1, got ${show(value)}`);
  }
  if (!inputImage) throw invalidParameter('strength', 'applies only to a request with an input image (input_image)');
  return value;
}

/** Human-readable frame rule, e.g. `4k+1` or `a multiple of 4`. */
export function describeFrameRule(rule: FrameRule): string {
  return rule.remainder === 0 ? `a multiple of ${rule.modulus}` : `${rule.modulus}k+${rule.remainder}`;
}

function given<T>(v: T | null | undefined): T | undefined {
  return v === null ? undefined : v;
}

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : typeof v === 'bigint' ? v.toString() : String(v);
}

function checkPrompt(field: string, value: unknown, max: number, required: boolean): string {
  const v = given(value);
  if (v === undefined) {
    if (required) throw invalidParameter(field, 'is required');
    return '';
  }
  if (typeof v !== 'string') throw invalidParameter(field, `must be a string, got ${typeof v}`);
  if (required && v.trim() === '') throw invalidParameter(field, 'must not be empty');
  let length = 0;
  for (const _ of v) length++;
  if (length > max) throw invalidParameter(field, `is too long: ${length} characters, at most ${max}`);
  return v;
}

function checkSize(field: 'width' | 'height', value: unknown, multiple: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw invalidParameter(field, `must be a positive integer, got ${show(value)}`);
  }
  if (value > max) throw invalidParameter(field, `must be at most ${max}, got ${value}`);
  if (value % multiple !== 0) {
    const lower = Math.floor(value / multiple) * multiple;
    const upper = lower + multiple;
    const near = [lower, upper].filter((n) => n >= multiple && n <= max);
    const hint = near.length > 0 ? ` (nearest: ${near.join(' or ')})` : '';
    throw invalidParameter(field, `must be a multiple of ${multiple}, got ${value}${hint}`);
  }
  return value;
}

function checkFrames(value: unknown, maxFrames: number, rule: FrameRule | undefined): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw invalidParameter('num_frames', `must be a positive integer, got ${show(value)}`);
  }
  if (value > maxFrames) {
    throw invalidParameter(
      'num_frames',
      maxFrames === 1
        ? `this model generates single images, so num_frames must be 1, got ${value}`
        : `must be from 1 to ${maxFrames}, got ${value}`,
    );
  }
  if (rule && value % rule.modulus !== rule.remainder) {
    const lower = Math.floor((value - rule.remainder) / rule.modulus) * rule.modulus + rule.remainder;
    const near = [lower, lower + rule.modulus].filter((n) => n >= 1 && n <= maxFrames);
    const hint = near.length > 0 ? ` (nearest: ${near.join(' or ')})` : '';
    throw invalidParameter('num_frames', `must be ${describeFrameRule(rule)}, got ${value}${hint}`);
  }
  return value;
}

function checkSeed(value: unknown): string {
  let n: bigint | undefined;
  if (typeof value === 'bigint') n = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) n = BigInt(value);
  else if (typeof value === 'string' && /^[0-9]{1,64}$/.test(value)) n = BigInt(value);
  if (n === undefined || n < 0n || n > MAX_SEED) {
    throw invalidParameter('seed', `must be an unsigned 64-bit integer written in decimal, got ${show(value)}`);
  }
  return n.toString();
}
