import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelsRoot } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { Code, silentLogger, type GenerationParams, type ObjectRef, type StageProgress, type StageTask } from '@diffmesh/core';
import { DenoisingStage } from './denoising-stage.js';

const MODEL = 'diffmesh/tiny-shapes';
let store: TensorStore;
let sessions: SessionCache;
let catalog: ModelCatalog;
let params: GenerationParams;
const batches: number[] = [];

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  catalog = new ModelCatalog([defaultModelsRoot()]);
  const { defaults } = (await catalog.get(MODEL)).manifest;
  params = {
    prompt: 'a red circle',
    negativePrompt: '',
    width: 64,
    height: 64,
    numFrames: 1,
    numInferenceSteps: 6,
    guidanceScale: defaults.guidanceScale,
    seed: '5',
    fps: defaults.fps,
  };
});
afterAll(async () => {
  await sessions.close();
  await store.close();
});

function stage(maxBatch: number): DenoisingStage {
  return new DenoisingStage({ catalog, sessions, store, models: [], maxBatch, onBatch: (n) => batches.push(n) });
}

/** Text embeddings as the encoder would store them: a red circle, and an empty negative prompt. */
async function embeds(reqId: string): Promise<Record<string, ObjectRef>> {
  const m = await catalog.get(MODEL);
  const { maxLength: L, hiddenSize: D } = m.manifest.text;
  const cond = new Float32Array(L * D);
  cond[D * 2 + 0] = 1; // token 2: foreground colour feature 0 (red)…
  cond[D * 2 + 22] = 1; // …and shape feature 0 (circle)
  const put = (name: string, data: Float32Array) =>
    store.put({ requestId: reqId, name, data: toBytes(data), shape: [1, L, D], dtype: 'float32' });
  return {
    prompt_embeds: await put('prompt_embeds', cond),
    negative_prompt_embeds: await put('negative_prompt_embeds', new Float32Array(L * D)),
  };
}

async function task(reqId: string, p: Partial<GenerationParams> = {}): Promise<StageTask> {
  return {
    reqId,
    stageIndex: 1,
    stage: 'denoising',
    attempt: 1,
    model: MODEL,
    params: { ...params, ...p },
    inputs: await embeds(reqId),
    deadline: 0,
    traceContext: {},
  };
}

async function latents(ref: ObjectRef): Promise<Float32Array> {
  return Float32Array.from(float32View((await store.get(ref)).data));
}

describe('DenoisingStage', () => {
  it('batches concurrent requests into shared runs with the same results as one at a time', async () => {
    const s = stage(8);
    const ctx = (progress: StageProgress[] = []) => ({
      signal: new AbortController().signal,
      onProgress: (p: StageProgress) => progress.push(p),
      log: silentLogger(),
    });
    const alone = await s.execute(await task('alone'), ctx());
    batches.length = 0;
    const seeds = ['5', '6', '7'];
    const together = await Promise.all(seeds.map(async (seed) => s.execute(await task(`together-${seed}`, { seed }), ctx())));
    // Three CFG requests in lock step: each run carries 6 latents.
    expect(Math.max(...batches)).toBe(6);
    expect(batches.length).toBe(params.numInferenceSteps);
    const a = await latents(alone.outputs.latents);
    const b = await latents(together[0].outputs.latents);
    expect(b.length).toBe(a.length);
    for (let i = 0; i < a.length; i += 1) expect(b[i]).toBeCloseTo(a[i], 4);
    const c = await latents(together[1].outputs.latents);
    expect(c).not.toEqual(b);
  });

  it('never runs more than maxBatch latents at once', async () => {
    const s = stage(4);
    batches.length = 0;
    const ctx = { signal: new AbortController().signal, onProgress: () => {}, log: silentLogger() };
    await Promise.all(['1', '2', '3'].map(async (seed) => s.execute(await task(`max-${seed}`, { seed }), ctx)));
    expect(Math.max(...batches)).toBe(4);
  });

  it('stops between steps when cancelled', async () => {
    const s = stage(8);
    const controller = new AbortController();
    const progress: StageProgress[] = [];
    const t = await task('cancel', { numInferenceSteps: 50 });
    const before = (await store.usage()).objects;
    const run = s.execute(t, {
      signal: controller.signal,
      onProgress: (p) => {
        progress.push(p);
        if (p.step === 3) controller.abort(new Error('cancelled by test'));
      },
      log: silentLogger(),
    });
    await expect(run).rejects.toThrow('cancelled by test');
    expect(progress.map((p) => p.step)).toEqual([1, 2, 3]);
    // Nothing was stored for the cancelled request.
    expect((await store.usage()).objects).toBe(before);
  });

  it('rejects a size the model cannot make, naming the field', async () => {
    await expect(
      stage(8).execute(await task('bad', { width: 60 }), { signal: new AbortController().signal, onProgress() {}, log: silentLogger() }),
    ).rejects.toMatchObject({
      code: Code.INVALID_ARGUMENT,
      metadata: { field: 'width' },
    });
  });
});
