import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Code,
  DiffmeshError,
  silentLogger,
  type GenerationParams,
  type ObjectRef,
  type StageHandler,
  type StageTask,
} from '@diffmesh/core';
import { DenoisingStage } from '@diffmesh/dit-svc';
import { TextEncodingStage } from '@diffmesh/encoder-svc';
import { encodePng } from '@diffmesh/media';
import { buildFluxDir, buildSdDir, defaultModelsRoot, meanAbsoluteError, type FluxTestModel, type SdTestModel } from '@diffmesh/models';
import { ModelCatalog, SessionCache, type OnnxStageDeps } from '@diffmesh/stage-host';
import { createTensorStore, type TensorStore } from '@diffmesh/tensor-client';
import { testStageTask } from '@diffmesh/testing';
import { ImageEncodingStage, VaeDecodingStage } from '@diffmesh/vae-svc';

// The image_encoding stage and the stages after it, chained in-process exactly as the
// scheduler hands a request from one to the next (each task gets every object made so far):
// img2img on model directories and image-to-video on the built-in tiny-shapes.

let root: string;
let store: TensorStore;
let sessions: SessionCache;
let stages: Record<'text' | 'text2' | 'image' | 'denoise' | 'vae', StageHandler>;
let sd: { dir: string; model: SdTestModel };
let flux: { dir: string; model: FluxTestModel };

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-images-'));
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  const deps: OnnxStageDeps = { catalog: new ModelCatalog([defaultModelsRoot()]), sessions, store, models: [] };
  stages = {
    text: new TextEncodingStage(deps),
    text2: new TextEncodingStage({ ...deps, stage: 'text_encoding_2' }),
    image: new ImageEncodingStage(deps),
    denoise: new DenoisingStage({ ...deps, maxBatch: 4 }),
    vae: new VaeDecodingStage(deps),
  };
  sd = {
    dir: path.join(root, 'sd'),
    model: await buildSdDir(path.join(root, 'sd'), {
      scalingFactor: 0.5,
      scheduler: { _class_name: 'DDIMScheduler', set_alpha_to_one: true },
    }),
  };
  flux = { dir: path.join(root, 'flux'), model: await buildFluxDir(path.join(root, 'flux'), { scalingFactor: 0.5, shiftFactor: 0.2 }) };
});

afterAll(async () => {
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

let requests = 0;

/** Runs `plan` for one request the way the scheduler does; returns every object and the steps each stage reported. */
async function run(
  model: string,
  plan: StageHandler[],
  params: Partial<GenerationParams> & { prompt: string },
  image?: Uint8Array,
): Promise<{ refs: Record<string, ObjectRef>; steps: number[] }> {
  const reqId = `img-${++requests}`;
  const full: GenerationParams = {
    negativePrompt: '',
    width: 64,
    height: 64,
    numFrames: 1,
    numInferenceSteps: 4,
    guidanceScale: 1,
    seed: '5',
    fps: 8,
    ...params,
  };
  const refs: Record<string, ObjectRef> = {};
  if (image)
    refs.input_image = await store.put({ requestId: reqId, name: 'input_image', data: image, shape: [image.byteLength], dtype: 'uint8' });
  const steps: number[] = [];
  for (const [stageIndex, handler] of plan.entries()) {
    const task: StageTask = {
      reqId,
      stageIndex,
      stage: handler.stage,
      attempt: 1,
      model,
      params: full,
      inputs: { ...refs },
      deadline: 0,
      traceContext: {},
    };
    let last = 0;
    const result = await handler.execute(task, {
      signal: new AbortController().signal,
      onProgress: (p) => (last = p.totalSteps),
      log: silentLogger(),
    });
    steps.push(last);
    Object.assign(refs, result.outputs);
  }
  return { refs, steps };
}

async function pixels(ref: ObjectRef): Promise<Uint8Array> {
  return Uint8Array.from((await store.get(ref)).data);
}

describe('image_encoding on model directories (img2img)', () => {
  it('encodes with the VAE encoder and the config’s scaling and shift: decoding image_latents gives the picture back', async () => {
    for (const { dir, model } of [sd, flux]) {
      // A picture the VAE represents exactly: one the model decodes (constant on 8×8 blocks).
      const picture = model.expectedImage({ prompt: 'a green texture', guidanceScale: 1 });
      const png = encodePng(picture.data, picture.width, picture.height);
      const { refs } = await run(dir, [stages.image], { prompt: 'x' }, png);
      const latents = refs.image_latents;
      expect(latents.shape).toEqual([1, model.layout === 'flux' ? 16 : 4, 8, 8]);
      // Decode image_latents by handing them to vae_decoding as the denoiser's output.
      const back = await stages.vae.execute(
        testStageTask({
          reqId: 'decode-back',
          stage: 'vae_decoding',
          model: dir,
          params: { numInferenceSteps: 1, guidanceScale: 1 },
          inputs: { latents },
        }),
        { signal: new AbortController().signal, onProgress: () => undefined, log: silentLogger() },
      );
      expect(meanAbsoluteError(await pixels(back.outputs.pixels), picture.data)).toBeLessThanOrEqual(0.5);
    }
  });

  it('img2img: starts at the step strength picks (add_noise) and reaches the prompt’s picture', async () => {
    const start = sd.model.expectedImage({ prompt: 'a blue texture', guidanceScale: 1 });
    const png = encodePng(start.data, 64, 64);
    const params = {
      prompt: 'a red cat',
      negativePrompt: 'green',
      guidanceScale: 2,
      numInferenceSteps: 10,
      strength: 0.5,
    } as Partial<GenerationParams> & {
      prompt: string;
    };
    const { refs, steps } = await run(sd.dir, [stages.text, stages.image, stages.denoise, stages.vae], params, png);
    expect(steps[2]).toBe(5); // ⌊10 · 0.5⌋ denoising steps
    const want = sd.model.expectedImage({ prompt: 'a red cat', negativePrompt: 'green', guidanceScale: 2 });
    expect(meanAbsoluteError(await pixels(refs.pixels), want.data)).toBeLessThanOrEqual(1);
  });

  it('img2img on FLUX: packed image latents, flow-matching scale_noise at the start step', async () => {
    const start = flux.model.expectedImage({ prompt: 'a blue texture', guidanceScale: 3.5 });
    const params = { prompt: 'a red cat', guidanceScale: 3.5, numInferenceSteps: 4, strength: 0.75 } as Partial<GenerationParams> & {
      prompt: string;
    };
    const { refs, steps } = await run(
      flux.dir,
      [stages.text, stages.text2, stages.image, stages.denoise, stages.vae],
      params,
      encodePng(start.data, 64, 64),
    );
    expect(steps[3]).toBe(3);
    const want = flux.model.expectedImage({ prompt: 'a red cat', guidanceScale: 3.5 });
    expect(meanAbsoluteError(await pixels(refs.pixels), want.data)).toBeLessThanOrEqual(1);
  });

  it('refuses a corrupt image with INVALID_ARGUMENT naming input_image', async () => {
    const err = await run(sd.dir, [stages.image], { prompt: 'x' }, new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4])).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).code).toBe(Code.INVALID_ARGUMENT);
    expect((err as DiffmeshError).field).toBe('input_image');
  });

  it('gives nothing for a request without an image', async () => {
    const { refs } = await run(sd.dir, [stages.image], { prompt: 'x' });
    expect(refs).toEqual({});
  });
});

