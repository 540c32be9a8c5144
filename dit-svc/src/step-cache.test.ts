/**
 * Step caching: off (threshold 0) changes no bit; on, the model runs exactly as often as the
 * rule says (first and last step, and every step after `maxSkippedSteps` reuses), the result
 * repeats, and the stage reports what it skipped; for the built-in model and a diffusers-layout
 * directory (CFG: both branches skip together).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSdDir, defaultModelsRoot } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { silentLogger, type GenerationParams, type ObjectRef, type StageTask } from '@diffmesh/core';
import { CHECKPOINT_NAME } from './checkpoint.js';
import { DenoisingStage } from './denoising-stage.js';
import { NoiseRng } from './rng.js';
import { relativeL1, StepCache } from './step-cache.js';

/** Steps the rule computes with an always-passing threshold: 0, K+1, 2(K+1), … and the last. */
function expectedComputed(steps: number, maxSkipped: number): number {
  return Math.ceil((steps - 1) / (maxSkipped + 1)) + 1;
}

describe('StepCache', () => {
  it('skips at most maxSkippedSteps in a row and always runs the first and last step', () => {
    for (const [steps, k] of [
      [10, 2],
      [6, 2],
      [7, 1],
      [1, 3],
      [20, 3],
    ]) {
      const cache = new StepCache({ threshold: 1e9, maxSkippedSteps: k }, steps - 1);
      const ran: number[] = [];
      for (let i = 0; i < steps; i += 1) {
        const input = Float32Array.of(1 + i, 2);
        if (cache.lookup(input, i) === undefined) {
          ran.push(i);
          cache.store(Float32Array.of(i));
        }
      }
      expect(ran.length, `${steps} steps, K=${k}`).toBe(expectedComputed(steps, k));
      expect(ran[0]).toBe(0);
      expect(ran[ran.length - 1]).toBe(steps - 1);
      expect(cache.computed + cache.skipped).toBe(steps);
    }
  });

  it('runs once the accumulated relative L1 change reaches the threshold, and reuses the last output', () => {
    // Each step moves the input by 10% of the previous one: two steps add up to ≥ 0.15.
    const cache = new StepCache({ threshold: 0.15, maxSkippedSteps: 5 }, 99);
    const decisions: boolean[] = [];
    let x = 1;
    for (let i = 0; i < 7; i += 1) {
      const out = cache.lookup(Float32Array.of(x), i);
      decisions.push(out === undefined);
      if (out === undefined) cache.store(Float32Array.of(100 + i));
      else expect(out[0]).toBe(100 + decisions.lastIndexOf(true));
      x *= 1.1;
    }
    expect(decisions).toEqual([true, false, true, false, true, false, true]);
  });

  it('is off for threshold 0 or no skipped steps', () => {
    expect(StepCache.of(undefined, 9)).toBeUndefined();
    expect(StepCache.of({ threshold: 0, maxSkippedSteps: 3 }, 9)).toBeUndefined();
    expect(StepCache.of({ threshold: 0.2, maxSkippedSteps: 0 }, 9)).toBeUndefined();
    expect(StepCache.of({ threshold: 0.2 }, 9)).toBeDefined();
  });

  it('measures the relative L1 distance', () => {
    expect(relativeL1(Float32Array.of(1, -1), Float32Array.of(1.5, -1))).toBeCloseTo(0.25);
    expect(relativeL1(Float32Array.of(0, 0), Float32Array.of(0, 0))).toBe(0);
  });
});

