import { afterEach, describe, expect, it } from 'vitest';
import { Code } from '@diffmesh/core';
import { SchedulerConfigSchema } from './config.js';
import { Fixtures, HeldInstance, newScheduler, outcome, refusal } from './fixtures/stages.js';

const fx = new Fixtures();
afterEach(() => fx.close());

describe('admission: timeout_ms', async () => {
  it('refuses a timeout a timer cannot hold (2^31 ms or more) naming timeout_ms, and accepts nothing', async () => {
    const s = newScheduler();
    s.addInstance(new HeldInstance('enc-1'));
    expect(await refusal(s, { timeoutMs: 3_000_000_000 })).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      reason: 'INVALID_PARAMETER',
      metadata: { field: 'timeout_ms' },
    });
    expect(s.inFlightCount()).toBe(0);
    // A valid uint32 on the wire, refused the same way.
    expect(await fx.submitOverGrpc(s, { timeoutMs: 2 ** 31 })).toMatchObject({
      code: Code.INVALID_ARGUMENT,
      metadata: { field: 'timeout_ms' },
    });
    expect(s.inFlightCount()).toBe(0);
  });

  it('runs a request with the longest timeout it takes', async () => {
    const s = newScheduler();
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' }, timeoutMs: 2 ** 31 - 1 })).context.reqId;
    await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(1);
    inst.finish(0);
    expect(await outcome(s, id)).toBe('completed');
  });

  it('refuses service timeouts a timer cannot hold in the configuration', () => {
    for (const field of ['defaultTimeoutMs', 'stageTimeoutMs', 'retryBackoffMs']) {
      expect(SchedulerConfigSchema.safeParse({ [field]: 2 ** 31 }).success, field).toBe(false);
      expect(SchedulerConfigSchema.safeParse({ [field]: 2 ** 31 - 1 }).success, field).toBe(true);
    }
  });
});

describe('admission: request_id', async () => {
  it('refuses a request id the tensor store would refuse (":" in it) or that is too long, naming request_id', async () => {
    const s = newScheduler();
    s.addInstance(new HeldInstance('enc-1', { capacity: 10 }));
    const bad = { code: Code.INVALID_ARGUMENT, reason: 'INVALID_PARAMETER', metadata: { field: 'request_id' } };
    expect(await refusal(s, { requestId: 'tenant:42' })).toMatchObject(bad);
    expect(await refusal(s, { requestId: 'x'.repeat(60_000) })).toMatchObject(bad);
    expect(await refusal(s, { requestId: 'é'.repeat(129) })).toMatchObject(bad);
    expect(await fx.submitOverGrpc(s, { requestId: 'a:b' })).toMatchObject(bad);
    expect(s.inFlightCount()).toBe(0);
    expect(s.recentRequests()).toHaveLength(0);
  });

  it('accepts a client request id of up to 128 characters', async () => {
    const s = newScheduler();
    s.addInstance(new HeldInstance('enc-1'));
    const id = 'é'.repeat(128);
    expect((await s.submit({ model: 'm1', params: { prompt: 'x' }, requestId: id })).context.reqId).toBe(id);
  });
});
