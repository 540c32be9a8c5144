import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { ConfigError, DiffmeshError, createLogger } from '@diffmesh/core';
import { EventRecorder } from './fixtures/events.js';
import { MemoryDiscovery, createDiscovery, matchesFilter, matchesVersion, type InstanceRegistration } from './index.js';

function dit(version: string, extra: Partial<InstanceRegistration> = {}): InstanceRegistration {
  return {
    name: 'dit-svc',
    version,
    nodeId: 'node-a',
    pool: 'dit-tiny',
    stage: 'denoising',
    grpcAddress: '127.0.0.1:50051',
    models: ['diffmesh/tiny-shapes'],
    capacity: 2,
    ...extra,
  };
}

describe('matchesVersion', () => {
  it('pins semver ranges', () => {
    expect(matchesVersion({ version: '1.2.3' }, '^1.2.0')).toBe(true);
    expect(matchesVersion({ version: '2.0.0' }, '^1.2.0')).toBe(false);
    expect(matchesVersion({ version: '1.4.0' }, '>=1.3 <2')).toBe(true);
    expect(matchesVersion({ version: '1.4.0' }, '1.x')).toBe(true);
    expect(matchesVersion({ version: '1.4.0' }, '*')).toBe(true);
  });

  it('matches prereleases only when asked or named', () => {
    expect(matchesVersion({ version: '1.3.0-rc.1' }, '^1.2.0')).toBe(false);
    expect(matchesVersion({ version: '1.3.0-rc.1' }, '^1.2.0', { includePrerelease: true })).toBe(true);
    expect(matchesVersion({ version: '1.3.0-rc.2' }, '>=1.3.0-rc.1')).toBe(true);
  });

  it('rejects a malformed range instead of matching nothing', () => {
    expect(() => matchesVersion({ version: '1.0.0' }, 'not a range!')).toThrow(/version: "not a range!" is not a valid semver range/);
  });

  it('filters by every given field', () => {
    const i = { ...dit('1.2.0'), id: 'a', metadata: {} };
    expect(
      matchesFilter(i, {
        name: 'dit-svc',
        version: '^1',
        pool: 'dit-tiny',
        stage: 'denoising',
        model: 'diffmesh/tiny-shapes',
        nodeId: 'node-a',
      }),
    ).toBe(true);
    expect(matchesFilter(i, { model: 'other' })).toBe(false);
    expect(matchesFilter(i, { stage: 'vae_decoding' })).toBe(false);
  });
});

