/**
 * The conformance suite every {@link SchedulerStore} backend passes: one behaviour, four
 * backends. Each backend's test file calls {@link storeConformance} with a factory that
 * opens stores on a fresh namespace of a real server it started (loopback, free port).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code, type ObjectRef } from '@diffmesh/core';
import { itemId, type Lease, type QueueItem, type RequestRecord, type StoreOptions, type SchedulerStore } from './types.js';
import { rejection } from '@diffmesh/testing';
import { newItem, newRecord } from './test-records.js';

export { newItem, newRecord };

/** Opens stores for the suite. */
export interface ConformanceTarget {
  /** Opens a store on namespace `ns` (two calls with one `ns` share state, as two schedulers would). */
  open(ns: string, retention?: Partial<StoreOptions>): Promise<SchedulerStore>;
  /** Several stores may share one namespace (false for memory). */
  shared: boolean;
  /** State outlives a store: a store opened again on the namespace sees it (false for memory). */
  durable: boolean;
  /** Called once after the suite (stops the server). */
  close?(): Promise<void>;
  /**
   * Stores `items` on namespace `ns` as the backend's version before tenants stored them (no
   * tenant anywhere), then answers a store opened on it with `open` (durable backends only).
   */
  legacy?(open: (ns: string) => Promise<SchedulerStore>, ns: string, items: QueueItem[]): Promise<SchedulerStore>;
}

let nsCounter = 0;
function freshNs(): string {
  nsCounter += 1;
  return `t${process.pid}x${Date.now().toString(36)}x${nsCounter}`;
}

const ref = (name: string, extra: Partial<ObjectRef> = {}): ObjectRef => ({
  objectId: `r:${name}:1`,
  ownerAddress: '127.0.0.1:1',
  ownerNodeId: 'n1',
  shape: [1, 2],
  dtype: 'float32',
  sizeBytes: 8,
  createdAt: 1,
  name,
  ttlMs: 0,
  checksum: 'crc32c:00000000',
  ...extra,
});

const ALL = (pool = 'enc', queues: string[] = [pool]) => ({ pool, fits: [{ queues }], owner: 'test' });

async function drainIds(store: SchedulerStore, query = ALL()): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const l = await store.lease(query);
    if (!l) return out;
    out.push(l.item.reqId);
    await store.apply({ ack: l });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Registers the suite for one backend. */
