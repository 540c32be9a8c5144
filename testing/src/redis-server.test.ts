import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { RedisServerNotFoundError, findRedisServer, startRedisServer } from './redis-server.js';
import { startS3Server } from './s3-server.js';

/** Sends one command (inline protocol) and resolves with the server's first reply line. */
function command(port: number, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1', () => sock.write(`${line}\r\n`));
    sock.once('data', (d: Buffer) => {
      resolve(d.toString('utf8').split('\r\n')[0]);
      sock.end();
    });
    sock.once('error', reject);
  });
}

describe('startRedisServer', () => {
  it('starts on a free loopback port (never 6379) with nothing on disk, and cleans up on stop', async () => {
    const server = await startRedisServer();
    try {
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
      expect(server.port).not.toBe(6379);
      expect(await command(server.port, 'SET k v')).toBe('+OK');
      expect(await command(server.port, 'CONFIG GET save')).toBe('*2');
    } finally {
      await server.stop();
      await server.stop(); // idempotent
    }
    await expect(command(server.port, 'PING')).rejects.toThrow();
  });

  it('sets a password and a memory limit past which writes are refused', async () => {
    const server = await startRedisServer({ password: 'p@ss', maxmemoryBytes: 4 * 1024 * 1024 });
    try {
      expect(server.url).toBe(`redis://:p%40ss@127.0.0.1:${server.port}`);
      expect(await command(server.port, 'PING')).toMatch(/^-NOAUTH/);
      expect(await command(server.port, 'AUTH p@ss')).toBe('+OK');
    } finally {
      await server.stop();
    }
  });

  it('says how to install redis-server when the binary is missing', async () => {
    const err = await startRedisServer({ binary: 'redis-server-that-does-not-exist' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisServerNotFoundError);
    expect((err as RedisServerNotFoundError).code).toBe('REDIS_SERVER_NOT_FOUND');
    expect((err as Error).message).toBe(
      'redis-server not found on PATH; install it (Debian/Ubuntu: apt-get install redis-server) or pass the URL of a running server (looked for "redis-server-that-does-not-exist")',
    );
    expect(await findRedisServer('redis-server-that-does-not-exist')).toBeUndefined();
  });
});

describe('startS3Server', () => {
  it.each([false, true])('serves S3 on a free port with its buckets created (in process: %s), until stopped', async (inProcess) => {
    const server = await startS3Server({ buckets: ['one', 'two'], inProcess });
    try {
      expect(server.endpoint).toBe(`http://127.0.0.1:${server.port}`);
      expect(server.env).toMatchObject({ AWS_ACCESS_KEY_ID: 'S3RVER', AWS_ENDPOINT_URL_S3: server.endpoint });
      const res = await fetch(`${server.endpoint}/two?list-type=2`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('<Name>two</Name>');
      expect((await fetch(`${server.endpoint}/three`)).status).toBe(404);
    } finally {
      await server.stop();
      await server.stop(); // idempotent
    }
    await expect(fetch(`${server.endpoint}/one`)).rejects.toThrow();
  });
});
