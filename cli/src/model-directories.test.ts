import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildBrokenDir,
  buildFluxDir,
  buildSd3Dir,
  buildSdDir,
  buildSdxlDir,
  meanAbsoluteError,
  type ExpectedImageRequest,
  type TestModel,
} from '@diffmesh/models';
import { DiffmeshError, silentLogger, type GenerationParams, type RequestEvent } from '@diffmesh/core';
import { submitWithInputImage } from '@diffmesh/scheduler';
import { encodePng } from '@diffmesh/media';
import { startEmbedded, type Embedded } from './embedded.js';
import { modelArgument } from './model-argument.js';

// Model directories in the diffusers/optimum ONNX layout, served by the embedded runtime. Their
// models are analytic (models/src/diffusers/): any correct pipeline reaches a picture known in
// closed form, so every scheduler, dtype and kind is checked against it within 1/255 per pixel
// on average. DDIM and PNDM use `set_alpha_to_one: true` here: with diffusers' SD default
// (false) they end at ᾱ₀ = 0.99915, keeping 3 % of the last noise estimate (as diffusers does).

const SCHEDULERS: Record<string, Record<string, unknown>> = {
  pndm: { _class_name: 'PNDMScheduler', set_alpha_to_one: true },
  ddim: { _class_name: 'DDIMScheduler', set_alpha_to_one: true },
  euler: { _class_name: 'EulerDiscreteScheduler' },
  'euler-ancestral': { _class_name: 'EulerAncestralDiscreteScheduler' },
  'dpm++2m': { _class_name: 'DPMSolverMultistepScheduler', algorithm_type: 'dpmsolver++', solver_order: 2 },
  'dpm++2m-karras': { _class_name: 'DPMSolverMultistepScheduler', use_karras_sigmas: true },
  lcm: { _class_name: 'LCMScheduler' },
};

let root: string;
let mesh: Embedded;
const models = new Map<string, { dir: string; model: TestModel }>();

async function add(name: string, build: (dir: string) => Promise<TestModel>): Promise<void> {
  const dir = path.join(root, name);
  models.set(name, { dir, model: await build(dir) });
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-dirs-'));
  for (const [name, scheduler] of Object.entries(SCHEDULERS)) {
    // Float timesteps where the scheduler's are fractional (Euler, DPM with Karras σ).
    const timestepType = name.startsWith('euler') || name.includes('karras') ? 'float32' : 'int64';
    await add(`sd-${name}`, (dir) => buildSdDir(dir, { scalingFactor: 0.5, timestepType, scheduler }));
  }
  // SD-Turbo: Euler ancestral with trailing spacing, one step, no guidance.
  await add('sd-turbo', (dir) =>
    buildSdDir(dir, {
      scalingFactor: 0.5,
      timestepType: 'float32',
      scheduler: { _class_name: 'EulerAncestralDiscreteScheduler', timestep_spacing: 'trailing' },
    }),
  );
  // LCM-distilled UNet (LCM Dreamshaper style): guidance goes in as `timestep_cond`.
  await add('sd-lcm-distilled', (dir) =>
    buildSdDir(dir, { scalingFactor: 0.5, timestepCondDim: 16, scheduler: { _class_name: 'LCMScheduler' } }),
  );
  await add('sd2-v-ddim', (dir) => buildSdDir(dir, { variant: 'sd2', scalingFactor: 0.5, scheduler: { set_alpha_to_one: true } }));
  await add('sd-int32', (dir) => buildSdDir(dir, { scalingFactor: 0.5, timestepType: 'int32', scheduler: SCHEDULERS.ddim }));
  await add('sd-fp16', (dir) =>
    buildSdDir(dir, { scalingFactor: 0.5, precision: 'fp16', timestepType: 'float16', scheduler: SCHEDULERS.euler }),
  );
  await add('sd-legacy', (dir) =>
    buildSdDir(dir, {
      scalingFactor: 0.5,
      timestepShape: 'vector',
      timestepType: 'float32',
      vaeEncoderOutput: 'latent_sample',
      modelIndexStyle: 'onnx',
      scheduler: SCHEDULERS.ddim,
    }),
  );
  await add('sd-external-data', (dir) => buildSdDir(dir, { scalingFactor: 0.5, externalData: true, scheduler: SCHEDULERS.ddim }));
  await add('sdxl', (dir) => buildSdxlDir(dir, { scalingFactor: 0.5 }));
  await add('sdxl-fp16', (dir) => buildSdxlDir(dir, { scalingFactor: 0.5, precision: 'fp16', timestepType: 'float16' }));
  await add('flux', (dir) => buildFluxDir(dir, { scalingFactor: 0.5, shiftFactor: 0.2, externalData: true }));
  await add('flux-fp16', (dir) => buildFluxDir(dir, { scalingFactor: 0.5, shiftFactor: 0.2, precision: 'fp16' }));
  await add('flux-schnell', (dir) =>
    buildFluxDir(dir, {
      scalingFactor: 0.5,
      shiftFactor: 0.2,
      guidanceEmbeds: false,
      scheduler: { use_dynamic_shifting: false, shift: 1 },
    }),
  );
  await add('sd3', (dir) => buildSd3Dir(dir, { scalingFactor: 0.5, shiftFactor: 0.2 }));
  await add('sd3-no-t5', (dir) => buildSd3Dir(dir, { scalingFactor: 0.5, shiftFactor: 0.2, withT5: false }));
  mesh = await startEmbedded({
    modelRoots: [],
    modelDirectories: [...models.values()].map((m) => m.dir),
    intraOpThreads: 1,
    maxBatch: 8,
    log: silentLogger(),
  });
}, 120_000);

