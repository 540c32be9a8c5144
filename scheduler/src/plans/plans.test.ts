import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, Code, DiffmeshError } from '@diffmesh/core';
import {
  DEFAULT_PLANS_FILE,
  PlanRegistry,
  globToRegExp,
  loadPlanRegistry,
  parsePlanRegistry,
  resolveParams,
  type GenerationParamsInput,
  type PlanEntry,
  type PlanEntryInput,
} from './index.js';

function entry(over: Partial<PlanEntryInput> & ({ model: string } | { pattern: string })): PlanEntryInput {
  return {
    modalities: ['text-to-video'],
    stages: [
      { name: 'text_encoding', pool: 'enc' },
      { name: 'denoising', pool: 'dit' },
      { name: 'vae_decoding', pool: 'vae' },
    ],
    defaults: { width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5, fps: 8 },
    constraints: { sizeMultiple: 16, maxWidth: 512, maxHeight: 512, maxFrames: 33, frameRule: { modulus: 4, remainder: 1 } },
    ...over,
  };
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

function diffmeshError(fn: () => unknown): DiffmeshError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DiffmeshError);
    return err as DiffmeshError;
  }
  throw new Error('expected a DiffmeshError');
}

describe('PlanRegistry lookup', () => {
  const registry = PlanRegistry.fromEntries([
    entry({ pattern: 'org/video-*', stages: [{ name: 'denoising', pool: 'first-pattern' }] }),
    entry({ model: 'org/video-large', stages: [{ name: 'denoising', pool: 'exact' }] }),
    entry({ pattern: 'org/video-l*', stages: [{ name: 'denoising', pool: 'second-pattern' }] }),
    entry({ pattern: 'org/image-v?', stages: [{ name: 'denoising', pool: 'single-char' }] }),
  ]);
  const pool = (model: string): string => registry.lookup(model).stages[0].pool;

  it('prefers an exact entry over an earlier pattern', () => {
    expect(pool('org/video-large')).toBe('exact');
  });

  it('tries patterns in file order', () => {
    expect(pool('org/video-little')).toBe('first-pattern');
  });

  it('matches ? to exactly one character and is case-sensitive', () => {
    expect(pool('org/image-v2')).toBe('single-char');
    expect(registry.find('org/image-v10')).toBeUndefined();
    expect(registry.find('ORG/video-large')).toBeUndefined();
  });

  it('rejects an unknown model with UNKNOWN_MODEL listing the known names', () => {
    const err = diffmeshError(() => registry.lookup('org/nope'));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.reason).toBe('UNKNOWN_MODEL');
    expect(err.message).toContain('org/nope');
    expect(err.message).toContain('known: org/video-large, org/video-*, org/video-l*, org/image-v?');
  });

  it('builds the execution plan under the requested name', () => {
    expect(registry.executionPlan('org/video-small')).toEqual({
      model: 'org/video-small',
      stages: [{ name: 'denoising', pool: 'first-pattern' }],
    });
  });

  it('treats glob metacharacters other than * and ? literally', () => {
    expect(globToRegExp('a.b+(c)*').test('a.b+(c)-x')).toBe(true);
    expect(globToRegExp('a.b*').test('axb')).toBe(false);
  });
});

