import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  loadDiffmeshProtos,
  type GenerateResponse__Output,
  type ListModelsResponse__Output,
  type SessionResponse__Output,
  type SubmitResponse__Output,
} from '@diffmesh/protos';
import {
  Code,
  DiffmeshError,
  fromWire,
  silentLogger,
  type InputImageSource,
  type ObjectRef,
  type StageHandler,
  type StageName,
  type StageTask,
} from '@diffmesh/core';
import { encodeImage, MAX_INPUT_IMAGE_BYTES } from '@diffmesh/media';
import { createTensorStore, type TensorStore } from '@diffmesh/tensor-client';
import { Fixtures, gate, outcome } from './fixtures/stages.js';
import { submitWithInputImage } from './input-image.js';
import { LocalInstance } from './local-instance.js';
import { PlanRegistry } from './plans/registry.js';
import { Scheduler } from './scheduler.js';
import { schedulerServiceBinding } from './service.js';
import type { GenerateRequest } from './types.js';

const log = silentLogger();
const defaults = { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 };
const constraints = { sizeMultiple: 8, maxWidth: 256, maxHeight: 256, maxFrames: 1 };

/** An img2img model, an image-only image-to-video model and a text-only model. */
const registry = PlanRegistry.fromEntries([
  {
    model: 'test/img2img',
    modalities: ['text-to-image', 'image-to-image'],
    stages: [
      { name: 'text_encoding', pool: 'enc' },
      { name: 'image_encoding', pool: 'img', requires: 'input_image' },
      { name: 'denoising', pool: 'dit' },
    ],
    defaults,
    constraints,
  },
  {
    model: 'test/i2v',
    modalities: ['image-to-video'],
    stages: [
      { name: 'image_encoding', pool: 'img', requires: 'input_image' },
      { name: 'denoising', pool: 'dit' },
    ],
    defaults: { ...defaults, numFrames: 5, strength: 1 },
    constraints: { ...constraints, maxFrames: 9 },
  },
  { model: 'test/t2i', modalities: ['text-to-image'], stages: [{ name: 'text_encoding', pool: 'enc' }], defaults, constraints },
]);

/** What the image_encoding stage saw of one task. */
interface ImageTaskSeen {
  task: StageTask;
  /** The bytes behind `task.inputs.input_image`, read from the store. */
  bytes: Uint8Array;
}

interface Harness {
  scheduler: Scheduler;
  store: TensorStore;
  /** Tasks the image_encoding stage ran. */
  imageTasks: ImageTaskSeen[];
  /** Stage names of every task run, in order. */
  ran: StageName[];
  /** Holds the denoising stage of a request whose prompt is `hold` until released. */
  held: ReturnType<typeof gate>;
}

/** A scheduler over {@link registry} with in-process stages; the image stage checks what it got. */
function harness(opts: { imageStage?: boolean } = {}): Harness {
  const store = createTensorStore({ backend: 'memory' });
  const scheduler = new Scheduler({
    registry,
    store,
    log,
    limits: {
      maxQueueLength: 10,
      maxInFlight: 10,
      maxAttempts: 1,
      retryBackoffMs: 1,
      defaultTimeoutMs: 0,
      stageTimeoutMs: 0,
      retentionMs: 60_000,
    },
  });
  const h: Harness = { scheduler, store, imageTasks: [], ran: [], held: gate() };
  const stage = (name: StageName, run: StageHandler['execute']): StageHandler => ({ stage: name, models: () => [], execute: run });
  scheduler.addInstance(
    new LocalInstance(
      'enc-1',
      'enc',
      stage('text_encoding', async (task) => {
        h.ran.push(task.stage);
        return { outputs: {} };
      }),
      4,
      log,
    ),
  );
  if (opts.imageStage !== false) {
    scheduler.addInstance(
      new LocalInstance(
        'img-1',
        'img',
        stage('image_encoding', async (task) => {
          h.ran.push(task.stage);
          const ref = task.inputs.input_image;
          if (!ref) throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'image_encoding: no input_image');
          h.imageTasks.push({ task, bytes: (await store.get(ref)).data });
          const latents = await store.put({
            requestId: task.reqId,
            name: 'image_latents',
            data: new Uint8Array(16),
            shape: [4],
            dtype: 'float32',
          });
          return { outputs: { image_latents: latents } };
        }),
        4,
        log,
      ),
    );
  }
  scheduler.addInstance(
    new LocalInstance(
      'dit-1',
      'dit',
      stage('denoising', async (task) => {
        h.ran.push(task.stage);
        if (task.params.prompt === 'hold') await h.held.wait;
        const pixels = await store.put({
          requestId: task.reqId,
          name: 'pixels',
          data: new Uint8Array(12),
          shape: [1, 2, 2, 3],
          dtype: 'uint8',
        });
        return { outputs: { pixels } };
      }),
      4,
      log,
    ),
  );
  return h;
}

