import { existsSync } from 'node:fs';
import { connect } from 'nats';
import { describe, expect, it } from 'vitest';
import { NatsServerNotFoundError, findNatsServer, startNatsServer } from './nats-server.js';

describe('startNatsServer', () => {
  it('starts on a free port with JetStream, serves clients, and cleans up on stop', async () => {
    const server = await startNatsServer({ jetstream: true });
    try {
      expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
      expect(server.port).not.toBe(4222);
      expect(server.storeDir && existsSync(server.storeDir)).toBe(true);
      const nc = await connect({ servers: server.url });
      const jsm = await nc.jetstreamManager();
      const stream = await jsm.streams.add({ name: 'probe', subjects: ['probe.>'] });
      expect(stream.config.name).toBe('probe');
      await nc.close();
    } finally {
      await server.stop();
      await server.stop(); // idempotent
    }
    expect(existsSync(server.storeDir!)).toBe(false);
    await expect(connect({ servers: server.url, reconnect: false, timeout: 1000 })).rejects.toThrow();
  });

  it('binds the port it is given and reports a busy one with the server log', async () => {
    const first = await startNatsServer();
    try {
      const err = (await startNatsServer({ port: first.port }).then(
        (unexpected) => unexpected.stop(),
        (e: unknown) => e,
      )) as Error;
      expect(err).toBeInstanceOf(Error);
      expect(err.message).toMatch(/nats-server exited .* before listening/);
      expect(err.message).toMatch(/address already in use/);
    } finally {
      await first.stop();
    }
  });

  it('says how to install nats-server when the binary is missing', async () => {
    const err = await startNatsServer({ binary: 'nats-server-that-does-not-exist' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NatsServerNotFoundError);
    expect((err as NatsServerNotFoundError).code).toBe('NATS_SERVER_NOT_FOUND');
    expect((err as Error).message).toBe(
      'nats-server not found on PATH; install it (Debian/Ubuntu: apt-get install nats-server) or pass --nats URL (looked for "nats-server-that-does-not-exist")',
    );
    await expect(startNatsServer({ binary: '/nonexistent/nats-server' })).rejects.toThrow(/^nats-server not found on PATH; install it/);
    expect(await findNatsServer('nats-server-that-does-not-exist')).toBeUndefined();
  });
});
