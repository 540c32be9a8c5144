import { mkdtemp, rm } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection, type NatsError } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsDiscovery, natsConnectionOptions } from '@diffmesh/discovery';
import { JetStreamStore } from '@diffmesh/scheduler';
import { newItem, newRecord } from '@diffmesh/scheduler/test-records';
import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';
import { ensureMeshCredentials, type MeshCredentials, type NatsRole } from './mesh-credentials.js';
import { meshNatsServerSecurity } from './nats-permissions.js';

// The mesh's nats-server as `diffmesh up` starts it: JetStream, TLS only (mutual), the mesh's
// nkey users with their roles' permissions.
let dir: string;
let creds: MeshCredentials;
let server: RunningNatsServer;
const open: NatsConnection[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-natsperm-'));
  creds = await ensureMeshCredentials(dir);
  server = await startNatsServer({ jetstream: true, ...(await meshNatsServerSecurity(creds)) });
}, 60_000);

afterAll(async () => {
  for (const nc of open) await nc.close().catch(() => undefined);
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A connection as `role` with `identity`'s certificate (what the services do). */
async function connectAs(role: NatsRole, identity: string): Promise<NatsConnection> {
  const tls = await creds.tls(identity);
  const nc = await connect({
    servers: server.url,
    reconnect: false,
    timeout: 3000,
    ...natsConnectionOptions({ credentialsFile: creds.natsSeedFile(role), tls }),
  });
  open.push(nc);
  return nc;
}

/** The error the server answers a subscription with (undefined when it allows it). */
async function subscribeError(nc: NatsConnection, subject: string): Promise<NatsError | undefined> {
  return new Promise((resolve) => {
    nc.subscribe(subject, { callback: (err) => err && resolve(err) });
    // A flush round trip: the server answers the SUB (an -ERR) before the PING that follows it.
    void nc.flush().then(() => setImmediate(() => resolve(undefined)));
  });
}

/** What the server says to a client that speaks plain NATS on its port, and whether it hung up. */
function plainTextAnswer(url: string): Promise<{ text: string; hungUp: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tcpConnect(Number(port), hostname);
    let text = '';
    let sent = false;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, 5000);
    socket.on('data', (d) => {
      text += d.toString('utf8');
      if (text.includes('INFO ') && !sent) {
        sent = true;
        socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\nSUB diffmesh.> 1\r\n');
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, hungUp: !timedOut });
    });
    socket.on('error', reject);
  });
}

const ns = 'diffmesh';

describe("the mesh's nats-server", () => {
  it('refuses a client that speaks plain text', async () => {
    const answer = await plainTextAnswer(server.url);
    expect(answer.text).toMatch(/"tls_required":true/);
    // It waits for a TLS handshake: plain-text commands get no PONG, and the connection is closed.
    expect(answer.text).not.toMatch(/PONG/);
    expect(answer.hungUp).toBe(true);
  });

  it("refuses a TLS client that lacks the mesh's CA or a client certificate", async () => {
    const seed = natsConnectionOptions({ credentialsFile: creds.natsSeedFile('stage') });
    // The server's certificate is the mesh CA's: a client trusting only the system roots refuses it.
    await expect(connect({ servers: server.url, reconnect: false, timeout: 3000, ...seed })).rejects.toThrow();
    // The server verifies clients: the CA alone is not enough.
    await expect(
      connect({
        servers: server.url,
        reconnect: false,
        timeout: 3000,
        ...natsConnectionOptions({ credentialsFile: creds.natsSeedFile('stage'), tls: { ca: creds.ca } }),
      }),
    ).rejects.toThrow();
  });

  it("lets the scheduler queue and lease prompts, while a stage's user can read neither the queue nor the scheduler's replies", async () => {
    const sched = await creds.tls('scheduler');
    const store = new JetStreamStore({
      url: server.url,
      namespace: ns,
      credentialsFile: creds.natsSeedFile('scheduler'),
      natsTls: sched,
      retentionMs: 60_000,
      maxRetained: 100,
      leaseMs: 30_000,
    });
    await store.start();
    try {
      await store.admit(newRecord('r1'), newItem('r1'), 10);
      const lease = await store.lease({ pool: 'enc', fits: [{ queues: ['enc'] }], owner: 'test' });
      expect(lease?.item.reqId).toBe('r1');
      await store.apply({ ack: lease! });

      const stage = await connectAs('stage', 'stage:dit');
      expect((await subscribeError(stage, `${ns}.t.>`))?.code).toBe('PERMISSIONS_VIOLATION');
      expect((await subscribeError(stage, `_INBOX.${creds.natsRoleKeys.scheduler}.>`))?.code).toBe('PERMISSIONS_VIOLATION');
      expect((await subscribeError(stage, '$KV.>'))?.code).toBe('PERMISSIONS_VIOLATION');
      // No JetStream API: the queue stream and the requests bucket are out of reach.
      await expect(stage.jetstreamManager()).rejects.toMatchObject({ code: 'PERMISSIONS_VIOLATION' });
      await expect(stage.request(`$JS.API.STREAM.INFO.KV_${ns}_requests`, undefined, { timeout: 2000 })).rejects.toMatchObject({
        code: 'PERMISSIONS_VIOLATION',
      });
      // Its own replies are its own to read.
      expect(await subscribeError(stage, `_INBOX.${creds.natsRoleKeys.stage}.x`)).toBeUndefined();

      const scheduler = await connectAs('scheduler', 'scheduler');
      const jsm = await scheduler.jetstreamManager();
      expect((await jsm.streams.info(`KV_${ns}_requests`)).config.name).toBe(`KV_${ns}_requests`);
    } finally {
      await store.stop();
    }
  }, 60_000);

  it('carries discovery between the roles: a stage registers, the client role sees it', async () => {
    const stageTls = await creds.tls('stage:dit');
    const clientTls = await creds.tls('client');
    const stage = await NatsDiscovery.connect(server.url, { credentialsFile: creds.natsSeedFile('stage'), tls: stageTls });
    const watcher = await NatsDiscovery.connect(server.url, {
      credentialsFile: creds.natsSeedFile('client'),
      tls: clientTls,
      pollIntervalMs: 200,
    });
    try {
      await stage.register({
        id: 'dit-1',
        name: 'dit-svc',
        version: '1.0.0',
        nodeId: 'n1',
        pool: 'dit',
        stage: 'denoising',
        grpcAddress: '127.0.0.1:1',
        models: ['m1'],
        capacity: 1,
      });
      await watcher.refresh();
      const seen = await watcher.instances();
      expect(seen.map((i) => i.id)).toContain('dit-1');
    } finally {
      await watcher.close();
      await stage.close();
    }
  }, 30_000);
});
