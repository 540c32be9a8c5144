/**
 * What a denoising stage reports of its LoRA adapters (its Work stream's status and Describe
 * carry it to the scheduler): the names loaded in its cache (held) and the names in its adapter
 * folder (available), told again whenever either changes.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSdDir, defaultModelsRoot, writeTestLora } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { silentLogger, type AdapterParams, type StageTask } from '@diffmesh/core';
import { DenoisingStage } from './denoising-stage.js';
import { DenoiserAdapters } from './denoiser-adapters.js';
import { denoiseTask } from './fixtures/denoise-task.js';
import { NoiseRng } from './rng.js';

const D = 32;
let store: TensorStore;
let sessions: SessionCache;
let root: string;
let loraDir: string;
let sdDir: string;

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-adapter-report-'));
  sdDir = path.join(root, 'sd');
  await buildSdDir(sdDir, { attentionBlock: true, hiddenSize: D });
  loraDir = path.join(root, 'loras');
  await mkdir(loraDir);
  await writeTestLora(path.join(loraDir, 'ink.safetensors'), { format: 'peft', crossAttentionDim: D, alpha: 2, seed: 31 });
  await writeTestLora(path.join(loraDir, 'pencil.safetensors'), { format: 'kohya', crossAttentionDim: D, rank: 2, seed: 32 });
});
afterAll(async () => {
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

async function task(reqId: string, adapters: AdapterParams[]): Promise<StageTask> {
  const embeds = await store.put({
    requestId: reqId,
    name: 'prompt_embeds',
    data: toBytes(new NoiseRng(5n).normals(77 * D).map((v) => v * 0.1)),
    shape: [1, 77, D],
    dtype: 'float32',
  });
  return denoiseTask(reqId, 'test/sd', { numInferenceSteps: 2, guidanceScale: 1, seed: '7', adapters }, { prompt_embeds: embeds });
}

function stage(adapters?: DenoiserAdapters): DenoisingStage {
  return new DenoisingStage({
    catalog: new ModelCatalog([defaultModelsRoot()], { directories: { 'test/sd': sdDir } }),
    sessions,
    store,
    models: [],
    maxBatch: 2,
    ...(adapters ? { adapters } : {}),
  });
}

const run = (s: DenoisingStage, t: StageTask) =>
  s.execute(t, { signal: new AbortController().signal, log: silentLogger(), onProgress: () => undefined });

describe("a denoising stage's adapter report", () => {
  it('tells the adapters held and available, and calls its listeners when a task loads one or the folder changes', async () => {
    const adapters = new DenoiserAdapters({ dir: loraDir });
    const s = stage(adapters);
    let changes = 0;
    s.onAdaptersChange(() => (changes += 1));
    // Not listed yet: nothing reported (the scheduler leaves the decision to the stage meanwhile).
    expect(s.adapters()).toBeUndefined();
    await expect.poll(() => s.adapters(), { timeout: 10_000 }).toEqual({ held: [], available: ['ink', 'pencil'] });
    expect(changes).toBe(1);

    await run(s, await task('a', [{ name: 'ink', scale: 1 }]));
    expect(s.adapters()).toEqual({ held: ['ink'], available: ['ink', 'pencil'] });
    expect(changes).toBe(2);
    // A second task with ink finds it loaded: nothing changes.
    await run(s, await task('b', [{ name: 'ink', scale: 0.5 }]));
    expect(changes).toBe(2);

    await writeTestLora(path.join(loraDir, 'chalk.safetensors'), { format: 'peft', crossAttentionDim: D, seed: 33 });
    await expect.poll(() => s.adapters()?.available, { timeout: 10_000 }).toEqual(['chalk', 'ink', 'pencil']);
    await rm(path.join(loraDir, 'ink.safetensors'));
    // Its file gone, ink is neither available nor held (a task naming it is refused).
    await expect.poll(() => s.adapters(), { timeout: 10_000 }).toEqual({ held: [], available: ['chalk', 'pencil'] });
    expect(changes).toBe(4);
    adapters.close();
  });

  it('reports only what its byte-bounded cache keeps', async () => {
    // Two adapters of one size, and room for one of them at a time.
    await writeTestLora(path.join(loraDir, 'oil.safetensors'), { format: 'kohya', crossAttentionDim: D, rank: 2, seed: 34 });
    const probe = new DenoiserAdapters({ dir: loraDir });
    await run(stage(probe), await task('p', [{ name: 'pencil', scale: 1 }]));
    const one = probe.cachedBytes;
    probe.close();
    const adapters = new DenoiserAdapters({ dir: loraDir, cacheBytes: Math.floor(one * 1.5) });
    const s = stage(adapters);
    await expect.poll(() => s.adapters(), { timeout: 10_000 }).toBeDefined();
    await run(s, await task('c', [{ name: 'oil', scale: 1 }]));
    expect(s.adapters()?.held).toEqual(['oil']);
    await run(s, await task('d', [{ name: 'pencil', scale: 1 }]));
    expect(s.adapters()?.held).toEqual(['pencil']);
    adapters.close();
  });

  it('a stage without an adapter folder reports none held and none available', () => {
    expect(stage().adapters()).toEqual({ held: [], available: [] });
  });
});
