/**
 * Requests at different steps share denoiser runs: built-in models (timestep [B]) and model
 * directories whose transformer takes a timestep per batch item (FLUX exports) batch every
 * step of every concurrent request of the same shape, and each request ends with the latent
 * it reaches alone.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFluxDir, defaultModelsRoot } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { silentLogger, type ObjectRef, type StageTask } from '@diffmesh/core';
import { DenoisingStage } from './denoising-stage.js';
import { denoiseTask } from './fixtures/denoise-task.js';
import { NoiseRng } from './rng.js';

let store: TensorStore;
let sessions: SessionCache;
let root: string;
const directories: Record<string, string> = {};

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-step-sharing-'));
  directories['test/flux'] = path.join(root, 'flux');
  await buildFluxDir(directories['test/flux'], { scalingFactor: 0.5, shiftFactor: 0.2 });
});
afterAll(async () => {
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

async function put(reqId: string, name: string, shape: number[], seed: bigint): Promise<ObjectRef> {
  const n = shape.reduce((a, b) => a * b, 1);
  return store.put({ requestId: reqId, name, data: toBytes(new NoiseRng(seed).normals(n)), shape, dtype: 'float32' });
}

const task = denoiseTask;

/** A denoising stage that records the size of every denoiser run in `sizes`. */
function stageRecording(catalog: ModelCatalog, sizes: number[]): DenoisingStage {
  return new DenoisingStage({ catalog, sessions, store, models: [], maxBatch: 8, onBatch: (n) => sizes.push(n) });
}

/** Runs `tasks`, the second starting once the first has made two steps; the latents and the run sizes. */
async function runStaggered(s: DenoisingStage, tasks: StageTask[], sizes: number[]): Promise<Float32Array[]> {
  let startSecond: () => void = () => undefined;
  const secondMayStart = new Promise<void>((resolve) => (startSecond = resolve));
  const exec = async (t: StageTask, i: number): Promise<Float32Array> => {
    if (i > 0) await secondMayStart;
    const result = await s.execute(t, {
      signal: new AbortController().signal,
      log: silentLogger(),
      onProgress: (p) => {
        if (i === 0 && p.step === 2) startSecond();
      },
    });
    return float32View((await store.get(result.outputs.latents)).data).slice();
  };
  sizes.length = 0;
  return Promise.all(tasks.map(exec));
}

/** Each task run alone ends with the latent it reached in company (to float32 rounding of a batched run). */
async function expectAsAlone(s: DenoisingStage, tasks: StageTask[], together: Float32Array[]): Promise<void> {
  for (let i = 0; i < tasks.length; i += 1) close(together[i], (await runStaggered(s, [tasks[i]], []))[0]);
}

function close(a: Float32Array, b: Float32Array): void {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i += 1) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  expect(worst).toBeLessThan(1e-4);
}

describe('requests at different steps share denoiser runs', () => {
  it('a FLUX directory (timestep per batch item): shared runs, each request its own latent', async () => {
    const sizes: number[] = [];
    const s = stageRecording(new ModelCatalog([defaultModelsRoot()], { directories }), sizes);
    const inputs = async (reqId: string, seed: bigint) => ({
      prompt_embeds_2: await put(reqId, 'prompt_embeds_2', [1, 16, 32], seed),
      pooled_prompt_embeds: await put(reqId, 'pooled_prompt_embeds', [1, 32], seed + 1n),
    });
    const a = task('a', 'test/flux', { numInferenceSteps: 6, seed: '1' }, await inputs('a', 5n));
    const b = task('b', 'test/flux', { numInferenceSteps: 4, seed: '2' }, await inputs('b', 9n));
    const together = await runStaggered(s, [a, b], sizes);
    const shared = sizes.filter((n) => n > 1).length;
    // b starts at a's step 3: they are at different timesteps whenever they share a run.
    expect(shared).toBeGreaterThanOrEqual(2);
    expect(sizes.reduce((x, y) => x + y, 0)).toBe(6 + 4);
    await expectAsAlone(s, [a, b], together);
  });

  it('a built-in model (timestep [B]): the CFG pair is one run, and staggered requests share runs', async () => {
    const sizes: number[] = [];
    const s = stageRecording(new ModelCatalog([defaultModelsRoot()]), sizes);
    const inputs = async (reqId: string, seed: bigint) => ({
      prompt_embeds: await put(reqId, 'prompt_embeds', [1, 32, 32], seed),
      negative_prompt_embeds: await put(reqId, 'negative_prompt_embeds', [1, 32, 32], seed + 1n),
    });
    const params = { width: 64, height: 64, guidanceScale: 3 };
    const a = task('c', 'diffmesh/tiny-shapes', { ...params, numInferenceSteps: 6, seed: '3' }, await inputs('c', 11n));
    const b = task('d', 'diffmesh/tiny-shapes', { ...params, numInferenceSteps: 4, seed: '4' }, await inputs('d', 13n));
    const together = await runStaggered(s, [a, b], sizes);
    // Every run carries a CFG pair (2) or two of them (4): never half a pair.
    expect(sizes.every((n) => n === 2 || n === 4)).toBe(true);
    expect(sizes.filter((n) => n === 4).length).toBeGreaterThanOrEqual(2);
    expect(sizes.reduce((x, y) => x + y, 0)).toBe(2 * (6 + 4));
    await expectAsAlone(s, [a, b], together);
  });
});
