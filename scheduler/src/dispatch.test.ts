import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Code, type DiffmeshError, type StageResult, type StageTask } from '@diffmesh/core';
import { PlanRegistry } from './plans/registry.js';
import { HeldInstance, end, entry, newScheduler, outcome } from './fixtures/stages.js';
import { SqliteStore } from './storage/sqlite.js';
import type { Lease, LeaseQuery } from './storage/types.js';
import { TaskRefused, type ExecuteHooks } from './types.js';

/** Refuses its first task without running it, as an instance behind a breaker may. */
class RefusesOnce extends HeldInstance {
  refusals = 0;
  override execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    if (this.refusals === 0) {
      this.refusals += 1;
      return Promise.reject(new TaskRefused('breaker is half-open'));
    }
    return super.execute(task, hooks);
  }
}

describe('dispatch', async () => {
  it('puts a task an instance refused back in its queue without using up a try', async () => {
    const s = newScheduler({ maxAttempts: 1 });
    const inst = new RefusesOnce('enc-1');
    s.addInstance(inst);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(1);
    inst.finish(0);
    expect(await outcome(s, id)).toBe('completed');
    expect(inst.refusals).toBe(1);
    expect((await s.get(id)).timings[0].attempts).toBe(1);
    expect((await s.get(id)).context.retryCount).toBe(0);
  });

  it("takes the best task across a pool's queues: priority first, then arrival, pinned or not", async () => {
    const registry = PlanRegistry.fromEntries([entry({ model: 'm1' }), entry({ model: 'pinned' }, 'enc', '>=1.0.0')]);
    const s = newScheduler({}, { registry });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    const submit = async (model: string, prompt: string, priority = 0) =>
      (await s.submit({ model, params: { prompt }, priority })).context.reqId;
    const ids = [
      await submit('m1', 'a'),
      await submit('m1', 'b'),
      await submit('pinned', 'c'),
      await submit('m1', 'd'),
      await submit('pinned', 'e', 100),
    ];
    for (let i = 0; i < ids.length; i += 1) {
      await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(i + 1);
      inst.finish(i);
    }
    for (const id of ids) expect(await outcome(s, id)).toBe('completed');
    expect(inst.tasks.map((t) => t.params.prompt)).toEqual(['a', 'e', 'b', 'c', 'd']);
  });

  it('sends a task with adapters to the instance that was sent them before, elsewhere only when it is busy', async () => {
    const s = newScheduler({});
    const a = new HeldInstance('dit-a');
    const b = new HeldInstance('dit-b');
    s.addInstance(a);
    s.addInstance(b);
    const submit = async (prompt: string, adapters: string[]) =>
      (await s.submit({ model: 'm1', params: { prompt, adapters: adapters.map((name) => ({ name, scale: 1 })) } })).context.reqId;
    const where = () => [...a.tasks.map((t) => `a:${t.params.prompt}`), ...b.tasks.map((t) => `b:${t.params.prompt}`)];
    // Two at once: one each; ink's instance is the one that took "1".
    const first = [await submit('1', ['ink']), await submit('2', ['pencil'])];
    await expect.poll(() => a.tasks.length + b.tasks.length, { timeout: 10_000 }).toBe(2);
    const inkOn = a.tasks[0]?.params.prompt === '1' ? a : b;
    const pencilOn = inkOn === a ? b : a;
    inkOn.finish(0);
    pencilOn.finish(0);
    for (const id of first) expect(await outcome(s, id)).toBe('completed');
    // Both free again, one after the other: each adapter goes back where it was (without it,
    // the least recently used instance would be chosen).
    const third = await submit('3', ['pencil']);
    await expect.poll(() => pencilOn.tasks.length, { timeout: 10_000 }).toBe(2);
    pencilOn.finish(1);
    expect(await outcome(s, third)).toBe('completed');
    const fourth = await submit('4', ['ink']);
    await expect.poll(() => inkOn.tasks.length, { timeout: 10_000 }).toBe(2);
    // ink's instance busy: the next ink task goes to the other one rather than wait.
    const fifth = await submit('5', ['ink']);
    await expect.poll(() => pencilOn.tasks.length, { timeout: 10_000 }).toBe(3);
    inkOn.finish(1);
    pencilOn.finish(2);
    for (const id of [fourth, fifth]) expect(await outcome(s, id)).toBe('completed');
    expect(where()).toHaveLength(5);
  });

  it('sends a task only to an instance serving its model; otherwise it waits for one', async () => {
    const s = newScheduler();
    const a = new HeldInstance('enc-a', { models: ['m1'] });
    const b = new HeldInstance('enc-b', { models: ['m2'] });
    s.addInstance(a);
    s.addInstance(b);
    const r1 = (await s.submit({ model: 'm1', params: { prompt: 'r1' } })).context.reqId;
    const r2 = (await s.submit({ model: 'm1', params: { prompt: 'r2' } })).context.reqId; // enc-a is busy: waits
    const r3 = (await s.submit({ model: 'm2', params: { prompt: 'r3' } })).context.reqId; // not stuck behind r2
    expect(a.tasks.map((t) => t.params.prompt)).toEqual(['r1']);
    expect(b.tasks.map((t) => t.params.prompt)).toEqual(['r3']);
    a.finish(0);
    await expect.poll(() => a.tasks.length, { timeout: 10_000 }).toBe(2);
    a.finish(1);
    b.finish(0);
    for (const id of [r1, r2, r3]) expect(await outcome(s, id)).toBe('completed');
    expect(a.tasks.map((t) => t.params.prompt)).toEqual(['r1', 'r2']);
  });

  it('refuses at once a request whose pool has no instance serving its model, naming pool and model', async () => {
    const s = newScheduler();
    s.addInstance(new HeldInstance('enc-b', { models: ['m2'] }));
    let err: DiffmeshError | undefined;
    try {
      await s.submit({ model: 'm1', params: { prompt: 'x' } });
    } catch (e) {
      err = e as DiffmeshError;
    }
    expect(err).toMatchObject({ code: Code.UNAVAILABLE, reason: 'POOL_UNAVAILABLE', metadata: { pool: 'enc', model: 'm1' } });
    expect(err?.message).toBe('pool "enc" (stage text_encoding) has no healthy instance serving model "m1"');
    expect(s.inFlightCount()).toBe(0);
  });
});