afterAll(async () => {
  await mesh?.close();
  await rm(root, { recursive: true, force: true });
});

interface Run {
  pixels: Uint8Array;
  shape: number[];
  events: RequestEvent[];
}

async function run(name: string, params: Partial<GenerationParams> & { prompt: string }): Promise<Run> {
  const { dir } = models.get(name) as { dir: string };
  const { context } = await mesh.scheduler.submit({ model: dir, params: { seed: '7', ...params } });
  const events: RequestEvent[] = [];
  for await (const e of mesh.scheduler.watch(context.reqId)) events.push(e);
  const last = events.at(-1);
  if (last?.type !== 'completed') throw new Error(`${name}: request ended with ${JSON.stringify(last)}`);
  const { data, ref } = await mesh.store.get(last.outputs.pixels);
  const pixels = Uint8Array.from(data);
  await mesh.store.deleteRequest(context.reqId);
  return { pixels, shape: ref.shape, events };
}

/** Runs a request and returns the mean absolute error (0–255) against the model's closed form. */
async function error(name: string, req: ExpectedImageRequest & { steps: number }): Promise<number> {
  const { model } = models.get(name) as { model: TestModel };
  const got = await run(name, {
    prompt: req.prompt,
    negativePrompt: req.negativePrompt ?? '',
    guidanceScale: req.guidanceScale,
    numInferenceSteps: req.steps,
    ...(req.width ? { width: req.width } : {}),
    ...(req.height ? { height: req.height } : {}),
  });
  const want = model.expectedImage(req);
  expect(got.shape).toEqual([1, want.height, want.width, 3]);
  return meanAbsoluteError(got.pixels, want.data);
}