let store: TensorStore;
let sessions: SessionCache;
let root: string;
const directories: Record<string, string> = {};

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-step-cache-'));
  directories['test/sd-euler'] = path.join(root, 'sd-euler');
  await buildSdDir(directories['test/sd-euler'], { scheduler: { _class_name: 'EulerDiscreteScheduler' } });
});
afterAll(async () => {
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

async function embeds(reqId: string, length: number, hidden: number): Promise<Record<string, ObjectRef>> {
  const rng = new NoiseRng(77n);
  const put = (name: string) =>
    store.put({ requestId: reqId, name, data: toBytes(rng.normals(length * hidden)), shape: [1, length, hidden], dtype: 'float32' });
  return { prompt_embeds: await put('prompt_embeds'), negative_prompt_embeds: await put('negative_prompt_embeds') };
}

interface Run {
  latents: Float32Array;
  /** Latents per denoiser run, one entry per run. */
  batches: number[];
  warnings: string[];
}

async function run(
  model: string,
  params: Partial<GenerationParams>,
  inputs: Record<string, ObjectRef>,
  checkpoints: { every: number; onCheckpoint?: (ref: ObjectRef) => void; abortAfterStep?: number } = { every: 0 },
): Promise<Run> {
  const batches: number[] = [];
  const catalog = new ModelCatalog([defaultModelsRoot()], { directories });
  const s = new DenoisingStage({
    catalog,
    sessions,
    store,
    models: [],
    maxBatch: 4,
    checkpointEvery: checkpoints.every,
    onBatch: (n) => batches.push(n),
  });
  const controller = new AbortController();
  const task: StageTask = {
    reqId: 'step-cache',
    stageIndex: 1,
    stage: 'denoising',
    attempt: 1,
    model,
    params: {
      prompt: 'a red circle',
      negativePrompt: '',
      width: 64,
      height: 64,
      numFrames: 1,
      numInferenceSteps: 12,
      guidanceScale: 2,
      seed: '41',
      fps: 8,
      ...params,
    },
    inputs,
    deadline: 0,
    traceContext: {},
  };
  const result = await s.execute(task, {
    signal: controller.signal,
    log: silentLogger(),
    onProgress(p) {
      const ref = p.checkpoint?.[CHECKPOINT_NAME];
      if (ref) checkpoints.onCheckpoint?.(ref);
      if (checkpoints.abortAfterStep !== undefined && p.step >= checkpoints.abortAfterStep) controller.abort(new Error('stopped by test'));
    },
  });
  return { latents: float32View((await store.get(result.outputs.latents)).data).slice(), batches, warnings: result.warnings ?? [] };
}

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe.each([
  ['the built-in model', 'diffmesh/tiny-shapes', 16, 32],
  ['a diffusers-layout directory (Euler)', 'test/sd-euler', 77, 32],
])('step caching on %s', (_name, model, length, hidden) => {
  it('with threshold 0 gives the bits and the model runs of a run without it', async () => {
    const inputs = await embeds('off', length, hidden);
    const plain = await run(model, {}, inputs);
    const off = await run(model, { stepCache: { threshold: 0, maxSkippedSteps: 3 } }, inputs);
    expect(bits(off.latents).equals(bits(plain.latents))).toBe(true);
    expect(off.batches).toEqual(plain.batches);
    expect(plain.batches.length).toBe(12);
    expect(off.warnings).toEqual([]);
  });

  it.each([1, 2, 3])('with a large threshold and max skip %i runs the model as the rule says, the same every time', async (k) => {
    const inputs = await embeds(`on-${k}`, length, hidden);
    const plain = await run(model, {}, inputs);
    const a = await run(model, { stepCache: { threshold: 1e6, maxSkippedSteps: k } }, inputs);
    const b = await run(model, { stepCache: { threshold: 1e6, maxSkippedSteps: k } }, inputs);
    const computed = expectedComputed(12, k);
    // The CFG pair of a step is one run of 2 latents.
    expect(a.batches).toEqual(Array<number>(computed).fill(2));
    expect(a.warnings).toEqual([
      `step cache: ${12 - computed} of 12 denoising steps reused the last model output (${2 * (12 - computed)} of 24 model calls skipped)`,
    ]);
    expect(bits(b.latents).equals(bits(a.latents))).toBe(true);
    expect(bits(a.latents).equals(bits(plain.latents))).toBe(false);
  });

  it('resumes from a checkpoint with an empty cache: the first step after it runs', async () => {
    const inputs = await embeds('resume', length, hidden);
    const stepCache = { threshold: 1e6, maxSkippedSteps: 2 };
    const saved: ObjectRef[] = [];
    // The first try stores checkpoints every 4 steps and stops after step 5.
    await expect(run(model, { stepCache }, inputs, { every: 4, onCheckpoint: (r) => saved.push(r), abortAfterStep: 5 })).rejects.toThrow(
      'stopped by test',
    );
    expect(saved.length).toBe(1);
    // The next try goes on from step 4 of 12: it computes steps 4, 7, 10 and 11 (the last).
    const resumed = await run(model, { stepCache }, { ...inputs, [CHECKPOINT_NAME]: saved[0] }, { every: 4 });
    expect(resumed.batches.length).toBe(4);
    expect(resumed.warnings[0]).toMatch(/^step cache: 4 of 8 denoising steps/);
  });

  it('with a small threshold skips fewer steps than with a large one', async () => {
    const inputs = await embeds('small', length, hidden);
    const small = await run(model, { stepCache: { threshold: 0.05, maxSkippedSteps: 3 } }, inputs);
    const large = await run(model, { stepCache: { threshold: 1e6, maxSkippedSteps: 3 } }, inputs);
    expect(small.batches.length).toBeGreaterThanOrEqual(large.batches.length);
    expect(small.batches.length).toBeLessThanOrEqual(12);
  });
});