describe('a pool that loses every instance able to run a waiting task', async () => {
  it("fails the task's request with POOL_UNAVAILABLE after strandedTimeoutMs, instead of leaving it queued", async () => {
    const s = newScheduler({ strandedTimeoutMs: 200 });
    const a = new HeldInstance('enc-a', { models: ['m1'] });
    const b = new HeldInstance('enc-b', { models: ['m2'] });
    s.addInstance(a);
    s.addInstance(b);
    const running = (await s.submit({ model: 'm1', params: { prompt: 'running' } })).context.reqId;
    const waiting = (await s.submit({ model: 'm1', params: { prompt: 'waiting' } })).context.reqId;
    s.retireInstance('enc-a'); // drains: finishes its task, takes no new one; enc-b does not serve m1
    expect(await end(s, waiting)).toMatchObject({
      type: 'failed',
      error: {
        code: Code.UNAVAILABLE,
        reason: 'POOL_UNAVAILABLE',
        message: 'pool "enc" (stage text_encoding) has had no instance serving model "m1" for 200 ms',
      },
    });
    a.finish(0);
    expect(await outcome(s, running)).toBe('completed');
    // The pool's other model is unaffected.
    const other = (await s.submit({ model: 'm2', params: { prompt: 'other' } })).context.reqId;
    b.finish(0);
    expect(await outcome(s, other)).toBe('completed');
  });

  it('lets an instance that arrives in time take the task', async () => {
    const s = newScheduler({ strandedTimeoutMs: 60_000 });
    const first = new HeldInstance('enc-1');
    s.addInstance(first);
    const running = (await s.submit({ model: 'm1', params: { prompt: 'running' } })).context.reqId;
    const waiting = (await s.submit({ model: 'm1', params: { prompt: 'waiting' } })).context.reqId;
    s.retireInstance('enc-1');
    const next = new HeldInstance('enc-2');
    s.addInstance(next);
    await expect.poll(() => next.tasks.length, { timeout: 10_000 }).toBe(1);
    next.finish(0);
    first.finish(0);
    expect(await outcome(s, waiting)).toBe('completed');
    expect(await outcome(s, running)).toBe('completed');
  });
});

describe('dispatch on a durable store', () => {
  it("fills a pool's free slots with several leases in flight at once, never more than its free slots", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-lanes-'));
    /** Holds every lease until released, counting how many wait at once. */
    class GatedStore extends SqliteStore {
      inFlight = 0;
      most = 0;
      private readonly gates: Array<() => void> = [];
      override async lease(query: LeaseQuery): Promise<Lease | undefined> {
        this.inFlight += 1;
        this.most = Math.max(this.most, this.inFlight);
        await new Promise<void>((resolve) => this.gates.push(resolve));
        this.inFlight -= 1;
        return super.lease(query);
      }
      open(): void {
        for (const g of this.gates.splice(0)) g();
      }
    }
    const store = new GatedStore({ file: path.join(dir, 'requests.sqlite'), retentionMs: 60_000, maxRetained: 1000, leaseMs: 5000 });
    const s = newScheduler({ maxAttempts: 1, leaseMs: 5000 }, { requests: store });
    try {
      await s.start();
      // Six free slots, eight tasks queued (the leases wait at the gate).
      const inst = new HeldInstance('enc-1', { capacity: 6 });
      s.addInstance(inst);
      const ids: string[] = [];
      for (let i = 0; i < 8; i += 1) ids.push((await s.submit({ model: 'm1', params: { prompt: `p${i}` } })).context.reqId);
      /** Tasks sent, opening the gates on every look. */
      const sent = (): number => {
        store.open();
        return inst.tasks.length;
      };
      // Opens the gates until all six slots are taken (one lease, a second, then the lanes).
      await expect.poll(sent, { timeout: 10_000 }).toBe(6);
      // Leases in flight together: more than one, at most the lanes (4) and the free slots.
      expect(store.most).toBeGreaterThan(1);
      expect(store.most).toBeLessThanOrEqual(4);
      expect(inst.tasks.length).toBe(6);
      for (let done = 0; done < 8; done += 1) {
        await expect.poll(sent, { timeout: 10_000 }).toBeGreaterThan(done);
        inst.finish(done);
      }
      for (const id of ids) expect(await outcome(s, id)).toBe('completed');
      expect(store.most).toBeLessThanOrEqual(4);
    } finally {
      store.open();
      await s.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