/** A small PNG (RGB, `width`×`height`), different for each `seed`. */
async function png(seed = 1, width = 8, height = 8): Promise<Uint8Array> {
  const data = new Uint8Array(width * height * 3).map((_, i) => (i * 7 + seed * 13) % 256);
  return new Uint8Array(await encodeImage({ width, height, data }, 'png'));
}

function bytesOf(data: Uint8Array): InputImageSource {
  return { kind: 'data', data, mediaType: 'image/png' };
}

const req = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({ model: 'test/img2img', params: { prompt: 'a cat' }, ...over });

/** The DiffmeshError a promise rejects with. */
async function refusal(p: Promise<unknown>): Promise<DiffmeshError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(DiffmeshError);
    return err as DiffmeshError;
  }
  throw new Error('expected a refusal');
}

/** Ids of the objects the store holds. */
async function objects(store: TensorStore): Promise<number> {
  return (await store.usage()).objects;
}

describe('input images at admission', async () => {
  it('stores the image as the request object input_image and hands its ref to the stage that requires it', async () => {
    const h = harness();
    const image = await png();
    const state = await submitWithInputImage(h.scheduler, req({ params: { prompt: 'a cat', strength: 0.35 } }), bytesOf(image));
    const ref = state.context.refs.input_image;
    expect(ref).toMatchObject({ name: 'input_image', dtype: 'uint8', shape: [image.byteLength], sizeBytes: image.byteLength });
    expect(ref.objectId.startsWith(`${state.context.reqId}:input_image:`)).toBe(true);
    expect(state.context.executionPlan.stages.map((s) => s.name)).toEqual(['text_encoding', 'image_encoding', 'denoising']);
    expect(state.context.executionPlan.stages[1].requires).toBe('input_image');
    expect(state.context.params.strength).toBe(0.35);
    expect(await outcome(h.scheduler, state.context.reqId)).toBe('completed');

    expect(h.imageTasks).toHaveLength(1);
    const seen = h.imageTasks[0];
    expect(seen.task.inputs.input_image.objectId).toBe(ref.objectId);
    expect(Buffer.compare(Buffer.from(seen.bytes), Buffer.from(image))).toBe(0);
    expect(seen.task.params.strength).toBe(0.35);
    // The bytes travel by ref only: the params the stages get hold no image.
    expect(JSON.stringify(seen.task.params)).not.toContain('input');
    // Once done, only the result is left: the input image went with the other intermediates.
    await expect.poll(() => objects(h.store)).toBe(1);
  });

  it('defaults strength to the plan’s, else 0.8, for a request with an image', async () => {
    const h = harness();
    const a = await submitWithInputImage(h.scheduler, req(), bytesOf(await png()));
    expect(a.context.params.strength).toBe(0.8);
    const b = await submitWithInputImage(h.scheduler, req({ model: 'test/i2v' }), bytesOf(await png()));
    expect(b.context.params.strength).toBe(1);
    expect(b.context.params.numFrames).toBe(5);
    expect(await outcome(h.scheduler, a.context.reqId)).toBe('completed');
    expect(await outcome(h.scheduler, b.context.reqId)).toBe('completed');
  });

  it('leaves a stage that requires an input image out of the plan of a request without one', async () => {
    // No instance in the image pool at all: a request without an image does not need one.
    const h = harness({ imageStage: false });
    const state = await submitWithInputImage(h.scheduler, req(), undefined);
    expect(state.context.executionPlan.stages.map((s) => s.name)).toEqual(['text_encoding', 'denoising']);
    expect(state.context.refs).toEqual({});
    expect('strength' in state.context.params).toBe(false);
    expect(await outcome(h.scheduler, state.context.reqId)).toBe('completed');
    expect(h.ran).toEqual(['text_encoding', 'denoising']);
  });

  it('refuses a corrupt, empty, oversized or foreign image naming input_image, storing nothing and disturbing no other request', async () => {
    const h = harness();
    const running = await submitWithInputImage(h.scheduler, req({ params: { prompt: 'hold' } }), bytesOf(await png(2)));
    await expect.poll(() => h.ran.includes('denoising')).toBe(true);
    const before = await objects(h.store);

    const good = await png();
    const gif = Buffer.from('R0lGODlhAQABAIAAAAAAAP///ywAAAAAAQABAAACAUwAOw==', 'base64');
    const oversized = new Uint8Array(MAX_INPUT_IMAGE_BYTES + 1);
    oversized.set(good);
    const cases: Array<[string, Uint8Array, RegExp]> = [
      ['not an image', new TextEncoder().encode('this is not a picture'), /not a readable PNG, JPEG or WebP image/],
      ['a truncated PNG', good.subarray(0, 40), /not a readable PNG, JPEG or WebP image/],
      ['a GIF', gif, /has format gif; use PNG, JPEG or WebP/],
      ['too many bytes', oversized, new RegExp(`is ${MAX_INPUT_IMAGE_BYTES + 1} bytes; at most ${MAX_INPUT_IMAGE_BYTES}`)],
    ];
    for (const [what, bytes, message] of cases) {
      const err = await refusal(submitWithInputImage(h.scheduler, req(), bytesOf(bytes)));
      expect(err.code, what).toBe(Code.INVALID_ARGUMENT);
      expect(err.reason, what).toBe('INVALID_PARAMETER');
      expect(err.field, what).toBe('input_image');
      expect(err.message, what).toMatch(message);
    }
    expect(await objects(h.store)).toBe(before);
    expect(h.scheduler.inFlightCount()).toBe(1);
    expect(h.imageTasks).toHaveLength(1);

    h.held.release();
    expect(await outcome(h.scheduler, running.context.reqId)).toBe('completed');
    expect(Buffer.compare(Buffer.from(h.imageTasks[0].bytes), Buffer.from(await png(2)))).toBe(0);
  });

  it('refuses an image for a model that takes none, and a request without one for an image-only model', async () => {
    const h = harness();
    const none = await refusal(submitWithInputImage(h.scheduler, req({ model: 'test/t2i' }), bytesOf(await png())));
    expect(none).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'input_image' });
    expect(none.message).toBe('input_image: model "test/t2i" does not take an input image');
    const missing = await refusal(submitWithInputImage(h.scheduler, req({ model: 'test/i2v' }), undefined));
    expect(missing).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'input_image' });
    expect(missing.message).toBe('input_image: is required: model "test/i2v" generates from an image (image-to-video)');
    // The same checks hold for a request that arrives with refs already made.
    await expect(h.scheduler.submit(req({ model: 'test/i2v' }))).rejects.toThrow(/input_image: is required/);
    expect(await objects(h.store)).toBe(0);
    expect(h.scheduler.inFlightCount()).toBe(0);
  });

  it('checks strength: in (0, 1], and only with an image, before storing anything', async () => {
    const h = harness();
    for (const strength of [0, 1.5, -1, Number.NaN]) {
      const err = await refusal(submitWithInputImage(h.scheduler, req({ params: { prompt: 'x', strength } }), bytesOf(await png())));
      expect(err, String(strength)).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'strength' });
    }
    const alone = await refusal(submitWithInputImage(h.scheduler, req({ params: { prompt: 'x', strength: 0.5 } }), undefined));
    expect(alone).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'strength' });
    expect(await objects(h.store)).toBe(0);
    const ok = await submitWithInputImage(h.scheduler, req({ params: { prompt: 'x', strength: 1 } }), bytesOf(await png()));
    expect(ok.context.params.strength).toBe(1);
    expect(await outcome(h.scheduler, ok.context.reqId)).toBe('completed');
  });

  it('copies an image given by ref into the request; the original stays with its owner', async () => {
    const h = harness();
    const image = await png(3);
    const original = await h.store.put({ requestId: 'uploads', name: 'photo', data: image, shape: [image.byteLength], dtype: 'uint8' });
    const state = await submitWithInputImage(h.scheduler, req(), { kind: 'ref', ref: original });
    expect(state.context.refs.input_image.objectId).not.toBe(original.objectId);
    expect(await outcome(h.scheduler, state.context.reqId)).toBe('completed');
    expect(Buffer.compare(Buffer.from(h.imageTasks[0].bytes), Buffer.from(image))).toBe(0);
    expect((await h.store.get(original)).ref.objectId).toBe(original.objectId);

    const pixels: ObjectRef = { ...original, dtype: 'float32', shape: [image.byteLength / 4] };
    const wrong = await refusal(submitWithInputImage(h.scheduler, req(), { kind: 'ref', ref: pixels }));
    expect(wrong).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'input_image' });
    expect(wrong.message).toMatch(/an encoded image is a uint8 object of shape \[bytes\]/);
    const gone = await refusal(
      submitWithInputImage(h.scheduler, req(), { kind: 'ref', ref: { ...original, objectId: 'uploads:photo:gone' } }),
    );
    expect(gone).toMatchObject({ code: Code.NOT_FOUND, field: 'input_image' });
  });

  it('deletes the stored image again when the request is refused after it was stored', async () => {
    const h = harness({ imageStage: false });
    const err = await refusal(submitWithInputImage(h.scheduler, req(), bytesOf(await png())));
    expect(err).toMatchObject({ code: Code.UNAVAILABLE, reason: 'POOL_UNAVAILABLE' });
    expect(err.message).toMatch(/pool "img" \(stage image_encoding\)/);
    expect(await objects(h.store)).toBe(0);
  });

  it('answers a repeated request id with the existing request, keeping its one image', async () => {
    const h = harness();
    const first = await submitWithInputImage(h.scheduler, req({ requestId: 'mine', params: { prompt: 'hold' } }), bytesOf(await png(4)));
    const again = await submitWithInputImage(h.scheduler, req({ requestId: 'mine', params: { prompt: 'hold' } }), bytesOf(await png(5)));
    expect(again).toBe(first);
    const bad = await refusal(submitWithInputImage(h.scheduler, req({ requestId: 'a:b' }), bytesOf(await png())));
    expect(bad).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'request_id' });
    h.held.release();
    expect(await outcome(h.scheduler, 'mine')).toBe('completed');
    expect(h.imageTasks).toHaveLength(1);
    expect(Buffer.compare(Buffer.from(h.imageTasks[0].bytes), Buffer.from(await png(4)))).toBe(0);
  });
});