describe('plan file validation', () => {
  it('rejects duplicate exact entries, naming both', () => {
    const err = configError(() => PlanRegistry.fromEntries([entry({ model: 'a/b' }), entry({ model: 'a/b' })]));
    expect(err.message).toBe('config: plans[1] (model "a/b") (from plans): duplicate of plans[0]');
  });

  it('rejects unknown stage names, naming the entry and the stage', () => {
    const err = configError(() => PlanRegistry.fromEntries([entry({ model: 'a/b', stages: [{ name: 'upscaling' as never, pool: 'p' }] })]));
    expect(err.message).toContain('config: plans[0] (model "a/b").stages[0].name (from plans): unknown stage "upscaling"');
  });

  it('rejects empty stages', () => {
    const err = configError(() => PlanRegistry.fromEntries([entry({ pattern: 'x/*', stages: [] })]));
    expect(err.message).toContain('plans[0] (pattern "x/*").stages (from plans): list at least one stage');
  });

  it('rejects stages out of pipeline order or repeated', () => {
    const stages = [
      { name: 'denoising' as const, pool: 'd' },
      { name: 'text_encoding' as const, pool: 't' },
      { name: 'denoising' as const, pool: 'd' },
    ];
    const err = configError(() => PlanRegistry.fromEntries([entry({ model: 'a/b', stages })]));
    expect(err.message).toContain('stages[1].name (from plans): stage "text_encoding" must come before "denoising"');
    expect(err.message).toContain('stages[2].name (from plans): stage "denoising" appears twice');
  });

  it('requires exactly one of model and pattern', () => {
    const both = { ...entry({ model: 'a/b' }), pattern: 'a/*' };
    expect(configError(() => PlanRegistry.fromEntries([both])).message).toContain('give exactly one of "model"');
    const plain = entry({ pattern: 'a/b' });
    expect(configError(() => PlanRegistry.fromEntries([plain])).message).toContain('has no * or ?');
  });

  it('rejects defaults that break the entry’s own constraints', () => {
    const bad = entry({ model: 'a/b', defaults: { width: 250, height: 256, numFrames: 9, steps: 20, guidanceScale: 5 } });
    expect(configError(() => PlanRegistry.fromEntries([bad])).message).toContain(
      'plans[0] (model "a/b").defaults.width (from plans): violates the entry\'s constraints: must be a multiple of 16',
    );
  });

  it('takes requires: input_image on a stage, and builds it into the execution plan', () => {
    const registry = PlanRegistry.fromEntries([
      entry({
        model: 'a/img2img',
        modalities: ['text-to-image', 'image-to-image'],
        stages: [
          { name: 'text_encoding', pool: 'enc' },
          { name: 'image_encoding', pool: 'vae-enc', requires: 'input_image' },
          { name: 'denoising', pool: 'dit' },
        ],
        defaults: { width: 256, height: 256, numFrames: 1, steps: 20, guidanceScale: 5, strength: 0.6 },
        constraints: { sizeMultiple: 16, maxWidth: 512, maxHeight: 512 },
      }),
    ]);
    expect(registry.executionPlan('a/img2img').stages[1]).toEqual({ name: 'image_encoding', pool: 'vae-enc', requires: 'input_image' });
    expect(registry.lookup('a/img2img').defaults.strength).toBe(0.6);
  });

  it('keeps input images consistent: requirements, image modalities and image_encoding go together', () => {
    const imageStage = { name: 'image_encoding' as const, pool: 'vae-enc', requires: 'input_image' as const };
    const rest = [
      { name: 'denoising' as const, pool: 'dit' },
      { name: 'vae_decoding' as const, pool: 'vae' },
    ];
    const unknown = configError(() =>
      PlanRegistry.fromEntries([
        entry({ model: 'a/b', modalities: ['image-to-video'], stages: [{ ...imageStage, requires: 'mask' as never }, ...rest] }),
      ]),
    );
    expect(unknown.message).toContain(
      'plans[0] (model "a/b").stages[0].requires (from plans): unknown input "mask" (expected one of input_image)',
    );
    const always = configError(() =>
      PlanRegistry.fromEntries([
        entry({ model: 'a/b', modalities: ['image-to-video'], stages: [{ name: 'image_encoding', pool: 'vae-enc' }, ...rest] }),
      ]),
    );
    expect(always.message).toContain('stages[0].requires (from plans): an image_encoding stage must have "requires: input_image"');
    expect(always.message).toContain('an image-to-video model needs a stage with "requires: input_image"');
    const noModality = configError(() => PlanRegistry.fromEntries([entry({ model: 'a/b', stages: [imageStage, ...rest] })]));
    expect(noModality.message).toContain(
      '.modalities (from plans): a model with a stage that requires input_image must list image-to-image or image-to-video',
    );
    const noStage = configError(() => PlanRegistry.fromEntries([entry({ model: 'a/b', modalities: ['text-to-video', 'image-to-image'] })]));
    expect(noStage.message).toContain('an image-to-image model needs a stage with "requires: input_image"');
    const strength = configError(() =>
      PlanRegistry.fromEntries([
        entry({ model: 'a/b', defaults: { width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5, strength: 0.5 } }),
      ]),
    );
    expect(strength.message).toContain('.defaults.strength (from plans): strength applies only to a model that takes an input image');
    const outOfRange = configError(() =>
      PlanRegistry.fromEntries([
        entry({
          model: 'a/b',
          modalities: ['image-to-video'],
          stages: [imageStage, ...rest],
          defaults: { width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5, strength: 0 },
        }),
      ]),
    );
    expect(outOfRange.message).toContain('.defaults.strength (from plans): strength must be greater than 0');
  });

  it('reports a broken file with its source', () => {
    expect(configError(() => parsePlanRegistry('plans: [', 'file x.yaml')).message).toMatch(/^config: file x\.yaml: cannot parse/);
    expect(configError(() => parsePlanRegistry('plans: []', 'file x.yaml')).message).toBe(
      'config: plans (from file x.yaml): list at least one plan',
    );
  });
});

