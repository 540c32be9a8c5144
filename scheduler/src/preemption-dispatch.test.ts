/**
 * Preemption and running deadlines through the dispatcher, in process: a stepped handler (a
 * modelled denoiser that keeps a checkpoint where it is preempted) on a one-slot pool.
 */
import { describe, expect, it } from 'vitest';
import { Code, preemptedError, type ObjectRef, type RequestEvent, type StageHandler, type StageTask } from '@diffmesh/core';
import { end, log, newScheduler } from './fixtures/stages.js';
import { LocalInstance } from './local-instance.js';
import { PlanRegistry } from './plans/registry.js';
import type { Scheduler } from './scheduler.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A ref standing for a checkpoint at `step` (the handler resumes from the step it names). */
const checkpointRef = (reqId: string, step: number): ObjectRef => ({
  objectId: `${reqId}:ckpt:${step}`,
  ownerAddress: 'memory',
  ownerNodeId: 'n',
  shape: [1],
  dtype: 'uint8',
  sizeBytes: 1,
  createdAt: Date.now(),
  name: 'ckpt',
  ttlMs: 0,
  checksum: 'crc32c:00000000',
  inlineData: new Uint8Array([step]),
});

/** `steps` steps of `stepMs`; resumes from a checkpoint input; stops at a step boundary when preempted. */
function stepped(
  stepMs: number,
  runs: Array<{ task: StageTask; from: number }>,
  stage: StageHandler['stage'] = 'text_encoding',
): StageHandler {
  return {
    stage,
    models: () => [],
    async execute(task, ctx) {
      const total = Number(task.params.numInferenceSteps) || 10;
      const from = task.inputs.ckpt?.inlineData?.[0] ?? 0;
      runs.push({ task, from });
      for (let i = from; i < total; i += 1) {
        ctx.signal.throwIfAborted();
        await sleep(stepMs);
        if (ctx.preempt?.aborted && i + 1 < total) {
          ctx.onProgress({ step: i + 1, totalSteps: total, checkpoint: { ckpt: checkpointRef(task.reqId, i + 1) }, preempted: true });
          throw preemptedError(i + 1, total);
        }
        ctx.onProgress({ step: i + 1, totalSteps: total });
      }
      return { outputs: {} };
    },
  };
}

async function events(s: Scheduler, reqId: string): Promise<RequestEvent[]> {
  const out: RequestEvent[] = [];
  for await (const e of s.watch(reqId)) out.push(e);
  return out;
}

describe('preemption through the dispatcher', () => {
  it('a higher priority takes the slot at the next step; the preempted task resumes from that step, not a failed try', async () => {
    const runs: Array<{ task: StageTask; from: number }> = [];
    const s = newScheduler({ preemptMinRunMs: 50, maxAttempts: 1 });
    s.addInstance(new LocalInstance('enc-1', 'enc', stepped(20, runs), 1, log));
    const long = await s.submit({ model: 'm1', params: { prompt: 'long', numInferenceSteps: 40 } });
    while (runs.length === 0) await sleep(5);
    await sleep(150);
    const short = await s.submit({ model: 'm1', params: { prompt: 'short', numInferenceSteps: 2 }, priority: 10 });
    const [longEvents, shortEvents] = await Promise.all([events(s, long.context.reqId), events(s, short.context.reqId)]);
    expect(longEvents.at(-1)?.type).toBe('completed');
    expect(shortEvents.at(-1)?.type).toBe('completed');
    const preempted = longEvents.filter((e) => e.type === 'preempted');
    expect(preempted).toMatchObject([{ reason: 'priority 10 > 0', attempt: 1, totalSteps: 40 }]);
    const at = preempted[0].step;
    // The short one ran between the long one's two tries; the second try resumed at the step it stopped at.
    expect(runs.map((r) => [r.task.reqId, r.task.attempt, r.from])).toEqual([
      [long.context.reqId, 1, 0],
      [short.context.reqId, 1, 0],
      [long.context.reqId, 2, at],
    ]);
    // Not a failure (maxAttempts 1 would have failed it), and the next try's `queued` is in its history.
    const state = await s.get(long.context.reqId);
    expect(state.context.status).toBe('completed');
    expect(longEvents.filter((e) => e.type === 'queued').length).toBe(2);
  });

  it('does not preempt before the minimum run, nor for an equal priority without a deadline', async () => {
    const runs: Array<{ task: StageTask; from: number }> = [];
    const s = newScheduler({ preemptMinRunMs: 10_000 });
    s.addInstance(new LocalInstance('enc-1', 'enc', stepped(10, runs), 1, log));
    const long = await s.submit({ model: 'm1', params: { prompt: 'long', numInferenceSteps: 20 } });
    while (runs.length === 0) await sleep(5);
    await s.submit({ model: 'm1', params: { prompt: 'urgent', numInferenceSteps: 2 }, priority: 10 });
    await s.submit({ model: 'm1', params: { prompt: 'same', numInferenceSteps: 2 } });
    const e = await events(s, long.context.reqId);
    expect(e.filter((x) => x.type === 'preempted')).toEqual([]);
    expect(runs[0].task.reqId).toBe(long.context.reqId);
  });

  it('with --preemption off, a running task keeps its slot', async () => {
    const runs: Array<{ task: StageTask; from: number }> = [];
    const s = newScheduler({ preemption: false, preemptMinRunMs: 0 });
    s.addInstance(new LocalInstance('enc-1', 'enc', stepped(10, runs), 1, log));
    const long = await s.submit({ model: 'm1', params: { prompt: 'long', numInferenceSteps: 20 } });
    while (runs.length === 0) await sleep(5);
    await sleep(50);
    await s.submit({ model: 'm1', params: { prompt: 'urgent', numInferenceSteps: 2 }, priority: 10 });
    expect((await events(s, long.context.reqId)).filter((x) => x.type === 'preempted')).toEqual([]);
  });
});