describe('image-to-video on diffmesh/tiny-shapes: the first frame’s latent conditions the video', () => {
  /** Pixels of a frame that are blue (the still's background) and red (its circle). */
  function colours(frame: Uint8Array): { red: number; blue: number } {
    let red = 0;
    let blue = 0;
    for (let i = 0; i < frame.length / 3; i += 1) {
      const [r, g, b] = [frame[i * 3], frame[i * 3 + 1], frame[i * 3 + 2]];
      if (r > 150 && g < 100 && b < 100) red += 1;
      if (b > 150 && r < 100) blue += 1;
    }
    return { red, blue };
  }

  it('opens on the image, and the later frames keep its background where the prompt names none', async () => {
    const model = 'diffmesh/tiny-shapes';
    const still = await run(model, [stages.text, stages.denoise, stages.vae], {
      prompt: 'a large red circle on a blue background',
      numInferenceSteps: 12,
      guidanceScale: 3,
    });
    const image = await pixels(still.refs.pixels);
    const size = 64 * 64 * 3;
    // Seeds whose clip without the image has another background (a free clip is blue 1 time in 11).
    for (const seed of ['1', '2', '5']) {
      const params = { prompt: 'a circle', seed, numFrames: 4, numInferenceSteps: 12, guidanceScale: 1 };
      const video = await run(model, [stages.text, stages.image, stages.denoise, stages.vae], params, encodePng(image, 64, 64));
      expect(video.refs.image_latents.shape).toEqual([1, 3, 1, 8, 8]);
      expect(video.refs.pixels.shape).toEqual([4, 64, 64, 3]);
      const frames = await pixels(video.refs.pixels);
      // Frame 0 is the image (through the 8× VAE: average-pooled, bilinearly upsampled).
      expect(meanAbsoluteError(frames.subarray(0, size), image)).toBeLessThan(12);
      expect(colours(frames.subarray(0, size)).red).toBeGreaterThan(400);
      // Every frame is on the image's blue, though the prompt names no colour…
      for (let f = 0; f < 4; f += 1) expect(colours(frames.subarray(f * size, (f + 1) * size)).blue).toBeGreaterThan(2500);
      // …unlike the same request without the image.
      const free = await pixels((await run(model, [stages.text, stages.denoise, stages.vae], params)).refs.pixels);
      expect(colours(free.subarray(2 * size, 3 * size)).blue).toBeLessThan(500);
    }
  });
});
