/**
 * Earliest deadline first within a priority, on each backend whose order key carries the
 * deadline (memory, sqlite, redis); kept out of `conformance.ts` (JetStream orders a priority
 * by arrival: its per-kind consumers deliver in stream order).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RunningRedisServer } from '@diffmesh/testing';
import { newItem, newRecord } from './conformance.js';
import { MemoryStore } from './memory.js';
import { RedisStore } from './redis.js';
import { SqliteStore } from './sqlite.js';
import { deadlineKey, type SchedulerStore } from './types.js';

const OPTS = { retentionMs: 60_000, maxRetained: 10_000, leaseMs: 30_000 };
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const backends: Record<string, () => Promise<SchedulerStore>> = {
  memory: async () => new MemoryStore(OPTS),
  sqlite: async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-edf-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    return new SqliteStore({ file: path.join(dir, 'q.sqlite'), ...OPTS });
  },
  redis: async () => {
    const server: RunningRedisServer = await startRedisServer();
    cleanups.push(() => server.stop());
    return new RedisStore({ url: server.url, prefix: `edf${Date.now()}:`, ...OPTS });
  },
};

describe.each(Object.keys(backends))('earliest deadline first within a priority (%s)', (name) => {
  it('orders by priority, then deadline (none last), then arrival; a released item keeps its place', async () => {
    const s = await backends[name]();
    await s.start();
    cleanups.push(() => s.stop());
    const now = Date.now();
    // [id, priority, deadline (0 = none)], in arrival order.
    const plan: Array<[string, number, number]> = [
      ['none-a', 0, 0],
      ['late', 0, now + 60_000],
      ['high-none', 5, 0],
      ['early', 0, now + 10_000],
      ['none-b', 0, 0],
      ['high-early', 5, now + 20_000],
      ['mid', 0, now + 30_000],
    ];
    for (const [id, priority, deadline] of plan) {
      await s.admit(newRecord(id, { priority }), newItem(id, { priority, ...(deadline ? { deadline } : {}) }), 100);
    }
    const q = { pool: 'enc', fits: [{ queues: ['enc'] }], owner: 'test' };
    // A released item goes back to its place (before later deadlines).
    const first = await s.lease(q);
    expect(first?.item.reqId).toBe('high-early');
    await s.apply({ release: { lease: first!, delayMs: 0 } });
    const order: string[] = [];
    for (;;) {
      const l = await s.lease(q);
      if (!l) break;
      order.push(l.item.reqId);
      expect(l.item.deadline ?? 0).toBe(plan.find((p) => p[0] === l.item.reqId)![2]);
      await s.apply({ ack: l });
    }
    expect(order).toEqual(['high-early', 'high-none', 'early', 'mid', 'late', 'none-a', 'none-b']);
  });
});

describe('deadlineKey', () => {
  it('sorts as the deadlines do, none last', () => {
    const keys = [5, 1_700_000_000_000, 0, 42].map((d) => deadlineKey(d));
    expect([...keys].sort()).toEqual([deadlineKey(5), deadlineKey(42), deadlineKey(1_700_000_000_000), deadlineKey(undefined)]);
    expect(deadlineKey(0)).toBe(deadlineKey(undefined));
  });
});
