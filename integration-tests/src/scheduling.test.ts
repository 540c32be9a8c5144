import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultModelsRoot } from '@diffmesh/models';
import { Code, type RequestEvent } from '@diffmesh/core';
import { DEFAULT_PLANS_FILE } from '@diffmesh/scheduler';
import { cancel, generate, get, last, rejection, startTestMesh, submit, watch, type TestMesh } from './harness.js';

// Each test starts its own mesh of separate processes, shaped for what it checks.
let t: TestMesh | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const small = { width: 64, height: 64 };

function denoiseInstance(events: RequestEvent[]): string[] {
  return events.flatMap((e) => (e.type === 'stage_started' && e.stage === 'denoising' ? [e.instanceId] : []));
}

describe('scheduling across processes', () => {
  it('runs 20 concurrent requests of mixed priority in priority order on a one-slot DiT pool', async () => {
    // Queue order alone (preemption would let each higher priority take the slot as it arrives).
    t = await startTestMesh({ capacities: { 'dit-svc': 1 }, schedulerArgs: ['--preemption', 'off'] });
    const client = t.client;
    // A long request holds the only DiT slot while the others queue behind it.
    const blocker = await submit(client, { params: { prompt: 'a gray square', width: 256, height: 256, numInferenceSteps: 200 } });
    const priorities = Array.from({ length: 20 }, (_, i) => (i * 7) % 5); // 0..4, interleaved
    const ids: string[] = [];
    for (const [i, priority] of priorities.entries()) {
      // Enough steps that each DiT task takes several milliseconds: start times are ms.
      const r = await submit(client, { params: { prompt: `a red circle number ${i}`, ...small, numInferenceSteps: 16 }, priority });
      ids.push(r.reqId);
      // Let it reach the DiT queue before the next one, so the queue's arrival order is the
      // submission order and only the DiT queue's own ordering can sort them.
      while ((await get(client, r.reqId)).currentStageIndex !== 1) await new Promise((res) => setTimeout(res, 5));
    }
    expect((await get(client, blocker.reqId)).status).toBe('REQUEST_STATUS_RUNNING');
    // Free the slot: the queue now drains in its own order.
    await cancel(client, blocker.reqId);
    await Promise.all(ids.map((id) => watch(client, id)));
    const states = await Promise.all(ids.map((id) => get(client, id)));
    const started = states.map((s, i) => ({
      priority: priorities[i],
      index: i,
      at: Number(s.timings[1].startedAt?.seconds) * 1000 + Math.floor((s.timings[1].startedAt?.nanos ?? 0) / 1e6),
      nanos: s.timings[1].startedAt,
    }));
    expect(states.every((s) => s.status === 'REQUEST_STATUS_COMPLETED')).toBe(true);
    const order = [...started].sort((a, b) => a.at - b.at || a.index - b.index);
    const expected = [...started].sort((a, b) => b.priority - a.priority || a.index - b.index);
    expect(order.map((x) => x.priority)).toEqual(expected.map((x) => x.priority));
    // FIFO within a priority.
    for (const p of [0, 1, 2, 3, 4]) {
      const within = order.filter((x) => x.priority === p).map((x) => x.index);
      expect(within).toEqual([...within].sort((a, b) => a - b));
    }
  });

  it('finishes a request whose DiT instance is killed with SIGKILL mid-task', async () => {
    t = await startTestMesh({ capacities: { 'dit-svc': 1 } });
    await t.mesh.addStage({ service: 'dit-svc', pool: 'dit-tiny', models: ['diffmesh/tiny-shapes'], capacity: 1 });
    const mesh = t.mesh;
    let running = '';
    let killed = '';
    const events = await generate(t.client, { params: { prompt: 'a yellow circle', ...small, numInferenceSteps: 150 } }, (e) => {
      if (e.type === 'stage_started' && e.stage === 'denoising') running = e.instanceId;
      if (e.type === 'progress' && e.stage === 'denoising' && e.step >= 5 && !killed) {
        killed = running;
        mesh.supervisor.get(running)?.child.kill('SIGKILL');
      }
    });
    expect(killed).not.toBe('');
    expect(last(events).type).toBe('completed');
    const runs = denoiseInstance(events);
    expect(runs.length).toBe(2);
    expect(runs[0]).toBe(killed);
    expect(runs[1]).not.toBe(killed);
    const attempts = events.flatMap((e) => (e.type === 'stage_started' && e.stage === 'denoising' ? [e.attempt] : []));
    expect(attempts).toEqual([1, 2]);
  });

  it('resumes the task of a DiT killed with SIGKILL from its checkpoint, ending with the pixels of an uninterrupted run', async () => {
    t = await startTestMesh({ capacities: { 'dit-svc': 1 }, stageArgs: ['--checkpoint-every', '5'] });
    await t.mesh.addStage({ service: 'dit-svc', pool: 'dit-tiny', models: ['diffmesh/tiny-shapes'], capacity: 1 });
    const mesh = t.mesh;
    const spec = { params: { prompt: 'a cyan triangle top left', ...small, numInferenceSteps: 60, seed: '99' } };
    const pixels = async (events: RequestEvent[]): Promise<Buffer> => {
      const end = last(events);
      if (end.type !== 'completed') throw new Error(`request ended ${end.type}`);
      return Buffer.from((await t!.store.get(end.outputs.pixels)).data);
    };
    const whole = await pixels(await generate(t.client, spec));

    let running = '';
    let killed = '';
    const events = await generate(t.client, spec, (e) => {
      if (e.type === 'stage_started' && e.stage === 'denoising') running = e.instanceId;
      // After the checkpoint at step 10 (one every 5 steps), in the middle of the run.
      if (e.type === 'progress' && e.stage === 'denoising' && e.step >= 12 && !killed) {
        killed = running;
        mesh.supervisor.get(running)?.child.kill('SIGKILL');
      }
    });
    expect(killed).not.toBe('');
    expect(denoiseInstance(events)).toEqual([killed, expect.not.stringMatching(killed)]);
    // The second try went on from a checkpoint: its first step is past the first try's tenth.
    const retried = events.findIndex((e) => e.type === 'stage_started' && e.stage === 'denoising' && e.attempt === 2);
    const firstStepAfter = events.slice(retried).find((e) => e.type === 'progress' && e.stage === 'denoising');
    expect(firstStepAfter).toMatchObject({ type: 'progress' });
    expect((firstStepAfter as { step: number }).step).toBeGreaterThan(10);
    expect((await pixels(events)).equals(whole)).toBe(true);
  });

  it('answers RESOURCE_EXHAUSTED with a retry hint when a queue is full, and loses nothing accepted', async () => {
    t = await startTestMesh({ capacities: { 'encoder-svc': 1, 'dit-svc': 1 }, schedulerArgs: ['--max-queue-length', '2'] });
    // 16 submissions at once against a queue of 2 in front of a one-slot encoder.
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) =>
        submit(t!.client, { params: { prompt: `a blue square ${i}`, ...small, numInferenceSteps: 30 } }),
      ),
    );
    const accepted = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.reqId] : []));
    const rejected = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    expect(accepted.length).toBeGreaterThan(0);
    expect(rejected.length).toBeGreaterThan(0);
    expect(rejected[0]).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'QUEUE_FULL' });
    expect((rejected[0] as { retryAfterMs?: number }).retryAfterMs).toBeGreaterThan(0);
    const ends = await Promise.all(accepted.map((id) => watch(t!.client, id)));
    expect(ends.map((e) => last(e).type)).toEqual(accepted.map(() => 'completed'));
  });

  it('opens the breaker of an always-failing DiT instance while the healthy one takes the work', async () => {
    // A broken deployment: the same model with a corrupt denoiser file.
    const broken = await mkdtemp(path.join(tmpdir(), 'diffmesh-broken-'));
    try {
      await cp(path.join(defaultModelsRoot(), 'diffmesh'), path.join(broken, 'diffmesh'), { recursive: true });
      await writeFile(path.join(broken, 'diffmesh', 'tiny-shapes', 'denoiser.onnx'), 'not an onnx model');
      t = await startTestMesh({ capacities: { 'dit-svc': 1 } });
      await t.mesh.addStage(
        { service: 'dit-svc', pool: 'dit-tiny', models: ['diffmesh/tiny-shapes'], capacity: 1, modelsDirs: [broken], lazy: true },
        'dit-broken',
      );
      const runs: string[][] = [];
      for (let i = 0; i < 10; i += 1) {
        const events = await generate(t.client, { params: { prompt: `a pink circle ${i}`, ...small, numInferenceSteps: 2 } });
        expect(last(events).type).toBe('completed');
        runs.push(denoiseInstance(events));
      }
      const onBroken = runs.flat().filter((id) => id === 'dit-broken').length;
      expect(onBroken).toBeGreaterThan(0); // it was tried…
      expect(onBroken).toBeLessThanOrEqual(4); // …until its breaker opened
      expect(runs.slice(-4).flat()).not.toContain('dit-broken');
      const schedulerLog = await readFile(path.join(t.mesh.logDir, 'scheduler.log'), 'utf8');
      expect(schedulerLog).toMatch(/"instance":"dit-broken".*"msg":"breaker opened"/);
    } finally {
      await rm(broken, { recursive: true, force: true });
    }
  });

  it('uses only instances whose version satisfies a plan’s pinned range', async () => {
    const plans = await mkdtemp(path.join(tmpdir(), 'diffmesh-plans-'));
    try {
      const base = await readFile(DEFAULT_PLANS_FILE, 'utf8');
      // Pin tiny-shapes' denoising to >=2.0.0, and add a model pinned to a range no one runs.
      const pinned = base.replace(/(model: diffmesh\/tiny-shapes[\s\S]*?name: denoising, pool: dit-tiny)/, '$1, version: ">=2.0.0"');
      expect(pinned).not.toBe(base);
      const file = path.join(plans, 'plans.yaml');
      await writeFile(file, pinned);
      t = await startTestMesh({ schedulerArgs: ['--plans', file] });
      await t.mesh.addStage(
        { service: 'dit-svc', pool: 'dit-tiny', models: ['diffmesh/tiny-shapes'], capacity: 4, args: ['--version', '2.1.0'] },
        'dit-v2',
      );
      for (let i = 0; i < 5; i += 1) {
        const events = await generate(t.client, { params: { prompt: `a cyan triangle ${i}`, ...small, numInferenceSteps: 2 } });
        expect(last(events).type).toBe('completed');
        expect(denoiseInstance(events)).toEqual(['dit-v2']);
      }
      await t.mesh.supervisor.stop('dit-v2');
      // Only the 0.1.0 instance is left: the pinned plan cannot run.
      const deadline = Date.now() + 10_000;
      let err;
      while (Date.now() < deadline) {
        err = await rejection(submit(t.client, { params: { prompt: 'x', ...small } })).catch(() => undefined);
        if (err?.reason === 'NO_MATCHING_VERSION') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(err).toMatchObject({ code: Code.UNAVAILABLE, reason: 'NO_MATCHING_VERSION' });
      expect(err?.message).toMatch(/>=2\.0\.0/);
    } finally {
      await rm(plans, { recursive: true, force: true });
    }
  });
});
