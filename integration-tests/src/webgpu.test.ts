// The GPU path without a GPU: onnxruntime-node's WebGPU provider on SwiftShader, the software
// Vulkan in Debian's chromium package (`npm test` installs it; VK_ICD_FILENAMES points Dawn at
// it). The built-in models and the float32 test directories give the CPU's pictures within
// 1/255, embedded and through `diffmesh up` with a WebGPU DiT pool. SwiftShader has no
// shader-f16: float16 directories are skipped with the adapter's reason, and a stage asked to
// run one on WebGPU alone fails with a clear error.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalMesh } from '@diffmesh/cli';
import { schedulerStub } from '@diffmesh/client';
import { silentLogger, type GenerationParams } from '@diffmesh/core';
import { InlineTensorStore, RemoteTensorStore } from '@diffmesh/tensor-client';
import { buildTestModelDir, defaultModelsRoot } from '@diffmesh/models';
import { SessionCache, type ExecutionProvider } from '@diffmesh/stage-host';
import { embeddedPixels, generate, last } from './harness.js';

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
const here = existsSync(SWIFTSHADER);
if (here) process.env.VK_ICD_FILENAMES = SWIFTSHADER;

/** Float32 test directories (the fp16 one is handled apart). */
const DIRS = ['sd1-epsilon', 'sdxl', 'flux', 'sd3'] as const;

let root: string;
const dirs: Record<string, string> = {};
let f16: { supported: boolean; reason: string } = { supported: false, reason: '' };

beforeAll(async () => {
  if (!here) return;
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-webgpu-'));
  for (const name of [...DIRS, 'sd1-fp16']) {
    await buildTestModelDir(name, path.join(root, name));
    dirs[name] = await realpath(path.join(root, name));
  }
  const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, executionProviders: ['webgpu'] });
  const [probe] = await sessions.probe();
  await sessions.close();
  f16 = { supported: probe.f16 === true, reason: probe.f16Error ?? '' };
}, 120_000);

/** Largest difference of one channel of one pixel. */
function maxDiff(a: Uint8Array, b: Uint8Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i += 1) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/** Pixels of one request, embedded, on the given providers. */
async function embedded(
  providers: ExecutionProvider[],
  model: string,
  params: Partial<GenerationParams> & { prompt: string },
  directories: string[] = [],
): Promise<Uint8Array> {
  const [pixels] = await embeddedPixels([params], { model, modelDirectories: directories, executionProviders: providers });
  return pixels;
}

describe.skipIf(!here)('WebGPU on SwiftShader (no GPU)', () => {
  it.each([
    ['diffmesh/tiny-shapes', { prompt: 'a red circle on a blue background', width: 64, height: 64, numInferenceSteps: 4, seed: '3' }],
    ['diffmesh/synthetic-dit-image', { prompt: 'a cat', width: 64, height: 64, numInferenceSteps: 2, seed: '3' }],
    ['diffmesh/synthetic-dit-video', { prompt: 'a cat', width: 64, height: 64, numFrames: 5, numInferenceSteps: 2, seed: '3' }],
  ] as const)('built-in %s: the CPU picture within 1/255', async (model, params) => {
    const cpu = await embedded(['cpu'], model, params);
    const gpu = await embedded(['webgpu'], model, params);
    expect(gpu.length).toBe(cpu.length);
    expect(maxDiff(gpu, cpu)).toBeLessThanOrEqual(1);
  });

  it.each(DIRS)('test directory %s (float32): the CPU picture within 1/255', async (name) => {
    const guidance = name === 'flux' ? 3.5 : 2;
    const params = { prompt: 'a red cat', guidanceScale: guidance, numInferenceSteps: 3, seed: '4', width: 64, height: 64 };
    const cpu = await embedded(['cpu'], dirs[name], params, [dirs[name]]);
    const gpu = await embedded(['webgpu'], dirs[name], params, [dirs[name]]);
    expect(gpu.length).toBe(cpu.length);
    expect(maxDiff(gpu, cpu)).toBeLessThanOrEqual(1);
  });

  it('float16 directory on an adapter without shader-f16: a clear error on WebGPU alone, the CPU when it follows in the order', async (ctx) => {
    if (f16.supported) ctx.skip('this adapter has shader-f16: the float16 directory runs on it (compared in the bench)');
    const params = { prompt: 'a red cat', guidanceScale: 2, numInferenceSteps: 2, seed: '4', width: 64, height: 64 };
    const err = await embedded(['webgpu'], dirs['sd1-fp16'], params, [dirs['sd1-fp16']]).catch((e: unknown) => e);
    expect(String((err as Error).message)).toMatch(/float16 and the WebGPU adapter has no shader-f16/);
    // With the CPU after WebGPU, the float16 graphs go to the CPU (the float32 ones would stay on WebGPU).
    const fallback = await embedded(['webgpu', 'cpu'], dirs['sd1-fp16'], params, [dirs['sd1-fp16']]);
    const cpu = await embedded(['cpu'], dirs['sd1-fp16'], params, [dirs['sd1-fp16']]);
    expect(maxDiff(fallback, cpu)).toBe(0);
    expect(f16.reason).toMatch(/requires f16 but the device does not support it/);
  });

  it('diffmesh up with a WebGPU DiT pool gives the embedded CPU picture', async () => {
    const mesh = await startLocalMesh({
      modelsDirs: [defaultModelsRoot()],
      models: ['diffmesh/tiny-shapes'],
      log: silentLogger(),
      executionProviders: { dit: ['webgpu'] },
    });
    const client = schedulerStub(mesh.schedulerAddress);
    try {
      const params = { prompt: 'a green square on a yellow background', width: 64, height: 64, numInferenceSteps: 4, seed: '9' };
      const events = await generate(client, { params });
      const end = last(events);
      if (end.type !== 'completed') throw new Error(JSON.stringify(end));
      const stages = events.flatMap((e) => (e.type === 'stage_started' ? [e.stage] : []));
      expect(stages).toContain('denoising');
      // The DiT process says which provider its sessions got.
      const ditLog = await readFile(path.join(mesh.logDir, 'dit-svc-1.log'), 'utf8');
      expect(ditLog).toMatch(/"provider":"webgpu"[^\n]*"msg":"model session on webgpu"/);
      const store = new InlineTensorStore(
        new RemoteTensorStore({ address: mesh.tensorAddress, nodeId: 'test-client', log: silentLogger(), sameNodeReads: false }),
      );
      const { data } = await store.get(end.outputs.pixels).finally(() => store.close());
      const cpu = await embedded(['cpu'], 'diffmesh/tiny-shapes', params);
      expect(maxDiff(data, cpu)).toBeLessThanOrEqual(1);
    } finally {
      client.close();
      await mesh.stop();
    }
  });
});
