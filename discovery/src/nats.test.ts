/**
 * Component tests against a real nats-server started on a free port (never the machine's
 * own NATS on 4222). The SIGKILL test runs the registering instance in a separate process
 * from the compiled output (`npx tsc -b discovery` first; `npm test` builds).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from 'nats';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EventRecorder } from './fixtures/events.js';
import { NatsDiscovery, createDiscovery, type Discovery, type InstanceRegistration } from './index.js';
import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';

function dit(version: string, extra: Partial<InstanceRegistration> = {}): InstanceRegistration {
  return {
    name: 'dit-svc',
    version,
    nodeId: 'node-a',
    pool: 'dit-tiny',
    stage: 'denoising',
    grpcAddress: '127.0.0.1:50051',
    models: ['diffmesh/tiny-shapes', 'diffmesh/synthetic-dit-image'],
    capacity: 2,
    ...extra,
  };
}

const decode = (b: Uint8Array): unknown => JSON.parse(new TextDecoder().decode(b));

let server: RunningNatsServer;
let raw: NatsConnection;
const open: Discovery[] = [];
const children: ChildProcess[] = [];

async function discovery(opts: { pollIntervalMs?: number; pollWindowMs?: number } = {}): Promise<NatsDiscovery> {
  const d = await NatsDiscovery.connect(server.url, opts);
  open.push(d);
  return d;
}

beforeAll(async () => {
  server = await startNatsServer();
  raw = await connect({ servers: server.url });
});

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(open.splice(0).map((d) => d.close()));
});

afterAll(async () => {
  await raw?.close();
  await server?.stop();
});

describe('NatsDiscovery', () => {
  it('sees two versions of dit-svc with their metadata and version, and pins by range', async () => {
    const svc = await discovery();
    const a = await svc.register(dit('1.0.0', { tensorAddress: '127.0.0.1:50070', metadata: { accelerator: 'cpu' } }));
    await svc.register(dit('1.1.0', { id: 'dit-b', grpcAddress: '127.0.0.1:50052', capacity: 4 }));

    const watcher = await discovery();
    const all = await watcher.instances({ name: 'dit-svc' });
    expect(all.map((i) => [i.id, i.version])).toEqual([
      [a.instance.id, '1.0.0'],
      ['dit-b', '1.1.0'],
    ]);
    expect(all[0]).toMatchObject({
      name: 'dit-svc',
      nodeId: 'node-a',
      pool: 'dit-tiny',
      stage: 'denoising',
      grpcAddress: '127.0.0.1:50051',
      models: ['diffmesh/tiny-shapes', 'diffmesh/synthetic-dit-image'],
      capacity: 2,
      tensorAddress: '127.0.0.1:50070',
      metadata: { accelerator: 'cpu' },
    });
    expect(all[0].startedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(all[0].serviceId).toBe(a.instance.id); // no id chosen: the micro-service id is the instance id
    expect(all[1]).toMatchObject({ grpcAddress: '127.0.0.1:50052', capacity: 4, metadata: {} });
    expect(all[1].serviceId).toMatch(/^[A-Za-z0-9]+$/);
    expect(all[1].serviceId).not.toBe('dit-b');
    const byServiceId = decode((await raw.request(`$SRV.INFO.dit-svc.${all[1].serviceId}`, undefined, { timeout: 2000 })).data);
    expect(byServiceId).toMatchObject({ version: '1.1.0', metadata: { instance_id: 'dit-b' } });
    expect(all[1].tensorAddress).toBeUndefined();

    expect((await watcher.instances({ name: 'dit-svc', version: '^1.1.0' })).map((i) => i.id)).toEqual(['dit-b']);
    expect((await watcher.instances({ version: '~1.0.0' })).map((i) => i.id)).toEqual([a.instance.id]);
    expect(await watcher.instances({ model: 'diffmesh/tiny-shapes', pool: 'dit-tiny' })).toHaveLength(2);
    expect(await watcher.instances({ name: 'vae-svc' })).toEqual([]);
  });

  it('answers $SRV.PING, $SRV.INFO and $SRV.STATS as a NATS micro-service', async () => {
    const svc = await discovery();
    const reg = await svc.register(dit('1.2.0', { tensorAddress: '127.0.0.1:50070' }));
    const id = reg.instance.id;

    const info = decode((await raw.request('$SRV.INFO.dit-svc', undefined, { timeout: 2000 })).data) as Record<string, unknown>;
    expect(info).toMatchObject({
      type: 'io.nats.micro.v1.info_response',
      name: 'dit-svc',
      id,
      version: '1.2.0',
      metadata: {
        grpc_address: '127.0.0.1:50051',
        node_id: 'node-a',
        pool: 'dit-tiny',
        stage: 'denoising',
        models: 'diffmesh/tiny-shapes,diffmesh/synthetic-dit-image',
        capacity: '2',
        tensor_address: '127.0.0.1:50070',
      },
    });
    expect(info.endpoints).toEqual([expect.objectContaining({ name: 'load', subject: `diffmesh.discovery.load.${id}` })]);

    const ping = decode((await raw.request(`$SRV.PING.dit-svc.${id}`, undefined, { timeout: 2000 })).data);
    expect(ping).toMatchObject({ type: 'io.nats.micro.v1.ping_response', name: 'dit-svc', id, version: '1.2.0' });
  });

  it('carries load to the load endpoint, $SRV.STATS and watchers', async () => {
    const svc = await discovery();
    const reg = await svc.register(dit('1.0.0'));
    const id = reg.instance.id;
    const watcher = await discovery();
    const rec = new EventRecorder();
    watcher.subscribe(rec.listener);
    await watcher.refresh();

    reg.update({ inFlight: 2, queued: 5 });
    const load = decode((await raw.request(`diffmesh.discovery.load.${id}`, undefined, { timeout: 2000 })).data);
    expect(load).toEqual({ inFlight: 2, queued: 5 });

    const stats = decode((await raw.request(`$SRV.STATS.dit-svc.${id}`, undefined, { timeout: 2000 })).data) as {
      endpoints: { name: string; data: unknown }[];
    };
    expect(stats.endpoints.find((e) => e.name === 'load')?.data).toEqual({ inFlight: 2, queued: 5 });

    await watcher.refresh();
    const ev = await rec.waitFor((e) => e.type === 'updated' && e.instance.id === id, 5000, 'an updated event with the load');
    expect(ev.instance.load).toEqual({ inFlight: 2, queued: 5 });
    expect((await watcher.instances())[0].load).toEqual({ inFlight: 2, queued: 5 });

    // A load function is asked on every read.
    let inFlight = 1;
    const pulled = await svc.register(dit('1.0.1'), () => ({ inFlight }));
    inFlight = 7;
    const pulledLoad = decode((await raw.request(`diffmesh.discovery.load.${pulled.instance.id}`, undefined, { timeout: 2000 })).data);
    expect(pulledLoad).toEqual({ inFlight: 7 });
  });

  it('reports a graceful stop as down at once, without waiting for missed polls', async () => {
    const svc = await discovery();
    const reg = await svc.register(dit('1.0.0'));
    // Polls an hour apart: only the down notice can produce the event.
    const watcher = await discovery({ pollIntervalMs: 3_600_000 });
    const rec = new EventRecorder();
    watcher.subscribe(rec.listener);
    await watcher.refresh();
    await rec.waitFor((e) => e.type === 'up' && e.instance.id === reg.instance.id, 5000, 'up');

    await reg.stop();
    const down = await rec.waitFor((e) => e.type === 'down', 5000, 'down after stop()');
    expect(down.instance).toMatchObject({ id: reg.instance.id, name: 'dit-svc', version: '1.0.0' });

    // It no longer answers, and a fresh poll does not bring it back.
    await watcher.refresh();
    expect(await watcher.instances()).toEqual([]);
    expect(rec.of('up', reg.instance.id)).toHaveLength(1);
    await expect(raw.request(`$SRV.PING.dit-svc.${reg.instance.id}`, undefined, { timeout: 500 })).rejects.toThrow();
  });

  it('a poll whose answers were collected before a graceful stop does not bring the instance back', async () => {
    const svc = await discovery();
    const reg = await svc.register(dit('1.0.0', { id: 'leaving' }));
    // Polls an hour apart, each collecting answers for 1.5 s: the stop lands inside one.
    const watcher = await discovery({ pollIntervalMs: 3_600_000, pollWindowMs: 1500 });
    const rec = new EventRecorder();
    watcher.subscribe(rec.listener);
    await watcher.refresh();
    await rec.waitFor((e) => e.type === 'up' && e.instance.id === 'leaving', 5000, 'up');

    const polling = watcher.refresh();
    await new Promise((r) => setTimeout(r, 300)); // its answer is in
    await reg.stop();
    await rec.waitFor((e) => e.type === 'down' && e.instance.id === 'leaving', 5000, 'down after stop()');
    await polling;
    expect(await watcher.instances()).toEqual([]);
    expect(rec.of('up', 'leaving')).toHaveLength(1);
  });

  it('sees a new registration at once through its up notice', async () => {
    const watcher = await discovery({ pollIntervalMs: 3_600_000 });
    const rec = new EventRecorder();
    watcher.subscribe(rec.listener);
    await watcher.refresh();
    const svc = await discovery();
    const reg = await svc.register(dit('3.0.0', { id: 'fresh' }));
    const up = await rec.waitFor((e) => e.type === 'up' && e.instance.id === 'fresh', 5000, 'up notice');
    expect(up.instance).toMatchObject({ version: '3.0.0', grpcAddress: '127.0.0.1:50051' });
    await reg.stop();
  });

  it('reports an instance whose process is killed (SIGKILL) as down within 5 s', async () => {
    const fixture = builtFixture();
    const watcher = await discovery(); // defaults: poll every 1 s, down after 2 misses
    const rec = new EventRecorder();
    watcher.subscribe(rec.listener);
    await watcher.refresh();

    const child = spawn(process.execPath, [fixture, JSON.stringify({ url: server.url, registration: dit('2.0.0', { id: 'doomed' }) })], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    await readyLine(child, 15_000);
    await rec.waitFor((e) => e.type === 'up' && e.instance.id === 'doomed', 5000, 'the child instance up');

    child.kill('SIGKILL');
    const killedAt = Date.now();
    const down = await rec.waitFor((e) => e.type === 'down' && e.instance.id === 'doomed', 5000, 'down after SIGKILL');
    expect(down.instance.version).toBe('2.0.0');
    expect(Date.now() - killedAt).toBeLessThan(5000);
    expect(await watcher.instances({ name: 'dit-svc' })).toEqual([]);
  });

  it('keeps registrations through a server restart without reporting them down', async () => {
    const own = await startNatsServer();
    try {
      const svc = await NatsDiscovery.connect(own.url);
      const watcher = await NatsDiscovery.connect(own.url);
      open.push(svc, watcher);
      await svc.register(dit('1.0.0', { id: 'survivor' }));
      const rec = new EventRecorder();
      watcher.subscribe(rec.listener);
      await rec.waitFor((e) => e.type === 'up' && e.instance.id === 'survivor', 5000, 'up');

      await own.stop();
      const again = await startNatsServer({ port: own.port });
      try {
        // The registration answers again once its connection is back.
        const probe = await connect({ servers: again.url });
        try {
          await waitUntil(async () => {
            try {
              await probe.request('$SRV.PING.dit-svc', undefined, { timeout: 300 });
              return true;
            } catch {
              return false;
            }
          }, 10_000);
        } finally {
          await probe.close();
        }
        await watcher.refresh();
        expect((await watcher.instances()).map((i) => i.id)).toEqual(['survivor']);
        expect(rec.of('down', 'survivor')).toEqual([]);
      } finally {
        await Promise.all(open.splice(0).map((d) => d.close()));
        await again.stop();
      }
    } finally {
      await own.stop();
    }
  });

  it('is created by the factory and fails clearly when NATS is unreachable', async () => {
    const d = await createDiscovery({ backend: 'nats', url: server.url, pollIntervalMs: 500 });
    open.push(d);
    expect(d.backend).toBe('nats');
    const dead = await startNatsServer();
    const deadUrl = dead.url;
    await dead.stop();
    await expect(createDiscovery({ backend: 'nats', url: deadUrl, connectTimeoutMs: 1000 })).rejects.toThrow(
      new RegExp(`^discovery: cannot connect to NATS at ${deadUrl.replace(/[.]/g, '\\.')}`),
    );
  });

  it('close() unregisters its instances and leaves the connection drained', async () => {
    const svc = await NatsDiscovery.connect(server.url);
    const watcher = await discovery({ pollIntervalMs: 3_600_000 });
    const rec = new EventRecorder();
    watcher.subscribe(rec.listener);
    await watcher.refresh();
    const reg = await svc.register(dit('1.0.0'));
    await rec.waitFor((e) => e.type === 'up' && e.instance.id === reg.instance.id, 5000, 'up');
    await svc.close();
    await svc.close();
    expect(svc.connection.isClosed()).toBe(true);
    await rec.waitFor((e) => e.type === 'down' && e.instance.id === reg.instance.id, 5000, 'down after close()');
  });
});

/** Path of the compiled child fixture; fails with a hint when the build is missing or stale. */
function builtFixture(): string {
  const pairs = [
    ['./fixtures/registered-child.ts', '../dist/fixtures/registered-child.js'],
    ['./nats.ts', '../dist/nats.js'],
    ['./instance.ts', '../dist/instance.js'],
  ].map(([src, out]) => [fileURLToPath(new URL(src, import.meta.url)), fileURLToPath(new URL(out, import.meta.url))]);
  for (const [src, out] of pairs) {
    if (!existsSync(out) || statSync(out).mtimeMs < statSync(src).mtimeMs) {
      throw new Error(`the child-process fixture is not built or is stale (${out}): run \`npx tsc -b discovery\` first`);
    }
  }
  return pairs[0][1];
}

function readyLine(child: ChildProcess, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`child not ready within ${timeoutMs} ms: ${err}`)), timeoutMs);
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /READY (\S+)\n/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${signal ?? code}) before registering: ${err}`));
    });
  });
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50)); // back off between probes
  }
  throw new Error(`condition not met within ${timeoutMs} ms`);
}