describe('SD 1.x/2.x directories: every scheduler reaches the closed-form picture', async () => {
  for (const name of [...Object.keys(SCHEDULERS), 'v-ddim']) {
    const dir = name === 'v-ddim' ? 'sd2-v-ddim' : `sd-${name}`;
    for (const guidanceScale of [1, 2]) {
      it(`${name}, guidance ${guidanceScale}`, async () => {
        const steps = name === 'lcm' ? 4 : 8;
        const req = { prompt: 'a red cat', negativePrompt: 'blue texture', guidanceScale, steps };
        expect(await error(dir, req)).toBeLessThanOrEqual(1);
      });
    }
  }

  it('runs the plan text_encoding → denoising → vae_decoding, one model call per timestep, CFG only above 1', async () => {
    const { events } = await run('sd-euler', { prompt: 'a green cat', numInferenceSteps: 5, guidanceScale: 1 });
    expect(events.flatMap((e) => (e.type === 'stage_started' ? [e.stage] : []))).toEqual(['text_encoding', 'denoising', 'vae_decoding']);
    expect(events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length).toBe(5);
    const encoded = events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding');
    expect(Object.keys(encoded?.type === 'stage_finished' ? encoded.outputs : {})).toEqual(['prompt_embeds']);
    const pndm = await run('sd-pndm', { prompt: 'a green cat', numInferenceSteps: 5, guidanceScale: 3 });
    // PLMS: steps + 1 model calls (the first step is repeated); the negative prompt is encoded for CFG.
    expect(pndm.events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length).toBe(6);
    const finished = pndm.events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding');
    expect(Object.keys(finished?.type === 'stage_finished' ? finished.outputs : {}).sort()).toEqual([
      'negative_prompt_embeds',
      'prompt_embeds',
    ]);
  });

  it('SD-Turbo style: one step at guidance 0, one model call, no negative prompt encoded', async () => {
    expect(await error('sd-turbo', { prompt: 'a green cat', negativePrompt: 'red', guidanceScale: 0, steps: 1 })).toBeLessThanOrEqual(1);
    const { events } = await run('sd-turbo', { prompt: 'a green cat', negativePrompt: 'red', numInferenceSteps: 1, guidanceScale: 0 });
    expect(events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length).toBe(1);
    const encoded = events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding');
    expect(Object.keys(encoded?.type === 'stage_finished' ? encoded.outputs : {})).toEqual(['prompt_embeds']);
  });

  it('LCM-distilled UNet: the guidance scale reaches the graph as its timestep_cond embedding, one model call per step', async () => {
    for (const guidanceScale of [1, 8]) {
      const req = { prompt: 'a red cat', negativePrompt: 'blue texture', guidanceScale, steps: 4 };
      expect(await error('sd-lcm-distilled', req)).toBeLessThanOrEqual(1);
    }
    const { model } = models.get('sd-lcm-distilled') as { model: TestModel };
    const at8 = await run('sd-lcm-distilled', { prompt: 'a red cat', numInferenceSteps: 4, guidanceScale: 8 });
    // Guidance 8 and 1 give different pictures: the embedding is not a constant.
    expect(meanAbsoluteError(at8.pixels, model.expectedImage({ prompt: 'a red cat', guidanceScale: 1 }).data)).toBeGreaterThan(3);
    expect(at8.events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length).toBe(4);
    const encoded = at8.events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding');
    expect(Object.keys(encoded?.type === 'stage_finished' ? encoded.outputs : {})).toEqual(['prompt_embeds']);
  });

  it('honours the timestep dtype and rank of the graph: int32, float16 (fp16 model), [1]-shaped float32, external weights', async () => {
    const req = { prompt: 'a blue texture', negativePrompt: 'red', guidanceScale: 2, steps: 6 };
    expect(await error('sd-int32', req)).toBeLessThanOrEqual(1);
    expect(await error('sd-fp16', req)).toBeLessThanOrEqual(1);
    expect(await error('sd-legacy', req)).toBeLessThanOrEqual(1);
    expect(await error('sd-external-data', req)).toBeLessThanOrEqual(1);
  });

  it('reads the VAE scaling factor from the directory (0.5 here, not SD’s 0.18215)', async () => {
    const { model } = models.get('sd-euler') as { model: TestModel };
    const got = await run('sd-euler', { prompt: 'a red cat', numInferenceSteps: 6, guidanceScale: 1 });
    const wrong = buildWrongScale(model, 'a red cat');
    expect(meanAbsoluteError(got.pixels, wrong)).toBeGreaterThan(10);
  });

  it('renders other sizes (multiples of 8)', async () => {
    expect(await error('sd-euler', { prompt: 'a red cat', guidanceScale: 2, steps: 6, width: 96, height: 48 })).toBeLessThanOrEqual(1);
  });

  it('reports a prompt cut to the text encoder length in the stage_finished event', async () => {
    const long = Array.from({ length: 90 }, () => 'red').join(' ');
    const { events } = await run('sd-euler', { prompt: `${long} cat`, numInferenceSteps: 2, guidanceScale: 1 });
    const finished = events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding');
    const warnings = finished?.type === 'stage_finished' ? (finished.warnings ?? []) : [];
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^prompt: cut to 77 tokens for text_encoder \(CLIP\); 16 tokens dropped: "(red ){15}cat"$/);
  });
});

