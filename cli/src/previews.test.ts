import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestModelDirs, defaultModelsRoot } from '@diffmesh/models';
import { decodePng } from '@diffmesh/media';
import { silentLogger, type GenerationParams, type RequestEvent } from '@diffmesh/core';
import { startEmbedded, type Embedded } from './embedded.js';

// Live previews through the embedded pipeline: the denoising stage sends a small PNG of its
// latent every N steps, the scheduler hands it to those watching, and nothing is stored.

let mesh: Embedded;
beforeAll(async () => {
  mesh = await startEmbedded({ modelRoots: [defaultModelsRoot()], intraOpThreads: 1, maxBatch: 16, log: silentLogger() });
});
afterAll(async () => {
  await mesh.close();
});

type Preview = Extract<RequestEvent, { type: 'preview' }>;

async function run(params: Partial<GenerationParams> & { prompt: string }, model = 'diffmesh/tiny-shapes') {
  const { context } = await mesh.scheduler.submit({ model, params });
  const events: RequestEvent[] = [];
  for await (const e of mesh.scheduler.watch(context.reqId)) events.push(e);
  const last = events.at(-1);
  if (last?.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(last)}`);
  const { data } = await mesh.store.get(last.outputs.pixels);
  const pixels = Uint8Array.from(data);
  const stored = (await mesh.scheduler.requests.read(context.reqId))?.events ?? [];
  await mesh.store.deleteRequest(context.reqId);
  return { events, previews: events.filter((e): e is Preview => e.type === 'preview'), pixels, stored };
}

describe('live previews', () => {
  it('come every N steps (and after the last) as PNGs of the latent, and are not stored', async () => {
    const { previews, stored, events, pixels } = await run({
      prompt: 'a red circle on a blue background',
      width: 128,
      height: 96,
      numInferenceSteps: 7,
      seed: '9',
      preview: { everySteps: 2, maxSide: 256 },
    });
    expect(previews.map((p) => [p.step, p.totalSteps])).toEqual([
      [2, 7],
      [4, 7],
      [6, 7],
      [7, 7],
    ]);
    for (const p of previews) {
      expect(p).toMatchObject({ stage: 'denoising', stageIndex: 1, mediaType: 'image/png', width: 16, height: 12 });
      const png = decodePng(p.data);
      expect([png.width, png.height]).toEqual([16, 12]);
    }
    // Each comes after its step's progress event or before the next one: in step order.
    const order = events.filter((e) => e.type === 'preview' || e.type === 'progress').map((e) => `${e.type}:${(e as Preview).step}`);
    expect(order.indexOf('preview:2')).toBeLessThan(order.indexOf('progress:4'));
    // Ephemeral: the stored event log has none.
    expect(stored.some((e) => e.type === 'preview')).toBe(false);
    // The last preview is the picture at 1/8 (tiny-shapes' latent is the image; its decoder
    // upsamples it): each preview pixel is close to the result's pixel at the cell's centre.
    const last = decodePng(previews.at(-1)!.data);
    let diff = 0;
    for (let y = 0; y < 12; y += 1) {
      for (let x = 0; x < 16; x += 1) {
        for (let c = 0; c < 3; c += 1) diff += Math.abs(last.rgb[(y * 16 + x) * 3 + c] - pixels[((y * 8 + 4) * 128 + x * 8 + 4) * 3 + c]);
      }
    }
    expect(diff / (16 * 12 * 3)).toBeLessThan(12);
  });

  it('are off by default', async () => {
    const { previews, events } = await run({ prompt: 'a green square', width: 64, height: 64, numInferenceSteps: 3 });
    expect(previews).toEqual([]);
    expect(events.filter((e) => e.type === 'progress' && e.stage === 'denoising')).toHaveLength(3);
  });

  it('are no larger than max_side (sampled down, never up)', async () => {
    const { previews } = await run({
      prompt: 'a blue triangle',
      width: 256,
      height: 128,
      numInferenceSteps: 2,
      preview: { everySteps: 1, maxSide: 16 },
    });
    expect(previews.map((p) => [p.width, p.height])).toEqual([
      [16, 8],
      [16, 8],
    ]);
  });

  it('work for the synthetic DiT models (video: the first frame)', async () => {
    const { previews } = await run(
      { prompt: 'a cat', width: 64, height: 64, numFrames: 5, numInferenceSteps: 2, preview: { everySteps: 1, maxSide: 256 } },
      'diffmesh/synthetic-dit-video',
    );
    expect(previews).toHaveLength(2);
    expect(decodePng(previews[0].data)).toMatchObject({ width: 8, height: 8 });
  });

  it('refuse a bad every_steps or max_side, naming the field', async () => {
    await expect(
      mesh.scheduler.submit({ model: 'diffmesh/tiny-shapes', params: { prompt: 'x', preview: { everySteps: 1.5, maxSide: 256 } } }),
    ).rejects.toThrow(/preview\.every_steps/);
    await expect(
      mesh.scheduler.submit({ model: 'diffmesh/tiny-shapes', params: { prompt: 'x', preview: { everySteps: 201, maxSide: 256 } } }),
    ).rejects.toThrow(/preview\.every_steps/);
    await expect(
      mesh.scheduler.submit({ model: 'diffmesh/tiny-shapes', params: { prompt: 'x', preview: { everySteps: 1, maxSide: 4 } } }),
    ).rejects.toThrow(/preview\.max_side/);
  });
});

describe('live previews of model directories (diffusers layout)', () => {
  let root: string;
  let dirs: Record<string, string>;
  let dirMesh: Embedded;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'diffmesh-previews-'));
    dirs = await buildTestModelDirs(root, ['sd1-epsilon', 'flux-schnell']);
    dirMesh = await startEmbedded({
      modelRoots: [],
      modelDirectories: Object.values(dirs),
      intraOpThreads: 1,
      maxBatch: 8,
      log: silentLogger(),
    });
  }, 120_000);
  afterAll(async () => {
    await dirMesh?.close();
    await rm(root, { recursive: true, force: true });
  });

  it.each(['sd1-epsilon', 'flux-schnell'])(
    '%s: a preview per step at the latent size (FLUX unpacked from its 2×2 tokens)',
    async (name) => {
      const model = dirMesh.registry.lookup(dirs[name]).model as string;
      const { context } = await dirMesh.scheduler.submit({
        model,
        params: { prompt: 'a red cat', width: 64, height: 48, numInferenceSteps: 3, preview: { everySteps: 1, maxSide: 256 } },
      });
      const events: RequestEvent[] = [];
      for await (const e of dirMesh.scheduler.watch(context.reqId)) events.push(e);
      expect(events.at(-1)?.type).toBe('completed');
      const previews = events.filter((e): e is Preview => e.type === 'preview');
      // One per model call (a PNDM directory makes more calls than steps).
      const total = previews[0]?.totalSteps ?? 0;
      expect(total).toBeGreaterThanOrEqual(3);
      expect(previews.map((p) => p.step)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      for (const p of previews) expect(decodePng(p.data)).toMatchObject({ width: 8, height: 6 });
    },
  );
});