describe('deadlines of running requests', () => {
  it('fails a running request early with DEADLINE_UNREACHABLE when its measured speed says it ends past its deadline (refuse)', async () => {
    const runs: Array<{ task: StageTask; from: number }> = [];
    const s = newScheduler({ deadlinePolicy: 'refuse' });
    s.addInstance(new LocalInstance('enc-1', 'enc', stepped(50, runs), 1, log));
    const deadline = Date.now() + 1500;
    // 40 steps of 50 ms: 2 s, past its deadline; known after a few steps.
    const { context } = await s.submit({ model: 'm1', params: { prompt: 'slow', numInferenceSteps: 40 }, deadline });
    const e = await end(s, context.reqId);
    expect(e).toMatchObject({ type: 'failed', error: { code: Code.DEADLINE_EXCEEDED, reason: 'DEADLINE_UNREACHABLE' } });
    expect((e as Extract<RequestEvent, { type: 'failed' }>).error.message).toMatch(
      /will not finish by its deadline: estimated \d+ ms \(\d+ text_encoding steps at \d+ ms\)/,
    );
    expect(e.at).toBeLessThan(deadline - 500);
  });

  it('lets it run to its deadline under best-effort', async () => {
    const runs: Array<{ task: StageTask; from: number }> = [];
    const s = newScheduler({ deadlinePolicy: 'best-effort' });
    s.addInstance(new LocalInstance('enc-1', 'enc', stepped(50, runs), 1, log));
    const deadline = Date.now() + 600;
    const { context } = await s.submit({ model: 'm1', params: { prompt: 'slow', numInferenceSteps: 40 }, deadline });
    const e = await end(s, context.reqId);
    expect(e).toMatchObject({ type: 'failed', error: { code: Code.DEADLINE_EXCEEDED, reason: 'TIMEOUT' } });
    expect(e.at).toBeGreaterThanOrEqual(deadline);
  });
});

describe('preemption for a deadline at risk', () => {
  it('an equal-priority task whose deadline the running one would make it miss takes the slot', async () => {
    // A denoising stage: its measured cost scales with steps (the estimate of the waiting task).
    const registry = PlanRegistry.fromEntries([
      {
        model: 'm1',
        modalities: ['text-to-image'],
        stages: [{ name: 'denoising', pool: 'enc' }],
        defaults: { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 },
        constraints: { sizeMultiple: 8, maxWidth: 512, maxHeight: 512, maxFrames: 1 },
      },
    ]);
    const runs: Array<{ task: StageTask; from: number }> = [];
    const s = newScheduler({ preemptMinRunMs: 50, deadlinePolicy: 'best-effort' }, { registry });
    s.addInstance(new LocalInstance('enc-1', 'enc', stepped(20, runs, 'denoising'), 1, log));
    // Measured: a few short runs.
    for (let i = 0; i < 3; i += 1)
      await end(s, (await s.submit({ model: 'm1', params: { prompt: `warm ${i}`, numInferenceSteps: 5 } })).context.reqId);
    const long = await s.submit({ model: 'm1', params: { prompt: 'long', numInferenceSteps: 50 } });
    while (runs.length < 4) await sleep(5);
    await sleep(200);
    // ~100 ms of work, 600 ms to do it in; the long one has ~0.8 s left.
    const deadline = Date.now() + 600;
    const urgent = await s.submit({ model: 'm1', params: { prompt: 'urgent', numInferenceSteps: 5 }, deadline });
    const [longEvents, urgentEvents] = await Promise.all([events(s, long.context.reqId), events(s, urgent.context.reqId)]);
    expect(longEvents.filter((e) => e.type === 'preempted')).toMatchObject([{ reason: 'deadline at risk' }]);
    expect(longEvents.at(-1)?.type).toBe('completed');
    const done = urgentEvents.at(-1);
    expect(done?.type).toBe('completed');
    expect(done!.at).toBeLessThanOrEqual(deadline);
  });
});
