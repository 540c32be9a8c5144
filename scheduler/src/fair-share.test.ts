import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from './storage/sqlite.js';
import { FairShare, type TenantPolicy } from './fair-share.js';
import { HeldInstance, newScheduler, outcome } from './fixtures/stages.js';
import type { Scheduler } from './scheduler.js';
import { tenantRank } from './storage/types.js';

/** Weights by tenant (1 for the others), no limits. */
function weights(w: Record<string, number>): TenantPolicy {
  return { weight: (t) => w[t] ?? 1, limits: () => ({}) };
}

/** Submits requests `{tenant}-{n}` (prompt = the id) for each tenant in turn, as listed. */
async function submitAll(s: Scheduler, spec: Array<[tenant: string, count: number, priority?: number]>): Promise<string[]> {
  const ids: string[] = [];
  for (const [tenant, count, priority = 0] of spec) {
    for (let i = 0; i < count; i += 1) {
      const id = `${tenant}-p${priority}-${ids.filter((x) => x.startsWith(`${tenant}-`)).length}`;
      ids.push((await s.submit({ model: 'm1', params: { prompt: id }, tenant, priority, requestId: id })).context.reqId);
    }
  }
  return ids;
}

/** Lets the one-slot instance run `n` tasks, one after another; answers the requests in the order they ran. */
async function runInOrder(inst: HeldInstance, n: number): Promise<string[]> {
  for (let i = 0; i < n; i += 1) {
    await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(i + 1);
    inst.finish(i);
  }
  return inst.tasks.map((t) => t.reqId);
}

const tenantOf = (id: string): string => id.slice(0, id.indexOf('-'));

/**
 * Where a light tenant's 2 requests run (0 = first) on a one-slot instance, sent after `heavy`
 * requests of a flooding tenant (whose first starts at once); every request completes.
 */
async function lightPlaces(s: Scheduler, heavy: number): Promise<number[]> {
  const inst = new HeldInstance('enc-1');
  s.addInstance(inst);
  await submitAll(s, [
    ['heavy', heavy],
    ['light', 2],
  ]);
  const order = await runInOrder(inst, heavy + 2);
  for (const id of order) expect(await outcome(s, id)).toBe('completed');
  return order.flatMap((id, i) => (tenantOf(id) === 'light' ? [i] : []));
}

describe('fair share across tenants', async () => {
  it("serves a light tenant's requests at once while another tenant's flood waits (first come, first served makes it wait behind the flood)", async () => {
    const fair = newScheduler();
    expect(await lightPlaces(fair, 20)).toEqual([1, 3]);
    await fair.stop();
    const fcfs = newScheduler({}, { fairShare: false });
    expect(await lightPlaces(fcfs, 20)).toEqual([20, 21]);
    await fcfs.stop();
  });

  it('keeps the order on a durable store the schedulers share (sqlite)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-fair-'));
    try {
      const requests = new SqliteStore({ file: path.join(dir, 's.sqlite'), retentionMs: 60_000, maxRetained: 1000, leaseMs: 10_000 });
      const s = newScheduler({}, { requests });
      await s.start();
      expect(await lightPlaces(s, 10)).toEqual([1, 3]);
      await s.stop();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives two saturating tenants slots in proportion to their weights (2:1)', async () => {
    const s = newScheduler({}, { tenants: weights({ gold: 2, bronze: 1 }) });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    await submitAll(s, [
      ['bronze', 40],
      ['gold', 40],
    ]);
    // While both have requests waiting, each run of three goes two to gold and one to bronze.
    const gold = (await runInOrder(inst, 60)).filter((id) => tenantOf(id) === 'gold').length;
    expect(gold).toBeGreaterThanOrEqual(39);
    expect(gold).toBeLessThanOrEqual(41);
    await s.stop();
  });

  it("orders a tenant's own requests by priority, then arrival", async () => {
    const s = newScheduler();
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    await submitAll(s, [
      ['a', 1],
      ['a', 2],
      ['a', 1, 5],
      ['b', 2],
    ]);
    const order = await runInOrder(inst, 6);
    expect(order.filter((id) => tenantOf(id) === 'a')).toEqual(['a-p0-0', 'a-p5-3', 'a-p0-1', 'a-p0-2']);
    await s.stop();
  });
});

describe('FairShare (start-time fair queuing)', () => {
  /** `n` dispatches from a pool where every tenant in `backlogged` always has a task waiting. */
  function simulate(fair: FairShare, backlogged: string[], n: number, cost: (t: string) => number = () => 1): string[] {
    const out: string[] = [];
    for (let i = 0; i < n; i += 1) {
      const order = fair.order('p');
      // What a store does: the best-ranked tenant; among equals, the first (arrival) in `backlogged`.
      const t = [...backlogged].sort((a, b) => tenantRank(order, a) - tenantRank(order, b))[0];
      fair.dispatched('p', t, cost(t));
      out.push(t);
    }
    return out;
  }

  it('shares by weight whatever the tasks cost: a tenant with tasks twice as costly gets half as many', () => {
    const out = simulate(new FairShare(weights({})), ['big', 'small'], 300, (t) => (t === 'big' ? 2 : 1));
    expect(out.filter((t) => t === 'small').length).toBeGreaterThanOrEqual(198);
    expect(out.filter((t) => t === 'small').length).toBeLessThanOrEqual(202);
  });

  it('gives no credit for idle time: a tenant back from idling shares from then on, it does not take every slot', () => {
    const fair = new FairShare(weights({}));
    simulate(fair, ['busy'], 100);
    const after = simulate(fair, ['busy', 'back'], 20);
    expect(after.filter((t) => t === 'back').length).toBeGreaterThanOrEqual(9);
    expect(after.filter((t) => t === 'back').length).toBeLessThanOrEqual(11);
    // and it is served at once (not after the busy tenant's backlog)
    expect(after.slice(0, 2)).toContain('back');
  });

  it('keeps the clocks of each pool apart', () => {
    const fair = new FairShare(weights({}));
    fair.dispatched('p', 'a', 10);
    expect(fair.order('p')).toEqual(['a']);
    expect(fair.order('q')).toEqual([]);
  });
});