export function storeConformance(name: string, target: () => Promise<ConformanceTarget>): void {
  describe(`scheduler store conformance: ${name}`, () => {
    let t: ConformanceTarget;
    const opened: SchedulerStore[] = [];
    const open = async (ns: string, retention?: Partial<StoreOptions>): Promise<SchedulerStore> => {
      const s = await t.open(ns, retention);
      opened.push(s);
      return s;
    };

    beforeAll(async () => {
      t = await target();
    });
    afterAll(async () => {
      for (const s of opened) await s.stop();
      await t?.close?.();
    });

    describe('request records', () => {
      it('admits a request once: a repeated id returns the stored record and queues nothing more', async () => {
        const s = await open(freshNs());
        const first = await s.admit(newRecord('a'), newItem('a'), 10);
        expect(first.created).toBe(true);
        expect(first.record.revision).toBe(1);
        const again = await s.admit(newRecord('a', { priority: 9 }), newItem('a', { priority: 9 }), 10);
        expect(again.created).toBe(false);
        expect(again.record.state.context.priority).toBe(0);
        expect(await s.queueSizes()).toEqual({ enc: 1 });
      });

      it('keeps every field through a round trip, bytes and 64-bit seeds included', async () => {
        const s = await open(freshNs());
        const rec = newRecord('rt');
        rec.state.context.refs = { small: ref('small', { inlineData: new Uint8Array([1, 2, 250]) }), big: ref('big') };
        rec.state.context.error = { code: 'UNAVAILABLE', reason: 'TRANSPORT', message: 'é ✓', field: 'x' };
        await s.admit(rec, newItem('rt'), 10);
        const back = (await s.read('rt')) as RequestRecord;
        expect(back.state.context.refs.small.inlineData).toBeInstanceOf(Uint8Array);
        expect([...(back.state.context.refs.small.inlineData as Uint8Array)]).toEqual([1, 2, 250]);
        expect(back.state.context.params.seed).toBe('18446744073709551615');
        expect(back.state.context.error?.message).toBe('é ✓');
        expect(back.events).toEqual(rec.events);
        expect(back.state.context.executionPlan).toEqual(rec.state.context.executionPlan);
      });

      it('refuses admission to a full queue with QUEUE_FULL and stores nothing; later stages pass the bound', async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('a'), newItem('a'), 2);
        await s.admit(newRecord('b'), newItem('b'), 2);
        const err = await rejection(s.admit(newRecord('c'), newItem('c'), 2));
        expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
        expect(err.reason).toBe('QUEUE_FULL');
        expect(err.retryAfterMs).toBeGreaterThan(0);
        expect(await s.read('c')).toBeUndefined();
        // Work already accepted always moves on: an update's enqueue ignores the bound.
        await s.update('a', () => ({ enqueue: newItem('a', { stageIndex: 1 }) }));
        expect(await s.queueSizes()).toEqual({ enc: 3 });
      });

      it('updates by compare-and-set: revision counts, false writes nothing, unknown ids give undefined', async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('a'), newItem('a'), 10);
        const r2 = await s.update('a', (r) => {
          r.state.context.status = 'running';
          r.events.push({ type: 'cancelled', reqId: 'a', at: 5 });
          return {};
        });
        expect(r2?.revision).toBe(2);
        expect(await s.update('a', () => false)).toBeUndefined();
        expect(await s.update('nope', () => ({}))).toBeUndefined();
        const back = (await s.read('a')) as RequestRecord;
        expect(back.revision).toBe(2);
        expect(back.state.context.status).toBe('running');
        expect(back.events.map((e) => e.type)).toEqual(['queued', 'cancelled']);
      });

      it('announces changes with their revision and whether the request ended', async () => {
        const s = await open(freshNs());
        const seen: Array<[string, number, boolean]> = [];
        const off = s.onChange((c) => seen.push([c.reqId, c.revision, c.terminal]));
        await s.admit(newRecord('a'), newItem('a'), 10);
        await s.update('a', (r) => {
          r.state.context.status = 'completed';
          r.expiresAt = Date.now() + 60_000;
          return {};
        });
        await expect.poll(() => seen.length).toBeGreaterThanOrEqual(2);
        off();
        expect(seen.slice(0, 2)).toEqual([
          ['a', 1, false],
          ['a', 2, true],
        ]);
      });

      it('forgets a finished request after its retention', async () => {
        const s = await open(freshNs(), { retentionMs: 300 });
        await s.admit(newRecord('a'), newItem('a'), 10);
        await s.update('a', (r) => {
          r.state.context.status = 'completed';
          r.expiresAt = Date.now() + 300;
          return { remove: { pool: 'enc', id: itemId('a', 0) } };
        });
        expect(await s.read('a')).toBeDefined();
        await expect.poll(() => s.read('a'), { timeout: 8000, interval: 100 }).toBeUndefined();
      });
    });

    describe('queues', () => {
      it("hands out larger priorities first, FIFO within a priority, across a pool's pinned queues", async () => {
        const s = await open(freshNs());
        const plan: Array<[string, number, string | undefined]> = [
          ['low', -1, undefined],
          ['a', 0, undefined],
          ['pinned-a', 0, '>=1.0.0'],
          ['high', 10, undefined],
          ['b', 0, undefined],
          ['mid', 5, '>=1.0.0'],
          ['c', 0, undefined],
        ];
        for (const [id, priority, range] of plan) {
          await s.admit(newRecord(id, { priority }), newItem(id, { priority, ...(range ? { range } : {}) }), 100);
        }
        expect(await drainIds(s, ALL('enc', ['enc', 'enc@>=1.0.0']))).toEqual(['high', 'mid', 'a', 'pinned-a', 'b', 'c', 'low']);
      });

      it('keeps FIFO within a priority over 60 interleaved items', async () => {
        const s = await open(freshNs());
        const priorities = [0, 3, 1, 3, 2, 0, 1];
        for (let n = 0; n < 60; n += 1) {
          const p = priorities[(n * 7 + (n >> 3)) % priorities.length];
          await s.admit(newRecord(`r${n}`, { priority: p }), newItem(`r${n}`, { priority: p }), 1000);
        }
        const out = (await drainIds(s)).map((id) => Number(id.slice(1)));
        expect(out).toHaveLength(60);
        const pr = (n: number) => priorities[(n * 7 + (n >> 3)) % priorities.length];
        for (let i = 1; i < out.length; i += 1) {
          const [a, b] = [out[i - 1], out[i]];
          expect(pr(a) > pr(b) || (pr(a) === pr(b) && a < b)).toBe(true);
        }
      });

      it('gives a free slot the best task it can run: by model and by pinned queue', async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('m2-first'), newItem('m2-first', { model: 'm2' }), 10);
        await s.admit(newRecord('pinned'), newItem('pinned', { range: '^2.0.0' }), 10);
        await s.admit(newRecord('m1'), newItem('m1'), 10);
        // Serves m1 only, in the unpinned queue.
        const l = await s.lease({ pool: 'enc', fits: [{ queues: ['enc'], models: ['m1'] }], owner: 't' });
        expect(l?.item.reqId).toBe('m1');
        expect(await s.lease({ pool: 'enc', fits: [{ queues: ['enc'], models: ['m1'] }], owner: 't' })).toBeUndefined();
        // Two kinds of free instance: the best item either can take.
        const both = await s.lease({
          pool: 'enc',
          fits: [
            { queues: ['enc@^2.0.0'], models: ['m1'] },
            { queues: ['enc'], models: ['m2'] },
          ],
          owner: 't',
        });
        expect(both?.item.reqId).toBe('m2-first');
        expect((await s.queuedKinds('enc')).map((k) => [k.queue, k.model])).toEqual([['enc@^2.0.0', 'm1']]);
        expect(await s.lease({ pool: 'other', fits: [{ queues: ['other'] }], owner: 't' })).toBeUndefined();
      });

      it('leases hide an item; ack removes it; release puts it back in its place, after its delay', async () => {
        const s = await open(freshNs());
        for (const id of ['a', 'b', 'c']) await s.admit(newRecord(id), newItem(id), 10);
        const a = (await s.lease(ALL())) as Lease;
        expect(a.item.reqId).toBe('a');
        expect(a.deliveries).toBe(1);
        const b = (await s.lease(ALL())) as Lease;
        expect(b.item.reqId).toBe('b');
        expect(await s.queueSizes()).toEqual({ enc: 1 });
        await s.apply({ ack: b });
        await s.apply({ release: { lease: a, delayMs: 0 } });
        // Back in its place: before c, which arrived later.
        const again = (await s.lease(ALL())) as Lease;
        expect(again.item.reqId).toBe('a');
        expect(again.deliveries).toBe(2);
        // Released with a delay: c goes first, then a once the delay has passed.
        await s.apply({ release: { lease: again, delayMs: 400 } });
        const c = (await s.lease(ALL())) as Lease;
        expect(c.item.reqId).toBe('c');
        expect(await s.lease(ALL())).toBeUndefined();
        await sleep(450);
        expect((await s.lease(ALL()))?.item.reqId).toBe('a');
      });

      it('returns an item whose lease is not renewed; a renewed lease holds; a lost lease cannot be renewed', async () => {
        const s = await open(freshNs(), { leaseMs: 1000 });
        await s.admit(newRecord('a'), newItem('a'), 10);
        await s.admit(newRecord('b'), newItem('b'), 10);
        const short = ALL();
        const a = (await s.lease(short)) as Lease;
        const b = (await s.lease(short)) as Lease;
        for (let i = 0; i < 4; i += 1) {
          await sleep(400);
          expect(await s.renew(b)).toBe(true);
        }
        // a was not renewed: it is back (b, renewed, is not).
        const back = (await s.lease(short)) as Lease;
        expect(back?.item.reqId).toBe('a');
        expect(back.deliveries).toBe(2);
        expect(await s.lease(short)).toBeUndefined();
        expect(await s.renew(a)).toBe(false);
        // Acknowledging the lost lease does not remove the item its new holder has.
        await s.apply({ ack: a });
        await s.apply({ release: { lease: back, delayMs: 0 } });
        expect((await s.lease(short))?.item.reqId).toBe('a');
      });

      it('announces items that become available', async () => {
        const s = await open(freshNs());
        const pools: string[] = [];
        const off = s.onQueue((p) => pools.push(p));
        await s.admit(newRecord('a'), newItem('a', { pool: 'dit' }), 10);
        await expect.poll(() => pools.includes('dit')).toBe(true);
        off();
      });

      it('removes an item by id, queued or leased, and enqueues an id once', async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('a'), newItem('a'), 10);
        await s.admit(newRecord('b'), newItem('b'), 10);
        await s.update('b', () => ({ enqueue: newItem('b') }));
        expect(await s.queueSizes()).toEqual({ enc: 2 });
        const a = (await s.lease(ALL())) as Lease;
        await s.update('a', () => ({ remove: { pool: 'enc', id: itemId('a', 0) } }));
        await s.update('b', () => ({ remove: { pool: 'enc', id: itemId('b', 0) } }));
        expect(await s.lease(ALL())).toBeUndefined();
        expect(await s.renew(a)).toBe(false);
        await s.apply({ release: { lease: a, delayMs: 0 } });
        expect(await s.lease(ALL())).toBeUndefined();
        // A removed id may be queued again (e.g. a stage re-run).
        await s.update('a', () => ({ enqueue: newItem('a', { gen: 2 }) }));
        expect((await s.lease(ALL()))?.item.gen).toBe(2);
      });

      it('moves a request on atomically: ack of the done task and enqueue of the next', async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('a'), newItem('a'), 10);
        const l = (await s.lease(ALL())) as Lease;
        await s.update('a', (r) => {
          r.state.context.currentStageIndex = 1;
          r.gen = 2;
          return { ack: l, enqueue: newItem('a', { stageIndex: 1, pool: 'dit', gen: 2 }) };
        });
        expect(await s.lease(ALL())).toBeUndefined();
        const next = await s.lease(ALL('dit'));
        expect(next?.item).toMatchObject({ id: 'a#1', stageIndex: 1, gen: 2 });
      });
    });

    describe('fair share: tenant order', () => {
      const FAIR = (tenants: string[], models?: string[]) => ({
        pool: 'enc',
        fits: [{ queues: ['enc'], ...(models ? { models } : {}) }],
        owner: 'test',
        tenants,
      });
      /** Leases (and acknowledges) every item of `enc` with the tenant order `tenants`. */
      async function drainFair(s: SchedulerStore, tenants: string[]): Promise<string[]> {
        const out: string[] = [];
        for (;;) {
          const l = await s.lease(FAIR(tenants));
          if (!l) return out;
          out.push(l.item.reqId);
          await s.apply({ ack: l });
        }
      }
      /** Admits items given as `id:tenant[:priority]`, in order. */
      async function admitAll(s: SchedulerStore, spec: string): Promise<void> {
        for (const one of spec.split(' ')) {
          const [id, tenant, priority = '0'] = one.split(':');
          await s.admit(newRecord(id, { priority: Number(priority) }), newItem(id, { tenant, priority: Number(priority) }), 100);
        }
      }

      it('serves a tenant not listed first, then the listed tenants in order; priority then arrival within each', async () => {
        const s = await open(freshNs());
        await admitAll(s, 'a1:A b1:B b2:B:5 c1:C a2:A:1 c2:C b3:B');
        expect(await drainFair(s, ['B', 'A'])).toEqual(['c1', 'c2', 'b2', 'b1', 'b3', 'a2', 'a1']);
      });

      it('without a tenant order, serves every tenant first come, first served within a priority', async () => {
        const s = await open(freshNs());
        await admitAll(s, 'a1:A b1:B b2:B:5 a2:A');
        expect(await drainIds(s)).toEqual(['b2', 'a1', 'b1', 'a2']);
      });

      it("passes over a listed tenant's items the free slot cannot run", async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('a-m2'), newItem('a-m2', { tenant: 'A', model: 'm2' }), 10);
        await s.admit(newRecord('b-m1'), newItem('b-m1', { tenant: 'B' }), 10);
        await s.admit(newRecord('a-m1'), newItem('a-m1', { tenant: 'A' }), 10);
        expect((await s.lease(FAIR(['A', 'B'], ['m1'])))?.item.reqId).toBe('a-m1');
        expect((await s.lease(FAIR(['A', 'B'], ['m1'])))?.item.reqId).toBe('b-m1');
        expect(await s.lease(FAIR(['A', 'B'], ['m1']))).toBeUndefined();
        expect((await s.lease(FAIR(['A', 'B'])))?.item).toMatchObject({ reqId: 'a-m2', tenant: 'A' });
      });

      it('puts a released item back in its place within its tenant', async () => {
        const s = await open(freshNs());
        await admitAll(s, 'a1:A b1:B a2:A');
        const first = (await s.lease(FAIR(['B', 'A']))) as Lease;
        expect(first.item.reqId).toBe('b1');
        const second = (await s.lease(FAIR(['B', 'A']))) as Lease;
        expect(second.item.reqId).toBe('a1');
        await s.apply({ release: { lease: second, delayMs: 0 } });
        await s.apply({ release: { lease: first, delayMs: 0 } });
        expect(await drainFair(s, ['A', 'B'])).toEqual(['a1', 'a2', 'b1']);
      });

      it('reads items stored before tenants existed as the default tenant’s, in their order, and removes them', async (ctx) => {
        if (!t.legacy) return ctx.skip();
        const s = await t.legacy(open, freshNs(), [newItem('old1'), newItem('old2'), newItem('old3', { priority: 1 })]);
        await s.admit(newRecord('new'), newItem('new', { tenant: 'X' }), 10);
        expect((await s.lease(FAIR(['X', 'default'])))?.item).toMatchObject({ reqId: 'new', tenant: 'X' });
        await s.apply({ remove: { pool: 'enc', id: itemId('old1', 0) } });
        expect((await s.lease(FAIR(['default'])))?.item).toMatchObject({ reqId: 'old3', tenant: 'default' });
        expect((await s.lease(FAIR(['default'])))?.item).toMatchObject({ reqId: 'old2', tenant: 'default' });
        expect(await s.lease(FAIR(['default']))).toBeUndefined();
      });

      it('counts an item stored without a tenant as the default tenant', async () => {
        const s = await open(freshNs());
        await s.admit(newRecord('x1'), newItem('x1', { tenant: 'X' }), 10);
        const legacy = newItem('old');
        delete (legacy as Partial<QueueItem>).tenant;
        await s.admit(newRecord('old'), legacy, 10);
        const l = (await s.lease(FAIR(['X', 'default']))) as Lease;
        expect(l.item).toMatchObject({ reqId: 'x1', tenant: 'X' });
        await s.apply({ ack: l });
        await s.admit(newRecord('x2'), newItem('x2', { tenant: 'X' }), 10);
        expect((await s.lease(FAIR(['default', 'X'])))?.item).toMatchObject({ reqId: 'old', tenant: 'default' });
      });
    });

    describe('shared and durable', () => {
      it('lets two stores on one namespace each take an item exactly once', async (ctx) => {
        if (!t.shared) return ctx.skip();
        const ns = freshNs();
        const [s1, s2] = [await open(ns), await open(ns)];
        for (let i = 0; i < 40; i += 1) await (i % 2 ? s1 : s2).admit(newRecord(`r${i}`), newItem(`r${i}`), 100);
        const taken: string[] = [];
        const worker = async (s: SchedulerStore) => {
          for (;;) {
            const l = await s.lease(ALL());
            if (!l) return;
            taken.push(l.item.reqId);
            await s.apply({ ack: l });
          }
        };
        await Promise.all([worker(s1), worker(s2), worker(s1), worker(s2)]);
        expect(taken.sort()).toEqual(Array.from({ length: 40 }, (_, i) => `r${i}`).sort());
      });

      it('resolves competing updates by compare-and-set: no increment is lost', async (ctx) => {
        if (!t.shared) return ctx.skip();
        const ns = freshNs();
        const [s1, s2] = [await open(ns), await open(ns)];
        await s1.admit(newRecord('a'), newItem('a'), 10);
        const bump = (s: SchedulerStore) =>
          s.update('a', (r) => {
            r.state.context.retryCount += 1;
            return {};
          });
        await Promise.all(Array.from({ length: 20 }, (_, i) => bump(i % 2 ? s1 : s2)));
        const r = (await s2.read('a')) as RequestRecord;
        expect(r.state.context.retryCount).toBe(20);
        expect(r.revision).toBe(21);
      });

      it("tells one store of another's changes and new items", async (ctx) => {
        if (!t.shared) return ctx.skip();
        const ns = freshNs();
        const [s1, s2] = [await open(ns), await open(ns)];
        const changes: string[] = [];
        const pools: string[] = [];
        s2.onChange((c) => changes.push(`${c.reqId}:${c.revision}:${c.terminal}`));
        s2.onQueue((p) => pools.push(p));
        await sleep(100);
        await s1.admit(newRecord('a'), newItem('a'), 10);
        await expect.poll(() => pools, { timeout: 5000 }).toContain('enc');
        await s1.update('a', (r) => {
          r.state.context.status = 'cancelled';
          r.expiresAt = Date.now() + 60_000;
          return { remove: { pool: 'enc', id: itemId('a', 0) } };
        });
        await expect.poll(() => changes, { timeout: 5000 }).toContain('a:2:true');
      });

      it("keeps requests and queued tasks when the store is opened again; a lost holder's task returns", async (ctx) => {
        if (!t.durable) return ctx.skip();
        const ns = freshNs();
        const s1 = await t.open(ns, { leaseMs: 1000 });
        await s1.admit(newRecord('a'), newItem('a'), 10);
        await s1.admit(newRecord('b'), newItem('b'), 10);
        const leased = await s1.lease(ALL());
        expect(leased?.item.reqId).toBe('a');
        await s1.stop();
        const s2 = await open(ns, { leaseMs: 1000 });
        expect((await s2.read('a'))?.state.context.reqId).toBe('a');
        expect((await s2.lease(ALL()))?.item.reqId).toBe('b');
        await expect.poll(async () => (await s2.lease(ALL()))?.item.reqId, { timeout: 8000, interval: 200 }).toBe('a');
      });
    });
  });
}
