/**
 * Several schedulers over one shared store (sqlite here; the conformance suite shows the
 * other backends behave the same): capacity is global, any scheduler answers for any
 * request, and a scheduler that stops hands its work to the others.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryDiscovery, type InstanceRegistration, type Registration } from '@diffmesh/discovery';
import { Fixtures, handler, log, newScheduler, outcome } from './fixtures/stages.js';
import { followDiscovery } from './membership.js';
import type { Scheduler } from './scheduler.js';
import { SqliteStore } from './storage/sqlite.js';

const fx = new Fixtures();
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await fx.close();
});

const registration = (address: string, capacity: number): InstanceRegistration => ({
  id: 'enc-1',
  name: 'encoder-svc',
  version: '1.0.0',
  nodeId: 'n',
  pool: 'enc',
  stage: 'text_encoding',
  grpcAddress: address,
  models: [],
  capacity,
});

/** Two schedulers sharing one sqlite file, both following one discovery. */
async function twoSchedulers(): Promise<{ a: Scheduler; b: Scheduler; discovery: MemoryDiscovery }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-shared-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const discovery = new MemoryDiscovery();
  const make = async (id: string): Promise<Scheduler> => {
    const store = new SqliteStore({ file: path.join(dir, 'requests.sqlite'), retentionMs: 60_000, maxRetained: 1000, leaseMs: 2000 });
    const s = newScheduler({ maxAttempts: 3, leaseMs: 2000 }, { requests: store, id });
    await s.start();
    const unfollow = followDiscovery(s, discovery, { log, recheckMs: 200 });
    cleanups.push(async () => {
      unfollow();
      await s.stop();
    });
    return s;
  };
  return { a: await make('scheduler-a'), b: await make('scheduler-b'), discovery };
}

/** The scheduler that holds enc-1's Work stream, and the other. */
async function holder(a: Scheduler, b: Scheduler): Promise<[Scheduler, Scheduler]> {
  await expect.poll(() => a.instances('enc').length + b.instances('enc').length, { timeout: 10_000 }).toBe(1);
  return a.instances('enc').length === 1 ? [a, b] : [b, a];
}

describe('schedulers sharing a store', () => {
  it('never give an instance more tasks than its capacity, and any of them follows any request', async () => {
    let running = 0;
    let most = 0;
    let calls = 0;
    const address = await fx.stageServer(
      handler(async () => {
        calls += 1;
        running += 1;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 20));
        running -= 1;
        return { outputs: {} };
      }),
      { capacity: 2 },
    );
    const { a, b, discovery } = await twoSchedulers();
    const reg: Registration = await discovery.register(registration(address, 2));
    cleanups.push(() => reg.stop());
    const [held, other] = await holder(a, b);
    // The other scheduler knows the instance as held elsewhere, and admits requests for it.
    await expect
      .poll(async () => (await other.pools()).find((p) => p.pool === 'enc')?.instances.map((i) => [i.instance.id, i.foreign ?? false]))
      .toEqual([['enc-1', true]]);
    const ids: string[] = [];
    for (let i = 0; i < 12; i += 1)
      ids.push((await (i % 2 ? held : other).submit({ model: 'm1', params: { prompt: `p${i}` } })).context.reqId);
    // Followed through the scheduler that did not accept it.
    for (let i = 0; i < ids.length; i += 1) expect(await outcome(i % 2 ? other : held, ids[i])).toBe('completed');
    expect(calls).toBe(12);
    expect(most).toBeLessThanOrEqual(2);
    expect(held.instances('enc')).toHaveLength(1);
    expect(other.instances('enc')).toHaveLength(0);
  });

  it('cancel on one scheduler stops the task running on the instance the other holds', async () => {
    let aborted = 0;
    const address = await fx.stageServer(
      handler(async (_task, ctx) => {
        await new Promise<void>((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            aborted += 1;
            reject(ctx.signal.reason as Error);
          });
        });
        return { outputs: {} };
      }),
    );
    const { a, b, discovery } = await twoSchedulers();
    const reg = await discovery.register(registration(address, 1));
    cleanups.push(() => reg.stop());
    const [held, other] = await holder(a, b);
    const id = (await held.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(async () => (await other.get(id)).context.status, { timeout: 10_000 }).toBe('running');
    expect((await other.cancel(id)).context.status).toBe('cancelled');
    await expect.poll(() => aborted, { timeout: 10_000 }).toBe(1);
    expect(await outcome(held, id)).toBe('cancelled');
  });

  it('a scheduler that stops hands its running task back; the other takes over the instance and finishes it', async () => {
    const address = await fx.stageServer(
      handler(async (_task, ctx) => {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, 300);
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(t);
            reject(ctx.signal.reason as Error);
          });
        });
        return { outputs: {} };
      }),
    );
    const { a, b, discovery } = await twoSchedulers();
    const reg = await discovery.register(registration(address, 1));
    cleanups.push(() => reg.stop());
    const [held, other] = await holder(a, b);
    const id = (await held.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(async () => (await other.get(id)).context.status, { timeout: 10_000 }).toBe('running');
    // SIGTERM's path: the task gets 50 ms to finish, then goes back to its queue.
    await held.drain(50);
    held.retireInstance('enc-1');
    expect(await outcome(other, id)).toBe('completed');
    // Its history says it went back to its queue (not that its lease ran out).
    const history: string[] = [];
    for await (const e of other.watch(id)) history.push(e.type);
    expect(history).toEqual(['queued', 'stage_started', 'queued', 'stage_started', 'stage_finished', 'completed']);
    const state = await other.get(id);
    expect(state.timings[0].attempts).toBe(2);
    expect(state.context.retryCount).toBe(0);
    expect(other.instances('enc')).toHaveLength(1);
  });
});
