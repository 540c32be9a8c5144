// The per-pool options (`--kernels`, `--weights`) and the sessions they give: a denoiser's
// session loads the rewritten graph, other sessions of the same cache the file as it is.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@diffmesh/core';
import { SessionCache } from '../onnx-sessions.js';
import { stageServiceConfig } from '../stage-process.js';
import { encodeModel } from './onnx-model.js';
import { TinyGraph } from './fixtures/tiny-graph.js';

let dir: string;
let file: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-rewrites-'));
  file = path.join(dir, 'denoiser.onnx');
  // A linear layer of 64×512 values followed by the erf GELU.
  const g = new TinyGraph();
  const x = g.input('x', [2, 64]);
  const h = g.op('MatMul', [
    x,
    g.f32(
      Array.from({ length: 64 * 512 }, (_, i) => Math.sin(i * 0.01)),
      [64, 512],
    ),
  ]);
  const e = g.op('Erf', [g.op('Div', [h, g.f32([Math.SQRT2])])]);
  const y = g.op('Mul', [g.op('Mul', [h, g.op('Add', [e, g.f32([1])])]), g.f32([0.5])]);
  await writeFile(file, encodeModel(g.model(y)));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('--kernels and --weights', () => {
  const def = stageServiceConfig('dit-svc', 'DIFFMESH_DIT_');

  it('are read from flags and the environment, plain and as-is by default', () => {
    expect(loadConfig(def, { env: {}, argv: ['--pool', 'p', '--models-dirs', dir] })).toMatchObject({ kernels: 'plain', weights: 'as-is' });
    const cfg = loadConfig(def, {
      env: { DIFFMESH_DIT_WEIGHTS: 'int4' },
      argv: ['--pool', 'p', '--models-dirs', dir, '--kernels', 'fused'],
    });
    expect(cfg).toMatchObject({ kernels: 'fused', weights: 'int4' });
  });

  it('refuse an unknown value, naming the field', () => {
    expect(() => loadConfig(def, { env: {}, argv: ['--pool', 'p', '--models-dirs', dir, '--weights', 'int8'] })).toThrow(/weights/);
  });
});

describe('a session cache with graph rewrites', () => {
  it('rewrites the sessions asked for and leaves the file and the other sessions as they are', async () => {
    const bytes = await readFile(file);
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, graphRewrites: { kernels: 'fused', weights: 'int4' } });
    try {
      const denoiser = await sessions.get(file, { rewrite: true });
      const other = await sessions.get(file);
      expect(denoiser).not.toBe(other);
      expect(other.rewrites).toBeUndefined();
      expect(denoiser.rewrites?.reports.map((r) => `${r.pass}:${r.rewritten}`)).toEqual([
        'fuse-layer-norm:0',
        'fuse-attention:0',
        'fuse-gelu:1',
        'fuse-skip-layer-norm:0',
        'int4-weights:1',
      ]);
      expect(denoiser.rewrites?.weightBytesAfter).toBeLessThan((denoiser.rewrites?.weightBytesBefore ?? 0) / 5);
      const feeds = {
        x: new ort.Tensor(
          'float32',
          Float32Array.from({ length: 128 }, (_, i) => Math.cos(i)),
          [2, 64],
        ),
      };
      const a = (await other.run(feeds)).out.data as Float32Array;
      const b = (await denoiser.run(feeds)).out.data as Float32Array;
      let worst = 0;
      let peak = 0;
      for (let i = 0; i < a.length; i += 1) {
        worst = Math.max(worst, Math.abs(a[i] - b[i]));
        peak = Math.max(peak, Math.abs(a[i]));
      }
      // 4 bits (a step is 1/8 of a block's largest weight): near the output, not the same numbers;
      // a wrong packing gives errors of the output's own size.
      expect(worst).toBeGreaterThan(0);
      expect(worst / peak).toBeLessThan(0.25);
      expect(await readFile(file)).toEqual(bytes);
    } finally {
      await sessions.close();
    }
  });

  it('without rewrites configured, a denoiser shares the file’s session', async () => {
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
    try {
      expect(await sessions.get(file, { rewrite: true })).toBe(await sessions.get(file));
    } finally {
      await sessions.close();
    }
  });
});
