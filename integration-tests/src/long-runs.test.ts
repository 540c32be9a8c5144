// Model runs that take seconds, as real UNet and DiT steps do, through a mesh of processes: an
// SD-layout directory whose UNet runs extra matrix products per call (sd1-slow: about 1.5 s a
// call on 2 cores, the picture unchanged). The dit-svc runs its sessions in runner threads, so
// while a call runs it answers gRPC health checks, stays registered in NATS, and takes the
// scheduler's cancel, which ends the task without waiting for the rest of the request's steps.
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestModelDir, meanAbsoluteError, readTestModel, type TestModel } from '@diffmesh/models';
import { HealthChecker, type RequestEvent } from '@diffmesh/core';
import type { DiscoveryEvent } from '@diffmesh/discovery';
import { cancel, generate, last, startTestMesh, type TestMesh } from './harness.js';

let root: string;
let model: TestModel;
let id: string;
let t: TestMesh;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-long-runs-'));
  await buildTestModelDir('sd1-slow', path.join(root, 'sd1-slow'));
  id = await realpath(path.join(root, 'sd1-slow'));
  model = await readTestModel(id);
  t = await startTestMesh({ models: [id], modelDirectories: [id], stageArgs: ['--progress-interval-ms', '0'] });
}, 240_000);

afterAll(async () => {
  await t?.stop();
  await rm(root, { recursive: true, force: true });
});

const denoisingSteps = (events: RequestEvent[]) => events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length;

describe('denoiser calls of seconds through a mesh', () => {
  it('the dit-svc answers health checks and stays registered while a call runs, and the picture is right', async () => {
    const dit = t.mesh.supervisor.get('dit-svc-1');
    expect(dit?.address).toBeTruthy();
    const health = new HealthChecker(dit?.address as string);
    const downs: DiscoveryEvent[] = [];
    const off = t.mesh.discovery.subscribe((e) => void (e.type === 'down' && downs.push(e)), { replay: false });
    // Health checks in a row, each between the same two denoising steps (the same model call):
    // a stage that ran the call on its main thread would answer only once the call was over.
    const windows: boolean[] = [];
    const events: RequestEvent[] = [];
    let checking: Promise<void> | undefined;
    try {
      const req = { prompt: 'a red cat', negativePrompt: 'blue texture', guidanceScale: 2, numInferenceSteps: 6, seed: '5' };
      const all = await generate(t.client, { model: id, params: req }, (e) => {
        events.push(e);
        if (e.type !== 'progress' || e.stage !== 'denoising' || checking || windows.length >= 3) return;
        checking = (async () => {
          const before = denoisingSteps(events);
          for (let i = 0; i < 5; i += 1) expect(await health.check()).toBe('SERVING');
          windows.push(denoisingSteps(events) === before);
          checking = undefined;
        })();
      });
      await checking;
      const end = last(all);
      if (end.type !== 'completed') throw new Error(JSON.stringify(end));
      // At least one run of five checks fitted inside a single model call.
      expect(windows).toContain(true);
      expect(downs.filter((d) => d.instance.pool === dit?.name || d.instance.id === 'dit-svc-1')).toEqual([]);
      const { data } = await t.store.get(end.outputs.pixels);
      expect(meanAbsoluteError(data, model.expectedImage(req).data)).toBeLessThanOrEqual(1);
    } finally {
      off();
      health.close();
    }
  });

  it('a cancel ends the running task within about one model call', async () => {
    let stepsAtCancel = -1;
    let cancelled: Promise<unknown> | undefined;
    const events: RequestEvent[] = [];
    const all = await generate(
      t.client,
      { model: id, params: { prompt: 'a green cat', guidanceScale: 2, numInferenceSteps: 20, seed: '6' } },
      (e) => {
        events.push(e);
        // Cancel once the first step is done: the second call is running.
        if (cancelled || e.type !== 'progress' || e.stage !== 'denoising') return;
        stepsAtCancel = denoisingSteps(events);
        cancelled = cancel(t.client, e.reqId);
      },
    );
    await cancelled;
    expect(last(all).type).toBe('cancelled');
    // The call running when the cancel came may report its step; no further step starts.
    expect(stepsAtCancel).toBeGreaterThanOrEqual(1);
    expect(denoisingSteps(all)).toBeLessThanOrEqual(stepsAtCancel + 1);
  });
});
