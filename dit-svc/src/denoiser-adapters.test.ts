/**
 * LoRA adapters on a model directory's denoiser: requests name adapters from the stage's
 * adapter directory; requests with different adapters (or none) share denoiser runs of one
 * session, and each ends with the latent it reaches alone, and with the latent of the same
 * UNet with its adapter merged into the weights.
 */
import { cp, mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeModel, encodeModel, findGraphLinears, loadLoraAdapter, mergeLora } from '@diffmesh/adapters';
import { buildSdDir, defaultModelsRoot, writeTestLora } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { silentLogger, type AdapterParams, type ObjectRef, type StageTask } from '@diffmesh/core';
import { DenoisingStage } from './denoising-stage.js';
import { DenoiserAdapters } from './denoiser-adapters.js';
import { denoiseTask } from './fixtures/denoise-task.js';
import { NoiseRng } from './rng.js';
import { rejection } from '@diffmesh/testing';

const D = 32;
let store: TensorStore;
let sessions: SessionCache;
let root: string;
let loraDir: string;
const directories: Record<string, string> = {};

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-adapters-'));
  directories['test/sd'] = path.join(root, 'sd');
  await buildSdDir(directories['test/sd'], { attentionBlock: true, hiddenSize: D });
  loraDir = path.join(root, 'loras');
  await mkdir(loraDir);
  await writeTestLora(path.join(loraDir, 'ink.safetensors'), { format: 'peft', crossAttentionDim: D, alpha: 2, seed: 31 });
  await writeTestLora(path.join(loraDir, 'watercolour.safetensors'), {
    format: 'kohya',
    crossAttentionDim: D,
    rank: 2,
    alpha: 1,
    dtype: 'F16',
    seed: 32,
  });
});
afterAll(async () => {
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

async function put(reqId: string, name: string, seed: bigint): Promise<ObjectRef> {
  const shape = [1, 77, D];
  return store.put({
    requestId: reqId,
    name,
    data: toBytes(new NoiseRng(seed).normals(77 * D).map((v) => v * 0.1)),
    shape,
    dtype: 'float32',
  });
}

async function task(reqId: string, model: string, adapters: AdapterParams[] = []): Promise<StageTask> {
  const inputs = {
    prompt_embeds: await put(reqId, 'prompt_embeds', 5n),
    negative_prompt_embeds: await put(reqId, 'negative_prompt_embeds', 6n),
  };
  return denoiseTask(reqId, model, { numInferenceSteps: 5, guidanceScale: 3, seed: '7', ...(adapters.length ? { adapters } : {}) }, inputs);
}

function stage(opts: { adapters?: DenoiserAdapters; sizes?: number[]; dirs?: Record<string, string> } = {}): DenoisingStage {
  return new DenoisingStage({
    catalog: new ModelCatalog([defaultModelsRoot()], { directories: opts.dirs ?? directories }),
    sessions,
    store,
    models: [],
    maxBatch: 4,
    ...(opts.adapters ? { adapters: opts.adapters } : {}),
    onBatch: (n) => opts.sizes?.push(n),
  });
}

async function latent(s: DenoisingStage, t: StageTask): Promise<Float32Array> {
  const result = await s.execute(t, { signal: new AbortController().signal, log: silentLogger(), onProgress: () => undefined });
  return float32View((await store.get(result.outputs.latents)).data).slice();
}

function worst(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i += 1) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** A copy of the test directory whose UNet has `adapter` merged into its weights at `scale`. */
async function mergedDirectory(name: string, adapter: string, scale: number): Promise<string> {
  const dir = path.join(root, name);
  await cp(directories['test/sd'], dir, { recursive: true });
  const file = path.join(dir, 'unet', 'model.onnx');
  const model = decodeModel(await readFile(file));
  const linears = findGraphLinears(model);
  const mapped = loadLoraAdapter(await readFile(path.join(loraDir, `${adapter}.safetensors`)), adapter, {
    family: 'sd',
    linears: { denoiser: linears },
  });
  await writeFile(file, encodeModel(mergeLora(model, 'denoiser', [{ adapter: mapped, scale }])));
  return dir;
}

describe('LoRA adapters in the denoising stage', () => {
  it('two requests with different adapters share runs, each gets its solo latent, equal to the merged-weights one', async () => {
    const adapters = new DenoiserAdapters({ dir: loraDir });
    const sizes: number[] = [];
    const s = stage({ adapters, sizes });
    const a = await task('a', 'test/sd', [{ name: 'ink', scale: 0.8 }]);
    const b = await task('b', 'test/sd', [{ name: 'watercolour', scale: 1 }]);
    // Alone first (the adapters then loaded: the pair starts its steps in the same turn).
    const soloA = await latent(s, a);
    const soloB = await latent(s, b);
    sizes.length = 0;
    const [la, lb] = await Promise.all([latent(s, a), latent(s, b)]);
    // Every step is one run of both CFG pairs (PNDM's schedule has a step more than asked).
    const steps = sizes.length;
    expect(steps).toBeGreaterThanOrEqual(5);
    expect(sizes.every((n) => n === 4)).toBe(true);

    expect(worst(la, soloA)).toBeLessThan(1e-5);
    expect(worst(lb, soloB)).toBeLessThan(1e-5);
    const plain = await latent(stage(), await task('p', 'test/sd'));
    expect(worst(la, plain)).toBeGreaterThan(0.01);
    expect(worst(lb, plain)).toBeGreaterThan(0.01);
    expect(worst(la, lb)).toBeGreaterThan(0.01);
    const merged = stage({ dirs: { 'test/sd-ink': await mergedDirectory('sd-ink', 'ink', 0.8) } });
    expect(worst(la, await latent(merged, await task('m', 'test/sd-ink')))).toBeLessThan(1e-4);
  });

  it('with --max-batch 2 and no CFG, two requests with different adapters are one run per step', async () => {
    const sizes: number[] = [];
    const s = new DenoisingStage({
      catalog: new ModelCatalog([defaultModelsRoot()], { directories }),
      sessions,
      store,
      models: [],
      maxBatch: 2,
      adapters: new DenoiserAdapters({ dir: loraDir }),
      onBatch: (n) => sizes.push(n),
    });
    const noCfg = async (id: string, name: string) => {
      const t = await task(id, 'test/sd', [{ name, scale: 1 }]);
      return { ...t, params: { ...t.params, guidanceScale: 1 } };
    };
    const [a, b] = [await noCfg('g1', 'ink'), await noCfg('g2', 'watercolour')];
    const solo = [await latent(s, a), await latent(s, b)];
    expect(sizes.every((n) => n === 1)).toBe(true);
    const steps = sizes.length / 2;
    sizes.length = 0;
    const together = await Promise.all([latent(s, a), latent(s, b)]);
    expect(sizes).toEqual(new Array(steps).fill(2));
    expect(worst(together[0], solo[0])).toBeLessThan(1e-5);
    expect(worst(together[1], solo[1])).toBeLessThan(1e-5);
  });

  it('scale 0, or no adapter, on the branched session gives the base latent', async () => {
    const s = stage({ adapters: new DenoiserAdapters({ dir: loraDir }) });
    const base = await latent(stage(), await task('p0', 'test/sd'));
    expect(worst(await latent(s, await task('z', 'test/sd', [{ name: 'ink', scale: 0 }])), base)).toBe(0);
    expect(worst(await latent(s, await task('n', 'test/sd')), base)).toBe(0);
  });

  it('with an adapter folder, warm-up loads (and runs) the branched session that tasks then use: one session, not two', async () => {
    const own = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
    try {
      const s = new DenoisingStage({
        catalog: new ModelCatalog([defaultModelsRoot()], { directories }),
        sessions: own,
        store,
        models: [],
        maxBatch: 4,
        adapters: new DenoiserAdapters({ dir: loraDir }),
      });
      await s.warm('test/sd', { run: true });
      expect(own.size).toBe(1);
      const result = await s.execute(await task('warm', 'test/sd', [{ name: 'ink', scale: 1 }]), {
        signal: new AbortController().signal,
        log: silentLogger(),
        onProgress: () => undefined,
      });
      expect(result.outputs.latents).toBeDefined();
      expect(own.size).toBe(1);
    } finally {
      await own.close();
    }
  });

  it('refuses unknown names, path characters, damaged, truncated and oversized files naming adapters[i].name, and keeps serving', async () => {
    const lookups: string[] = [];
    const adapters = new DenoiserAdapters({ dir: loraDir, maxFileBytes: 64 * 1024 * 1024, onLookup: (o) => lookups.push(o) });
    const s = stage({ adapters });
    const unknown = await rejection(
      latent(
        s,
        await task('u', 'test/sd', [
          { name: 'ink', scale: 1 },
          { name: 'nope', scale: 1 },
        ]),
      ),
    );
    expect(unknown.code).toBe(3);
    expect(unknown.field).toBe('adapters[1].name');
    expect(unknown.message).toMatch(/no adapter named nope here \(known: ink, watercolour\)/);
    expect((await rejection(latent(s, await task('p', 'test/sd', [{ name: '../sd/unet/model', scale: 1 }])))).field).toBe(
      'adapters[0].name',
    );
    const good = await readFile(path.join(loraDir, 'ink.safetensors'));
    await writeFile(path.join(loraDir, 'cut.safetensors'), good.subarray(0, good.length - 100));
    const cut = await rejection(latent(s, await task('c', 'test/sd', [{ name: 'cut', scale: 1 }])));
    expect(cut.field).toBe('adapters[0].name');
    expect(cut.message).toMatch(/cut\.safetensors: truncated: tensor .* ends at byte/);
    const damaged = Buffer.from(good);
    damaged.fill(0x7b, 8, 40);
    await writeFile(path.join(loraDir, 'damaged.safetensors'), damaged);
    expect((await rejection(latent(s, await task('d', 'test/sd', [{ name: 'damaged', scale: 1 }])))).message).toMatch(
      /damaged: the header is not JSON/,
    );
    // A sparse file of 300 MB: refused by its size, before a byte is read.
    const big = await open(path.join(loraDir, 'huge.safetensors'), 'w');
    await big.truncate(300 * 1024 * 1024);
    await big.close();
    expect((await rejection(latent(s, await task('h', 'test/sd', [{ name: 'huge', scale: 1 }])))).message).toMatch(
      /huge\.safetensors: 314572800 bytes, over the 67108864-byte limit/,
    );
    for (const f of ['cut', 'damaged', 'huge']) await rm(path.join(loraDir, `${f}.safetensors`));
    // Still serving, and a file is read once: the second request finds it loaded.
    lookups.length = 0;
    await latent(s, await task('ok1', 'test/sd', [{ name: 'watercolour', scale: 1 }]));
    await latent(s, await task('ok2', 'test/sd', [{ name: 'watercolour', scale: 0.5 }]));
    expect(lookups).toEqual(['load', 'hit']);
  });

  it('a UNet whose weights are in model.onnx_data gets the same latent with an adapter', async () => {
    const dir = path.join(root, 'sd-external');
    await buildSdDir(dir, { attentionBlock: true, hiddenSize: D, externalData: true });
    const s = stage({ adapters: new DenoiserAdapters({ dir: loraDir }), dirs: { ...directories, 'test/sd-external': dir } });
    const adapters = [{ name: 'ink', scale: 0.8 }];
    const external = await latent(s, await task('e1', 'test/sd-external', adapters));
    expect(worst(external, await latent(s, await task('e2', 'test/sd', adapters)))).toBeLessThan(1e-6);
  });

  it('on a pool whose denoiser graphs are rewritten (fused kernels), the branched graph is too, and its adapter applies as merged weights do', async () => {
    const fused = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, graphRewrites: { kernels: 'fused' } });
    try {
      const dirs = { ...directories, 'test/sd-ink-fused': await mergedDirectory('sd-ink-fused', 'ink', 0.8) };
      const catalog = new ModelCatalog([defaultModelsRoot()], { directories: dirs });
      const adapters = new DenoiserAdapters({ dir: loraDir });
      const s = new DenoisingStage({ catalog, sessions: fused, store, models: [], maxBatch: 4, adapters });
      const styled = await latent(s, await task('f1', 'test/sd', [{ name: 'ink', scale: 0.8 }]));
      const resolved = await catalog.resolve('test/sd');
      if (resolved.kind !== 'directory') throw new Error('test/sd is a model directory');
      const session = await resolved.directory.session(fused, 'unet', adapters.variant(resolved.directory));
      expect(session.rewrites?.reports.map((r) => r.pass)).toContain('fuse-attention');
      expect(worst(styled, await latent(s, await task('f2', 'test/sd-ink-fused')))).toBeLessThan(1e-4);
      expect(worst(styled, await latent(s, await task('f3', 'test/sd')))).toBeGreaterThan(0.01);
    } finally {
      await fused.close();
    }
  });

  it('a stage without an adapter directory, and a built-in model, refuse adapters', async () => {
    expect((await rejection(latent(stage(), await task('x', 'test/sd', [{ name: 'ink', scale: 1 }])))).message).toMatch(
      /serves no adapters/,
    );
    const builtin = await rejection(
      latent(
        stage({ adapters: new DenoiserAdapters({ dir: loraDir }) }),
        await task('y', 'diffmesh/tiny-shapes', [{ name: 'ink', scale: 1 }]),
      ),
    );
    expect(builtin.field).toBe('adapters[0].name');
    expect(builtin.message).toMatch(/takes no adapters \(only model directories do\)/);
  });
});