describe('input images over gRPC', async () => {
  const fx = new Fixtures();
  afterEach(() => fx.close());

  async function client(h: Harness) {
    const address = await fx.server(schedulerServiceBinding(h.scheduler, registry));
    return new (loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService)(address, grpc.credentials.createInsecure());
  }

  it('takes the image as bytes in Submit, Generate and Session; a corrupt one is INVALID_ARGUMENT naming input_image', async () => {
    const h = harness();
    const c = await client(h);
    try {
      const image = Buffer.from(await png(6));
      const submit = (params: Record<string, unknown>): Promise<SubmitResponse__Output | DiffmeshError> =>
        new Promise((resolve) =>
          c.Submit(
            { model: 'test/img2img', params: { prompt: 'x', ...params } },
            (err: grpc.ServiceError | null, res?: SubmitResponse__Output) => resolve(err ? fromWire(err) : (res as SubmitResponse__Output)),
          ),
        );
      const ok = (await submit({ inputImage: { data: image, mediaType: 'image/png' }, strength: 0.5 })) as SubmitResponse__Output;
      expect(await outcome(h.scheduler, ok.reqId)).toBe('completed');
      expect(Buffer.compare(Buffer.from(h.imageTasks[0].bytes), image)).toBe(0);
      expect(h.imageTasks[0].task.params.strength).toBe(0.5);
      expect((await h.scheduler.get(ok.reqId)).context.params.strength).toBe(0.5);

      const corrupt = await submit({ inputImage: { data: Buffer.from('not a png at all') } });
      expect(corrupt).toMatchObject({ code: Code.INVALID_ARGUMENT, reason: 'INVALID_PARAMETER', metadata: { field: 'input_image' } });
      const strengthAlone = await submit({ strength: 0.5 });
      expect(strengthAlone).toMatchObject({ code: Code.INVALID_ARGUMENT, metadata: { field: 'strength' } });

      // Generate: the stream's events, then the end.
      const kinds: string[] = [];
      await new Promise<void>((resolve, reject) => {
        const call = c.Generate({ model: 'test/img2img', params: { prompt: 'x', inputImage: { data: image } } });
        call.on('data', (m: GenerateResponse__Output) => kinds.push(...m.events.map((e) => e.kind as string)));
        call.on('end', () => resolve());
        call.on('error', reject);
      });
      expect(kinds.at(-1)).toBe('completed');
      expect(kinds.filter((k) => k === 'stageStarted')).toHaveLength(3);
      const refused = await new Promise<DiffmeshError>((resolve) => {
        const call = c.Generate({ model: 'test/t2i', params: { prompt: 'x', inputImage: { data: image } } });
        call.on('data', () => undefined);
        call.on('error', (err: grpc.ServiceError) => resolve(fromWire(err)));
      });
      expect(refused).toMatchObject({ code: Code.INVALID_ARGUMENT, metadata: { field: 'input_image' } });
      expect(refused.message).toMatch(/does not take an input image/);

      // Session: a corrupt image is answered with its error, the good one runs, the stream goes on.
      const answers: SessionResponse__Output['answers'] = [];
      const ends: string[] = [];
      await new Promise<void>((resolve, reject) => {
        const call = c.Session();
        call.on('data', (m: SessionResponse__Output) => {
          answers.push(...m.answers);
          for (const e of m.events) if (e.completed || e.failed) ends.push(e.reqId);
        });
        call.on('end', () => resolve());
        call.on('error', reject);
        call.write({ tag: 1, generate: { model: 'test/img2img', params: { prompt: 'x', inputImage: { data: Buffer.from('garbage') } } } });
        call.write({ tag: 2, generate: { model: 'test/img2img', params: { prompt: 'x', inputImage: { data: image } } } });
        call.write({ tag: 3, generate: { model: 'test/img2img', params: { prompt: 'no image' } } });
        call.end();
      });
      const byTag = new Map(answers.map((a) => [a.tag, a]));
      expect(byTag.get(1)?.error).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'input_image' });
      expect(byTag.get(2)?.reqId).not.toBe('');
      expect(byTag.get(3)?.reqId).not.toBe('');
      expect(ends.sort()).toEqual([byTag.get(2)?.reqId, byTag.get(3)?.reqId].sort());
      expect((await h.scheduler.get(byTag.get(3)!.reqId)).context.executionPlan.stages.map((s) => s.name)).toEqual([
        'text_encoding',
        'denoising',
      ]);
      await expect.poll(() => objects(h.store)).toBe(4); // the four results: no input image left behind
    } finally {
      c.close();
    }
  });

  it('lists the models that take an image as image-to-image / image-to-video, with the stage that requires it and the default strength', async () => {
    const h = harness();
    const c = await client(h);
    try {
      const res = await new Promise<ListModelsResponse__Output>((resolve, reject) =>
        c.ListModels({}, (err: grpc.ServiceError | null, r?: ListModelsResponse__Output) => (err ? reject(err) : resolve(r!))),
      );
      const byName = new Map(res.models.map((m) => [m.name, m]));
      expect(byName.get('test/img2img')).toMatchObject({
        modalities: ['MODALITY_TEXT_TO_IMAGE', 'MODALITY_IMAGE_TO_IMAGE'],
        plan: {
          stages: [
            { name: 'STAGE_NAME_TEXT_ENCODING' },
            { name: 'STAGE_NAME_IMAGE_ENCODING', requires: 'input_image' },
            { name: 'STAGE_NAME_DENOISING' },
          ],
        },
        defaults: { strength: 0.8 },
      });
      expect(byName.get('test/i2v')).toMatchObject({ modalities: ['MODALITY_IMAGE_TO_VIDEO'], defaults: { strength: 1 } });
      expect(byName.get('test/t2i')?.defaults?.strength).toBeUndefined();
    } finally {
      c.close();
    }
  });

  it('hands the input image ref and the strength to a remote image_encoding stage over its Work stream', async () => {
    const store = createTensorStore({ backend: 'memory' });
    const seen: StageTask[] = [];
    const address = await fx.stageServer({
      stage: 'image_encoding',
      models: () => [],
      async execute(task) {
        seen.push(task);
        return { outputs: {} };
      },
    });
    const scheduler = new Scheduler({
      registry: PlanRegistry.fromEntries([
        {
          model: 'test/remote-i2v',
          modalities: ['image-to-video'],
          stages: [{ name: 'image_encoding', pool: 'enc', requires: 'input_image' }],
          defaults,
          constraints,
        },
      ]),
      store,
      log,
      limits: {
        maxQueueLength: 10,
        maxInFlight: 10,
        maxAttempts: 1,
        retryBackoffMs: 1,
        defaultTimeoutMs: 0,
        stageTimeoutMs: 0,
        retentionMs: 60_000,
      },
    });
    scheduler.addInstance(fx.remote(address, { stage: 'image_encoding' }));
    const image = await png(7);
    const state = await submitWithInputImage(
      scheduler,
      { model: 'test/remote-i2v', params: { prompt: 'x', strength: 0.25 } },
      bytesOf(image),
    );
    expect(await outcome(scheduler, state.context.reqId)).toBe('completed');
    expect(seen).toHaveLength(1);
    expect(seen[0].inputs.input_image).toMatchObject({ name: 'input_image', dtype: 'uint8', shape: [image.byteLength] });
    expect(seen[0].params.strength).toBe(0.25);
    await scheduler.stop();
  });
});