describe('SDXL, FLUX and SD3 directories', async () => {
  it('SDXL: both encoders (text_encoding_2 its own stage), pooled text_embeds and time_ids reach the UNet', async () => {
    // A non-square size: time_ids carry (H, W), which the analytic UNet's pattern amplitude reads.
    const req = { prompt: 'a red cat', guidanceScale: 3, steps: 6, width: 128, height: 64 };
    expect(await error('sdxl', req)).toBeLessThanOrEqual(1);
    expect(await error('sdxl', { ...req, negativePrompt: 'green', width: 64, height: 64 })).toBeLessThanOrEqual(1);
    expect(await error('sdxl-fp16', { ...req, guidanceScale: 1 })).toBeLessThanOrEqual(1);
    const { events } = await run('sdxl', { prompt: 'a cat', numInferenceSteps: 2, guidanceScale: 5 });
    expect(events.flatMap((e) => (e.type === 'stage_started' ? [e.stage] : []))).toEqual([
      'text_encoding',
      'text_encoding_2',
      'denoising',
      'vae_decoding',
    ]);
    const second = events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding_2');
    // force_zeros_for_empty_prompt: no negative prompt → zero negative embeddings, none encoded.
    expect(Object.keys(second?.type === 'stage_finished' ? second.outputs : {}).sort()).toEqual([
      'pooled_prompt_embeds_2',
      'prompt_embeds_2',
    ]);
  });

  it('FLUX: packed latents, img_ids and txt_ids, embedded guidance, σ timesteps, VAE shift factor', async () => {
    const req = { prompt: 'a green texture', guidanceScale: 3.5, steps: 4, width: 128, height: 64 };
    expect(await error('flux', req)).toBeLessThanOrEqual(1);
    expect(await error('flux', { ...req, guidanceScale: 1.5 })).toBeLessThanOrEqual(1);
    expect(await error('flux-fp16', { ...req, width: 64 })).toBeLessThanOrEqual(1);
    expect(await error('flux-schnell', { ...req, steps: 2 })).toBeLessThanOrEqual(1);
  });

  it('SD3: CLIP-L and CLIP-G rows with T5 rows, pooled projections, CFG', async () => {
    expect(await error('sd3', { prompt: 'a red cat', negativePrompt: 'blue', guidanceScale: 2, steps: 4 })).toBeLessThanOrEqual(1);
  });

  it('SD3 saved without T5 (text_encoder_3: [null, null]): no text_encoding_2 stage, zeros in place of the T5 rows', async () => {
    expect(await error('sd3-no-t5', { prompt: 'a red cat', negativePrompt: 'blue', guidanceScale: 2, steps: 4 })).toBeLessThanOrEqual(1);
    const entry = mesh.registry.lookup((models.get('sd3-no-t5') as { dir: string }).dir);
    expect(entry.stages.map((s) => s.name)).toEqual(['text_encoding', 'image_encoding', 'denoising', 'vae_decoding']);
    // The T5 rows mattered in the model with T5: the two pictures differ.
    const withT5 = (models.get('sd3') as { model: TestModel }).model.expectedImage({ prompt: 'a red cat', guidanceScale: 1 });
    const without = (models.get('sd3-no-t5') as { model: TestModel }).model.expectedImage({ prompt: 'a red cat', guidanceScale: 1 });
    expect(meanAbsoluteError(withT5.data, without.data)).toBeGreaterThan(3);
  });

  it('lists directory models with defaults from their files', () => {
    const entry = mesh.registry.lookup((models.get('flux') as { dir: string }).dir);
    expect(entry.defaults).toMatchObject({ width: 64, height: 64, steps: 28, guidanceScale: 3.5 });
    expect(entry.stages.map((s) => s.name)).toEqual(['text_encoding', 'text_encoding_2', 'image_encoding', 'denoising', 'vae_decoding']);
    expect(entry.constraints.sizeMultiple).toBe(16);
    expect(mesh.servable).toContain(entry.model);
  });
});

