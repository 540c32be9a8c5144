import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { MemoryDiscovery, NatsDiscovery, type InstanceRegistration } from '@diffmesh/discovery';
import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';
import { Fixtures, HeldInstance, end, gate, handler, log, newScheduler, outcome } from './fixtures/stages.js';
import { followDiscovery } from './membership.js';

const fx = new Fixtures();
afterEach(() => fx.close());

/** The registration of stage instance enc-1 serving at `address`. */
const registration = (address: string): InstanceRegistration => ({
  id: 'enc-1',
  name: 'encoder-svc',
  version: '1.0.0',
  nodeId: 'n',
  pool: 'enc',
  stage: 'text_encoding',
  grpcAddress: address,
  models: [],
  capacity: 1,
});

describe('an instance that leaves discovery while busy and comes back under the same id', async () => {
  it('keeps serving: the old task finishes on the old slot, new work goes to the new one', async () => {
    const s = newScheduler();
    const first = new HeldInstance('enc-1');
    s.addInstance(first);
    const r1 = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => first.tasks.length).toBe(1);
    s.retireInstance('enc-1'); // discovery: down, its task still running
    const again = new HeldInstance('enc-1');
    s.addInstance(again); // discovery: up again
    // The old task still occupies the worker's only slot.
    expect(s.instances('enc')).toEqual([{ instance: again, active: 1 }]);
    const r2 = (await s.submit({ model: 'm1', params: { prompt: 'y' } })).context.reqId;
    expect(again.tasks).toHaveLength(0);

    first.finish(0);
    expect(await outcome(s, r1)).toBe('completed');
    await expect.poll(() => again.tasks.length, { timeout: 10_000 }).toBe(1);
    expect(first.closed).toBe(true);
    expect(again.closed).toBe(false);
    again.finish(0);
    expect(await outcome(s, r2)).toBe('completed');
    expect(s.instances('enc')).toEqual([{ instance: again, active: 0 }]);
  });

  it('through discovery and a real stage service: the re-registered instance takes new requests', async () => {
    const held = gate();
    const address = await fx.stageServer(
      handler(async () => {
        await held.wait;
        return { outputs: {} };
      }),
    );
    const s = newScheduler();
    const discovery = new MemoryDiscovery();
    const unfollow = followDiscovery(s, discovery, { log });
    let registered = await discovery.register(registration(address));
    await expect.poll(() => s.instances('enc').length, { timeout: 10_000 }).toBe(1);
    const r1 = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(async () => (await s.get(r1)).timings[0]?.startedAt ?? 0, { timeout: 10_000 }).toBeGreaterThan(0);
    await registered.stop(); // down (its NATS connection blipped) ...
    registered = await discovery.register(registration(address)); // ... and up again, same id and address
    held.release();
    expect(await outcome(s, r1)).toBe('completed');
    await expect.poll(() => s.instances('enc').map((i) => i.active), { timeout: 10_000 }).toEqual([0]);

    const r2 = (await s.submit({ model: 'm1', params: { prompt: 'y' } })).context.reqId;
    expect((await end(s, r2)).type).toBe('completed');
    unfollow();
    await registered.stop();
  });

  it("an instance the scheduler closed is taken back at discovery's next word about it", async () => {
    const address = await fx.stageServer(handler(async () => ({ outputs: {} })));
    const s = newScheduler();
    const discovery = new MemoryDiscovery();
    const unfollow = followDiscovery(s, discovery, { log });
    const registered = await discovery.register(registration(address));
    await expect.poll(() => s.instances('enc').length, { timeout: 10_000 }).toBe(1);
    s.removeInstance('enc-1');
    expect(s.instances('enc')).toHaveLength(0);
    registered.update({ inFlight: 0 }); // still registered: discovery reports it again
    await expect.poll(() => s.instances('enc').length, { timeout: 10_000 }).toBe(1);
    expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId)).toBe('completed');
    unfollow();
    await registered.stop();
  });
});

describe('an instance that misses discovery polls while its dispatch stream is open', () => {
  let nats: RunningNatsServer | undefined;
  afterAll(async () => {
    await nats?.stop();
  });

  it('stays in its pool and takes requests; one that says goodbye is retired at once', async () => {
    nats ??= await startNatsServer();
    const address = await fx.stageServer(handler(async () => ({ outputs: {} })));
    const s = newScheduler();
    const watcher = await NatsDiscovery.connect(nats.url, { pollIntervalMs: 200 });
    const unfollow = followDiscovery(s, watcher, { log });
    try {
      // The stage's registration lives on a NATS connection of its own.
      const registrar = await NatsDiscovery.connect(nats.url);
      await registrar.register(registration(address));
      await expect.poll(() => s.instances('enc').length, { timeout: 10_000 }).toBe(1);
      const downs: string[] = [];
      const off = watcher.subscribe((e) => void (e.type === 'down' && downs.push(e.why ?? '')), { replay: false });
      // Its NATS connection goes away without a goodbye: polls go unanswered, gRPC is fine.
      await registrar.connection.close();
      await expect.poll(() => downs, { timeout: 10_000 }).toEqual(['unanswered']);
      expect(s.instances('enc')).toHaveLength(1);
      expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId)).toBe('completed');
      off();

      // Registered again and then unregistered: retired, no new requests for its pool.
      const again = await NatsDiscovery.connect(nats.url);
      const reg = await again.register(registration(address));
      await reg.stop();
      await expect.poll(() => s.instances('enc').length, { timeout: 10_000 }).toBe(0);
      await expect(s.submit({ model: 'm1', params: { prompt: 'y' } })).rejects.toThrow(/no healthy instance/);
      await again.close();
    } finally {
      unfollow();
      await watcher.close();
    }
  });
});
