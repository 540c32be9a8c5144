import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos } from '@diffmesh/protos';
import { Code, TenantDirectory, fromWire, type DiffmeshError } from '@diffmesh/core';
import { directoryPolicy, type TenantLimits, type TenantPolicy } from './fair-share.js';
import { Fixtures, HeldInstance, newScheduler, outcome, twoModels } from './fixtures/stages.js';
import { schedulerServiceBinding } from './service.js';
import type { Scheduler } from './scheduler.js';
import { TenantQuotas } from './tenant-quotas.js';

/** Limits for the tenants named (none for the others), weight 1. */
function limited(limits: Record<string, TenantLimits>): TenantPolicy {
  return { weight: () => 1, limits: (t) => limits[t] ?? {} };
}

/** The cost of one request of the fixtures' plan: one text_encoding task at 64×64, 1 frame. */
const COST = 64 * 64;

async function submit(s: Scheduler, tenant: string): Promise<string | DiffmeshError> {
  try {
    return (await s.submit({ model: 'm1', params: { prompt: 'x' }, tenant })).context.reqId;
  } catch (err) {
    return err as DiffmeshError;
  }
}

describe('tenant limits at admission', async () => {
  it('refuses requests over a tenant’s requests per minute with TENANT_QUOTA and a Retry-After until its next one; other tenants go on', async () => {
    const refused: Array<[string, string]> = [];
    const s = newScheduler(
      {},
      { tenants: limited({ a: { requestsPerMinute: 2 } }), onRefused: (tenant, err) => refused.push([tenant, err.reason]) },
    );
    s.addInstance(new HeldInstance('enc-1', { capacity: 10 }));
    expect(typeof (await submit(s, 'a'))).toBe('string');
    expect(typeof (await submit(s, 'a'))).toBe('string');
    const err = (await submit(s, 'a')) as DiffmeshError;
    expect(err).toMatchObject({
      code: Code.RESOURCE_EXHAUSTED,
      reason: 'TENANT_QUOTA',
      metadata: { tenant: 'a', limit: 'requests_per_minute', value: '2' },
    });
    expect(err.message).toMatch(/tenant "a" is over its limit of 2 requests per minute/);
    // One request comes back every 30 s at 2 a minute.
    expect(err.retryAfterMs).toBeGreaterThan(29_000);
    expect(err.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(typeof (await submit(s, 'b'))).toBe('string');
    expect(refused).toEqual([['a', 'TENANT_QUOTA']]);
    await s.stop();
  });

  it('refuses a request while the tenant’s running tasks use its concurrent cost, and takes it again once they end', async () => {
    const s = newScheduler({}, { tenants: limited({ a: { concurrentCost: COST } }) });
    const inst = new HeldInstance('enc-1', { capacity: 4 });
    s.addInstance(inst);
    const first = (await submit(s, 'a')) as string;
    await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(1);
    expect(s.tenantUsage('a')).toEqual({ running: COST, queued: 0 });
    expect(await submit(s, 'a')).toMatchObject({
      code: Code.RESOURCE_EXHAUSTED,
      reason: 'TENANT_QUOTA',
      metadata: { tenant: 'a', limit: 'concurrent_cost' },
      retryAfterMs: expect.any(Number),
    });
    expect(typeof (await submit(s, 'b'))).toBe('string');
    inst.finish(0);
    expect(await outcome(s, first)).toBe('completed');
    expect(typeof (await submit(s, 'a'))).toBe('string');
    await s.stop();
  });

  it('refuses a request that would take the tenant’s waiting work past its queued cost; the waiting work counts once it ends', async () => {
    const s = newScheduler({}, { tenants: limited({ a: { queuedCost: 2 * COST } }) });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    const ids = [(await submit(s, 'a')) as string];
    await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(1);
    // One runs, two wait: the limit.
    ids.push((await submit(s, 'a')) as string, (await submit(s, 'a')) as string);
    expect(s.tenantUsage('a')).toEqual({ running: COST, queued: 2 * COST });
    const err = (await submit(s, 'a')) as DiffmeshError;
    expect(err).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'TENANT_QUOTA', metadata: { limit: 'queued_cost' } });
    expect(err.message).toMatch(/queued cost limit/);
    expect(err.retryAfterMs).toBeGreaterThan(0);
    // A cancelled request's waiting work is gone: room for one more.
    await s.cancel(ids[2]);
    expect(await outcome(s, ids[2])).toBe('cancelled');
    expect(typeof (await submit(s, 'a'))).toBe('string');
    await s.stop();
  });
});

const fx = new Fixtures();
afterEach(() => fx.close());

describe('tenant limits over gRPC', async () => {
  it("answers a request over its tenant's limit from the tenants file RESOURCE_EXHAUSTED with TENANT_QUOTA and a retry delay", async () => {
    const key = 'acme-key-0123456789abcdef';
    const tenants = TenantDirectory.fromConfig({ tenants: [{ name: 'acme', apiKeys: [key], limits: { requestsPerMinute: 1 } }] });
    const s = newScheduler({}, { tenants: directoryPolicy(tenants) });
    s.addInstance(new HeldInstance('enc-1', { capacity: 4 }));
    const address = await fx.server(schedulerServiceBinding(s, twoModels, undefined, { tenants }));
    const client = new (loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService)(address, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${key}`);
    const submit = (): Promise<DiffmeshError | undefined> =>
      new Promise((resolve) =>
        client.Submit({ model: 'm1', params: { prompt: 'x' } }, md, (err: grpc.ServiceError | null) =>
          resolve(err ? fromWire(err) : undefined),
        ),
      );
    try {
      expect(await submit()).toBeUndefined();
      const err = await submit();
      expect(err).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'TENANT_QUOTA', metadata: { tenant: 'acme' } });
      expect(err?.retryAfterMs).toBeGreaterThan(50_000);
    } finally {
      client.close();
      await s.stop();
    }
  });
});

describe('TenantQuotas', () => {
  it("suggests a Retry-After from the tenant's place in the queue: its cost ahead ÷ the rate its work finishes", () => {
    let now = 0;
    const q = new TenantQuotas(limited({ a: { queuedCost: 1000 } }), () => now);
    // 100 of a's cost finishes every second.
    for (let i = 0; i < 3; i += 1) {
      q.taskStarted('a', 100);
      q.taskEnded('a', 100);
      now += 1000;
    }
    now -= 1000;
    q.admit('r1', 'a', [600]);
    q.admit('r2', 'a', [400]);
    // 1000 waiting + 300 more > 1000: 300 must drain first, at 0.1 per ms.
    const err = (() => {
      try {
        q.admit('r3', 'a', [300]);
      } catch (e) {
        return e as DiffmeshError;
      }
      return undefined;
    })();
    expect(err?.retryAfterMs).toBe(3000);
    q.ended('r1');
    expect(() => q.admit('r3', 'a', [300])).not.toThrow();
    expect(q.usage('a')).toEqual({ running: 0, queued: 700 });
  });
});
