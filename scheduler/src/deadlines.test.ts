import { afterEach, describe, expect, it } from 'vitest';
import { Code, timestampToWire } from '@diffmesh/core';
import type { SubmitResponse__Output } from '@diffmesh/protos';
import { Fixtures, HeldInstance, end, newScheduler, refusal } from './fixtures/stages.js';
import type { Scheduler } from './scheduler.js';

const fx = new Fixtures();
afterEach(() => fx.close());

/** Runs one task of ~`ms` on `inst` so the scheduler has a measured run time for the pool. */
async function measured(s: Scheduler, inst: HeldInstance, ms: number): Promise<void> {
  const { context } = await s.submit({ model: 'm1', params: { prompt: 'warm' } });
  while (inst.tasks.length === 0) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, ms));
  inst.finish(inst.tasks.length - 1);
  await end(s, context.reqId);
}

describe('deadlines', () => {
  it('refuses a deadline in the past or beyond the longest timeout, naming the field, and accepts nothing', async () => {
    const s = newScheduler();
    s.addInstance(new HeldInstance('enc-1'));
    expect(await refusal(s, { deadline: Date.now() - 1000 })).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      reason: 'INVALID_PARAMETER',
      metadata: { field: 'deadline' },
    });
    expect(await refusal(s, { deadline: Number.NaN })).toMatchObject({ code: Code.INVALID_ARGUMENT, metadata: { field: 'deadline' } });
    expect(await fx.submitOverGrpc(s, { deadline: timestampToWire(Date.now() + 30 * 86_400_000) })).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      metadata: { field: 'deadline' },
    });
    expect(await fx.submitOverGrpc(s, { deadline: { seconds: 1, nanos: 0 } })).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      metadata: { field: 'deadline' },
    });
    expect(s.inFlightCount()).toBe(0);
  });

  it('keeps the deadline on the request (gRPC Timestamp) and fails it with DEADLINE_EXCEEDED when it passes while queued', async () => {
    const s = newScheduler({ deadlinePolicy: 'best-effort' });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    // The only slot is taken: the second request waits past its deadline.
    await s.submit({ model: 'm1', params: { prompt: 'blocker' } });
    const deadline = Date.now() + 150;
    const res = await fx.submitOverGrpc(s, { deadline: timestampToWire(deadline) });
    const reqId = (res as SubmitResponse__Output).reqId;
    expect((await s.get(reqId)).context.deadline).toBe(deadline);
    const e = await end(s, reqId);
    expect(e).toMatchObject({ type: 'failed', error: { code: Code.DEADLINE_EXCEEDED, reason: 'TIMEOUT' } });
    expect(e.at).toBeGreaterThanOrEqual(deadline);
  });

  it('refuses at admission a request the pool cannot finish in time by its measured run time (refuse policy), with the estimate', async () => {
    const s = newScheduler({ deadlinePolicy: 'refuse' });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    await measured(s, inst, 300);
    const err = await refusal(s, { deadline: Date.now() + 50 });
    expect(err).toMatchObject({ code: Code.DEADLINE_EXCEEDED, reason: 'DEADLINE_UNREACHABLE', metadata: { field: 'deadline' } });
    expect(err?.message).toMatch(/estimated \d+ ms \(text_encoding \d+ ms\) with \d+ ms left/);
    expect(Number(err?.metadata.estimate_ms)).toBeGreaterThanOrEqual(250);
    // A deadline it can make is accepted.
    expect(await refusal(s, { deadline: Date.now() + 10_000 })).toBeUndefined();
  });

  it('runs it anyway under best-effort', async () => {
    const s = newScheduler({ deadlinePolicy: 'best-effort' });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    await measured(s, inst, 300);
    expect(await refusal(s, { deadline: Date.now() + 50 })).toBeUndefined();
  });
});