describe('MemoryDiscovery', () => {
  it('lists registrations of two versions with their fields, filtered by a version range', async () => {
    const d = new MemoryDiscovery();
    const a = await d.register(dit('1.0.0', { id: 'dit-a', tensorAddress: '127.0.0.1:50070', metadata: { gpu: 'none' } }));
    await d.register(dit('1.1.0', { grpcAddress: '127.0.0.1:50052' }));
    const all = await d.instances({ name: 'dit-svc' });
    expect(all.map((i) => i.version)).toEqual(['1.0.0', '1.1.0']);
    expect(all[0]).toMatchObject({
      id: 'dit-a',
      nodeId: 'node-a',
      pool: 'dit-tiny',
      stage: 'denoising',
      grpcAddress: '127.0.0.1:50051',
      models: ['diffmesh/tiny-shapes'],
      capacity: 2,
      tensorAddress: '127.0.0.1:50070',
      metadata: { gpu: 'none' },
    });
    expect(all[1].id).toMatch(/^dit-svc-[0-9a-f]{12}$/);
    expect((await d.instances({ version: '^1.1.0' })).map((i) => i.version)).toEqual(['1.1.0']);
    expect(a.instance.id).toBe('dit-a');
    await d.close();
  });

  it('emits up, updated and down, and replays current instances to a new subscriber', async () => {
    const d = new MemoryDiscovery();
    const early = await d.register(dit('1.0.0', { id: 'early' }));
    const rec = new EventRecorder();
    const off = d.subscribe(rec.listener);
    expect(rec.events.map((e) => `${e.type} ${e.instance.id}`)).toEqual(['up early']);

    const reg = await d.register(dit('1.1.0', { id: 'late' }));
    reg.update({ inFlight: 1, queued: 3 });
    reg.update({ inFlight: 1, queued: 3 }); // unchanged: no event
    await reg.stop();
    await reg.stop(); // idempotent
    expect(rec.events.map((e) => `${e.type} ${e.instance.id}`)).toEqual(['up early', 'up late', 'updated late', 'down late']);
    expect(rec.of('updated', 'late')[0].instance.load).toEqual({ inFlight: 1, queued: 3 });

    off();
    await early.stop();
    expect(rec.events).toHaveLength(4);
    await d.close();
  });

  it('reads the load function on demand', async () => {
    const d = new MemoryDiscovery();
    let inFlight = 0;
    await d.register(dit('1.0.0', { id: 'x' }), () => ({ inFlight }));
    inFlight = 2;
    expect((await d.instances())[0].load).toEqual({ inFlight: 2 });
    await d.close();
  });

  it('keeps delivering when a listener throws or rejects, and logs it', async () => {
    const lines: string[] = [];
    const log = createLogger({ name: 't', destination: new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }) });
    const d = new MemoryDiscovery({ log });
    const rec = new EventRecorder();
    d.subscribe(() => {
      throw new Error('boom');
    });
    d.subscribe(async () => {
      throw new Error('async boom');
    });
    d.subscribe(rec.listener);
    await d.register(dit('1.0.0', { id: 'x' }));
    await new Promise((r) => setImmediate(r));
    expect(rec.events).toHaveLength(1);
    expect(lines.join('')).toContain('boom');
    expect(lines.join('')).toContain('async boom');
    await d.close();
  });

  it('rejects an invalid registration naming the field', async () => {
    const d = new MemoryDiscovery();
    await expect(d.register(dit('one'))).rejects.toThrow(/^version: "one" is not a semantic version/);
    await expect(d.register(dit('1.0.0', { name: 'dit.svc' }))).rejects.toThrow(/^name: /);
    await expect(d.register(dit('1.0.0', { capacity: -1 }))).rejects.toThrow(/^capacity: /);
    await expect(d.register(dit('1.0.0', { stage: 'painting' as never }))).rejects.toThrow(/^stage: "painting" is not one of/);
    await expect(d.register(dit('1.0.0', { models: ['a,b'] }))).rejects.toThrow(/^models: /);
    await expect(d.register(dit('1.0.0', { metadata: { grpc_address: 'x' } }))).rejects.toThrow(/^metadata.grpc_address: is reserved/);
    await d.register(dit('1.0.0', { id: 'same' }));
    const dup = await d.register(dit('1.0.0', { id: 'same' })).catch((e: unknown) => e);
    expect(dup).toBeInstanceOf(DiffmeshError);
    expect((dup as DiffmeshError).field).toBe('id');
    const reg = await d.register(dit('1.0.0', { id: 'other' }));
    expect(() => reg.update({ inFlight: -1 })).toThrow(/^load.inFlight: must be a non-negative finite number/);
    await d.close();
  });

  it('close unregisters everything registered through it', async () => {
    const d = new MemoryDiscovery();
    const rec = new EventRecorder();
    d.subscribe(rec.listener);
    await d.register(dit('1.0.0', { id: 'a' }));
    await d.register(dit('1.0.0', { id: 'b' }));
    await d.close();
    expect(rec.events.map((e) => `${e.type} ${e.instance.id}`)).toEqual(['up a', 'up b', 'down a', 'down b']);
    expect(await d.instances()).toEqual([]);
    await expect(d.register(dit('1.0.0'))).rejects.toThrow(/closed/);
  });
});

describe('createDiscovery', () => {
  it('defaults to the in-process backend', async () => {
    const d = await createDiscovery();
    expect(d.backend).toBe('memory');
    await d.close();
  });

  it('fails fast on bad configuration, naming the field', async () => {
    await expect(createDiscovery({ backend: 'nats' })).rejects.toThrow(ConfigError);
    await expect(createDiscovery({ backend: 'nats' })).rejects.toThrow(/url \(from discovery config\): is required for the nats backend/);
    await expect(createDiscovery({ backend: 'consul' as never })).rejects.toThrow(
      /unknown discovery backend "consul" \(available: memory, nats\)/,
    );
    await expect(createDiscovery({ backend: 'nats', url: 'http://x' })).rejects.toThrow(/expected a NATS URL/);
    await expect(createDiscovery({ backend: 'nats', url: 'nats://127.0.0.1:4222', pollIntervalMs: 0 })).rejects.toThrow(/pollIntervalMs/);
  });
});