describe('img2img through the scheduler: image_encoding runs for requests with an input image', async () => {
  it('encodes the image in its own stage and starts denoising at the step strength picks', async () => {
    const { dir, model } = models.get('sd-ddim') as { dir: string; model: TestModel };
    const start = model.expectedImage({ prompt: 'a blue texture', guidanceScale: 1 });
    const image = { kind: 'data' as const, data: encodePng(start.data, 64, 64), mediaType: 'image/png' };
    const params = { prompt: 'a red cat', negativePrompt: 'green', guidanceScale: 2, numInferenceSteps: 10, strength: 0.6, seed: '3' };
    const state = await submitWithInputImage(mesh.scheduler, { model: dir, params }, image);
    const events: RequestEvent[] = [];
    for await (const e of mesh.scheduler.watch(state.context.reqId)) events.push(e);
    const last = events.at(-1);
    if (last?.type !== 'completed') throw new Error(JSON.stringify(last));
    const started = events.flatMap((e) => (e.type === 'stage_started' ? [`${e.stage}:${e.pool}`] : []));
    expect(started.map((s) => s.split(':')[0])).toEqual(['text_encoding', 'image_encoding', 'denoising', 'vae_decoding']);
    expect(started[1]).toMatch(/^image_encoding:vae-encoder-sd-ddim-[0-9a-f]{6}$/);
    expect(events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length).toBe(6);
    const { data } = await mesh.store.get(last.outputs.pixels);
    const want = model.expectedImage({ prompt: 'a red cat', negativePrompt: 'green', guidanceScale: 2 });
    expect(meanAbsoluteError(Uint8Array.from(data), want.data)).toBeLessThanOrEqual(1);
    await mesh.store.deleteRequest(state.context.reqId);
    // The same model without an image leaves the stage out.
    const plain = await run('sd-ddim', { prompt: 'a red cat', numInferenceSteps: 2, guidanceScale: 1 });
    expect(plain.events.some((e) => e.type === 'stage_started' && e.stage === 'image_encoding')).toBe(false);
  });

  it('lists image-to-image among a directory model’s modalities when it has a VAE encoder', () => {
    const entry = mesh.registry.lookup((models.get('flux') as { dir: string }).dir);
    expect(entry.modalities).toEqual(['text-to-image', 'image-to-image']);
    expect(entry.stages.find((s) => s.name === 'image_encoding')).toMatchObject({ requires: 'input_image' });
  });
});

describe('a wrong layout fails at load with an error naming the file and the input', async () => {
  for (const [kind, file, text] of [
    ['missing-file', 'unet/model.onnx', 'unet/model.onnx: missing'],
    ['unet-without-encoder-hidden-states', 'unet/model.onnx', 'input "encoder_hidden_states" is missing'],
    ['hidden-size-mismatch', 'unet/model.onnx', 'hidden size mismatch'],
  ] as const) {
    it(kind, async () => {
      const dir = path.join(root, `broken-${kind}`);
      await buildBrokenDir(dir, kind);
      const err = await modelArgument(dir).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DiffmeshError);
      const e = err as DiffmeshError;
      expect([e.code, e.reason]).toEqual([9, 'MODEL_LOAD_FAILED']);
      expect(e.message).toContain(text);
      expect(e.metadata.file).toBe(file);
    });
  }
});

/** The picture decoded with SD's default factor 0.18215 instead of the directory's 0.5. */
function buildWrongScale(model: TestModel, prompt: string): Uint8Array {
  const right = model.expectedImage({ prompt, guidanceScale: 1 });
  // decode(latent / 0.18215) = decode(u · 0.5 / 0.18215): the linear VAE scales the colours.
  const k = 0.5 / 0.18215;
  return right.data.map((v) => Math.max(0, Math.min(255, Math.round(((v / 255) * 2 - 1) * k * 127.5 + 127.5))));
}