describe('shipped plans.yaml', () => {
  it('loads and serves every seed family and built-in model', async () => {
    const registry = await loadPlanRegistry();
    for (const model of [
      'diffmesh/tiny-shapes',
      'diffmesh/synthetic-dit-image',
      'diffmesh/synthetic-dit-video',
      'Wan-AI/Wan2.1-T2V-1.3B-Diffusers',
      'Wan-AI/Wan2.1-T2V-14B-Diffusers',
      'Wan-AI/Wan2.1-I2V-14B-720P-Diffusers',
      'hunyuanvideo-community/HunyuanVideo',
      'black-forest-labs/FLUX.1-dev',
    ]) {
      expect(registry.lookup(model).model).toBe(model);
    }
    expect(registry.lookup('Wan-AI/Wan2.1-T2V-7B-Diffusers').pattern).toBe('Wan-AI/Wan2.1-T2V-*');
  });

  it('has the stage layouts of each family', async () => {
    const registry = await loadPlanRegistry(DEFAULT_PLANS_FILE);
    const names = (m: string): string[] => registry.executionPlan(m).stages.map((s) => s.name);
    expect(registry.executionPlan('diffmesh/tiny-shapes').stages).toEqual([
      { name: 'text_encoding', pool: 'encoder-tiny' },
      { name: 'image_encoding', pool: 'vae-encoder-tiny', requires: 'input_image' },
      { name: 'denoising', pool: 'dit-tiny' },
      { name: 'vae_decoding', pool: 'vae-tiny' },
    ]);
    expect(registry.executionPlan('Wan-AI/Wan2.1-I2V-14B-720P-Diffusers').stages[1]).toEqual({
      name: 'image_encoding',
      pool: 'encoder-clip-vit-h-14',
      requires: 'input_image',
    });
    expect(names('hunyuanvideo-community/HunyuanVideo').slice(0, 2)).toEqual(['text_encoding', 'text_encoding_2']);
    expect(names('black-forest-labs/FLUX.1-dev').slice(0, 2)).toEqual(['text_encoding', 'text_encoding_2']);
    const video = registry.lookup('diffmesh/synthetic-dit-video');
    expect(video.defaults).toEqual({ width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5, fps: 8 });
    expect(video.constraints.frameRule).toEqual({ modulus: 4, remainder: 1 });
  });

  it('reports a missing file', async () => {
    const missing = path.join(tmpdir(), 'diffmesh-no-such-plans.yaml');
    await expect(loadPlanRegistry(missing)).rejects.toThrow(`config: file ${missing}: file not found`);
  });

  it('loads a file given by path', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'diffmesh-plans-'));
    try {
      const file = path.join(dir, 'plans.yaml');
      writeFileSync(file, `plans:\n  - ${JSON.stringify(entry({ model: 'x/y' }))}\n`);
      expect((await loadPlanRegistry(file)).knownNames()).toEqual(['x/y']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('resolveParams', () => {
  const video = PlanRegistry.fromEntries([entry({ model: 'v/v' })]).lookup('v/v');
  const image: PlanEntry = PlanRegistry.fromEntries([
    entry({
      model: 'i/i',
      modalities: ['text-to-image'],
      defaults: { width: 512, height: 512, steps: 28, guidanceScale: 3.5 },
      constraints: { sizeMultiple: 16, maxWidth: 1024, maxHeight: 1024 },
    }),
  ]).lookup('i/i');

  function fieldOf(e: PlanEntry, input: GenerationParamsInput): { field: string | undefined; message: string } {
    const err = diffmeshError(() => resolveParams(e, { prompt: 'a red ball', ...input }));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.reason).toBe('INVALID_PARAMETER');
    return { field: err.field, message: err.message };
  }

  it('takes preview params: every_steps 0 = off, max_side defaults to 256, bad values named', () => {
    expect(resolveParams(video, { prompt: 'x', preview: { everySteps: 3 } }).preview).toEqual({ everySteps: 3, maxSide: 256 });
    expect(resolveParams(video, { prompt: 'x', preview: { everySteps: 1, maxSide: 64 } }).preview).toEqual({ everySteps: 1, maxSide: 64 });
    expect(resolveParams(video, { prompt: 'x', preview: { everySteps: 0 } })).not.toHaveProperty('preview');
    expect(resolveParams(video, { prompt: 'x', preview: null })).not.toHaveProperty('preview');
    for (const everySteps of [-1, 1.5, 201, Number.NaN]) {
      expect(fieldOf(video, { preview: { everySteps } }).field).toBe('preview.every_steps');
    }
    for (const maxSide of [0, 7, 513, 100.5]) {
      expect(fieldOf(video, { preview: { everySteps: 1, maxSide } }).field).toBe('preview.max_side');
    }
  });

  it('takes adapters by name (scale 1 by default) and names a bad name or scale by its index', () => {
    expect(resolveParams(video, { prompt: 'x', adapters: [{ name: 'ink' }, { name: 'water_colour-2.1', scale: -0.5 }] }).adapters).toEqual([
      { name: 'ink', scale: 1 },
      { name: 'water_colour-2.1', scale: -0.5 },
    ]);
    expect(resolveParams(video, { prompt: 'x', adapters: [] })).not.toHaveProperty('adapters');
    for (const name of ['../etc/passwd', 'a/b', '.hidden', '', 'x'.repeat(129)]) {
      expect(fieldOf(video, { adapters: [{ name: 'ok' }, { name }] }).field).toBe('adapters[1].name');
    }
    expect(fieldOf(video, { adapters: [{ name: 'ok' }, { name: 'ok' }] }).message).toMatch(/adapters\[1\]\.name: ok is given twice/);
    for (const scale of [Number.NaN, 11, -10.5, Number.POSITIVE_INFINITY]) {
      expect(fieldOf(video, { adapters: [{ name: 'ok', scale }] }).field).toBe('adapters[0].scale');
    }
    expect(fieldOf(video, { adapters: Array.from({ length: 9 }, (_, i) => ({ name: `a${i}` })) }).field).toBe('adapters');
  });

  it('fills defaults and records a random seed', () => {
    const params = resolveParams(video, { prompt: 'a red ball' }, { randomSeed: () => '42' });
    expect(params).toEqual({
      prompt: 'a red ball',
      negativePrompt: '',
      width: 256,
      height: 256,
      numFrames: 9,
      numInferenceSteps: 20,
      guidanceScale: 5,
      seed: '42',
      fps: 8,
    });
    const a = resolveParams(video, { prompt: 'x' }).seed;
    expect(a).toMatch(/^\d+$/);
    expect(BigInt(a) <= 2n ** 64n - 1n).toBe(true);
    expect(image.defaults.fps).toBe(8);
    expect(resolveParams(image, { prompt: 'x', seed: '' }).numFrames).toBe(1);
  });

  it('keeps given values and normalises seeds', () => {
    const p = resolveParams(video, {
      prompt: 'p',
      negativePrompt: 'blurry',
      width: 512,
      height: 128,
      numFrames: 33,
      numInferenceSteps: 200,
      guidanceScale: 0,
      seed: '0018446744073709551615',
      fps: 60,
    });
    expect(p).toMatchObject({ width: 512, height: 128, numFrames: 33, numInferenceSteps: 200, guidanceScale: 0, fps: 60 });
    expect(p.seed).toBe('18446744073709551615');
    expect(resolveParams(video, { prompt: 'p', seed: 7 }).seed).toBe('7');
    expect(resolveParams(video, { prompt: 'p', width: null, seed: null }).width).toBe(256);
  });

  it.each<[string, string, GenerationParamsInput, RegExp?]>([
    ['empty prompt', 'prompt', { prompt: '' }, /must not be empty/],
    ['whitespace prompt', 'prompt', { prompt: ' \n\t' }, /must not be empty/],
    ['missing prompt', 'prompt', { prompt: undefined }, /required/],
    ['long prompt', 'prompt', { prompt: 'x'.repeat(10_001) }, /at most 10000/],
    ['long negative prompt', 'negative_prompt', { negativePrompt: 'x'.repeat(10_001) }],
    ['zero width', 'width', { width: 0 }, /positive integer/],
    ['fractional width', 'width', { width: 256.5 }, /positive integer/],
    ['wide', 'width', { width: 528 }, /at most 512/],
    ['width off the multiple', 'width', { width: 250 }, /multiple of 16, got 250 \(nearest: 240 or 256\)/],
    ['height off the multiple', 'height', { height: 100 }, /multiple of 16/],
    ['tall', 'height', { height: 1024 }, /at most 512/],
    ['zero steps', 'num_inference_steps', { numInferenceSteps: 0 }, /1 to 200/],
    ['too many steps', 'num_inference_steps', { numInferenceSteps: 201 }],
    ['fractional steps', 'num_inference_steps', { numInferenceSteps: 2.5 }],
    ['negative guidance', 'guidance_scale', { guidanceScale: -1 }],
    ['infinite guidance', 'guidance_scale', { guidanceScale: Infinity }],
    ['NaN guidance', 'guidance_scale', { guidanceScale: Number.NaN }],
    ['zero frames', 'num_frames', { numFrames: 0 }],
    ['too many frames', 'num_frames', { numFrames: 37 }, /from 1 to 33/],
    ['frame rule', 'num_frames', { numFrames: 10 }, /must be 4k\+1, got 10 \(nearest: 9 or 13\)/],
    ['negative seed', 'seed', { seed: '-1' }],
    ['seed over 64 bits', 'seed', { seed: '18446744073709551616' }],
    ['hex seed', 'seed', { seed: '0x10' }],
    ['fractional seed', 'seed', { seed: 1.5 }],
    ['zero fps', 'fps', { fps: 0 }, /1 to 60/],
    ['fast fps', 'fps', { fps: 61 }],
  ])('%s → %s', (_name, field, input, message) => {
    const err = fieldOf(video, input);
    expect(err.field).toBe(field);
    expect(err.message.startsWith(`${field}: `)).toBe(true);
    if (message) expect(err.message).toMatch(message);
  });

  it('sets strength only with an input image: the plan’s default, or a given value in (0, 1]', () => {
    const img2img = PlanRegistry.fromEntries([
      entry({
        model: 'i/img2img',
        modalities: ['text-to-image', 'image-to-image'],
        stages: [
          { name: 'image_encoding', pool: 'vae-enc', requires: 'input_image' },
          { name: 'denoising', pool: 'dit' },
        ],
        defaults: { width: 256, height: 256, steps: 20, guidanceScale: 5 },
        constraints: { sizeMultiple: 16, maxWidth: 512, maxHeight: 512 },
      }),
    ]).lookup('i/img2img');
    expect(resolveParams(img2img, { prompt: 'p' }, { inputImage: true }).strength).toBe(0.8);
    expect(resolveParams(img2img, { prompt: 'p', strength: 1 }, { inputImage: true }).strength).toBe(1);
    expect(resolveParams(img2img, { prompt: 'p', strength: 0.05 }, { inputImage: true }).strength).toBe(0.05);
    expect('strength' in resolveParams(img2img, { prompt: 'p' })).toBe(false);
    expect(
      resolveParams({ ...img2img, defaults: { ...img2img.defaults, strength: 0.5 } }, { prompt: 'p' }, { inputImage: true }).strength,
    ).toBe(0.5);
    for (const bad of [0, -0.1, 1.01, Number.NaN, Number.POSITIVE_INFINITY, '0.5' as never]) {
      const err = diffmeshError(() => resolveParams(img2img, { prompt: 'p', strength: bad }, { inputImage: true }));
      expect(err.field, String(bad)).toBe('strength');
      expect(err.message).toMatch(/^strength: must be a number greater than 0 and at most 1/);
    }
    const alone = diffmeshError(() => resolveParams(img2img, { prompt: 'p', strength: 0.5 }));
    expect(alone).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'strength' });
    expect(alone.message).toBe('strength: applies only to a request with an input image (input_image)');
  });

  it('sets step caching only when it is on: the request’s fields over the plan’s, bad values refused naming the field', () => {
    const plain = PlanRegistry.fromEntries([entry({ model: 'v/plain' })]).lookup('v/plain');
    const cached = PlanRegistry.fromEntries([
      entry({ model: 'v/cached', defaults: { width: 256, height: 256, steps: 20, guidanceScale: 5, stepCache: { threshold: 0.1 } } }),
    ]).lookup('v/cached');
    const at = (e: PlanEntry, stepCache?: GenerationParamsInput['stepCache']) =>
      resolveParams(e, { prompt: 'p', ...(stepCache !== undefined ? { stepCache } : {}) });
    // Off by default: the resolved params carry nothing.
    expect('stepCache' in at(plain)).toBe(false);
    expect('stepCache' in at(plain, { threshold: 0 })).toBe(false);
    expect('stepCache' in at(plain, { threshold: 0.3, maxSkippedSteps: 0 })).toBe(false);
    expect(at(plain, { threshold: 0.3 }).stepCache).toEqual({ threshold: 0.3, maxSkippedSteps: 2 });
    expect(at(plain, { threshold: 0.3, maxSkippedSteps: 4 }).stepCache).toEqual({ threshold: 0.3, maxSkippedSteps: 4 });
    // The plan's default, and the request over it (0 turns it off).
    expect(at(cached).stepCache).toEqual({ threshold: 0.1, maxSkippedSteps: 2 });
    expect(at(cached, { maxSkippedSteps: 3 }).stepCache).toEqual({ threshold: 0.1, maxSkippedSteps: 3 });
    expect(at(cached, { threshold: 0.2, maxSkippedSteps: null }).stepCache).toEqual({ threshold: 0.2, maxSkippedSteps: 2 });
    expect('stepCache' in at(cached, { threshold: 0 })).toBe(false);
    for (const bad of [-0.1, Number.NaN, Number.POSITIVE_INFINITY, '0.5' as never]) {
      const err = diffmeshError(() => at(plain, { threshold: bad }));
      expect(err, String(bad)).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'step_cache.threshold' });
      expect(err.message).toMatch(/^step_cache\.threshold: must be a finite number ≥ 0/);
    }
    for (const bad of [-1, 1.5, 201, Number.NaN]) {
      const err = diffmeshError(() => at(plain, { threshold: 0.1, maxSkippedSteps: bad }));
      expect(err, String(bad)).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'step_cache.max_skipped_steps' });
    }
  });

  it('refuses a plan whose step cache threshold is negative or whose max skip is not a whole number', () => {
    const defaults = { width: 256, height: 256, numFrames: 9, steps: 20, guidanceScale: 5 };
    const negative = configError(() =>
      PlanRegistry.fromEntries([entry({ model: 'a/b', defaults: { ...defaults, stepCache: { threshold: -1 } } })]),
    );
    expect(negative.message).toContain('.defaults.stepCache.threshold');
    const fractional = configError(() =>
      PlanRegistry.fromEntries([entry({ model: 'a/b', defaults: { ...defaults, stepCache: { threshold: 0.1, maxSkippedSteps: 1.5 } } })]),
    );
    expect(fractional.message).toContain('.defaults.stepCache.maxSkippedSteps');
  });

  it('tells an image model’s caller that num_frames must be 1', () => {
    const err = fieldOf(image, { numFrames: 5 });
    expect(err.field).toBe('num_frames');
    expect(err.message).toMatch(/single images/);
  });
});
