import { describe, expect, it } from 'vitest';
import { Code } from '@diffmesh/core';
import { rejection, startRedisServer, type RunningRedisServer } from '@diffmesh/testing';
import { Redis } from 'ioredis';
import { newRecord, storeConformance } from './conformance.js';
import { RedisStore } from './redis.js';

storeConformance('redis', async () => {
  const server: RunningRedisServer = await startRedisServer();
  return {
    shared: true,
    durable: true,
    open: async (ns, opts) => {
      const s = new RedisStore({ url: server.url, prefix: `${ns}:`, retentionMs: 60_000, maxRetained: 10_000, leaseMs: 30_000, ...opts });
      await s.start();
      return s;
    },
    // Items of the version before tenants: no `t` field, no tenant in their bodies.
    legacy: async (open, ns, items) => {
      const s = await open(ns);
      const raw = new Redis(server.url);
      try {
        for (const item of items) {
          await s.admit(newRecord(item.reqId), item, 100);
          const { tenant: _, ...old } = item;
          await raw.hdel(`${ns}:i:${item.id}`, 't');
          await raw.hset(`${ns}:i:${item.id}`, 'body', JSON.stringify(old));
        }
      } finally {
        raw.disconnect();
      }
      return s;
    },
    close: () => server.stop(),
  };
});

describe('redis store that cannot reach its server', () => {
  it('fails to start with UNAVAILABLE, naming the address but not the password', async () => {
    const s = new RedisStore({
      url: 'redis://diffmesh:s3cret-pass@127.0.0.1:1',
      prefix: 'x:',
      retentionMs: 60_000,
      maxRetained: 10,
      leaseMs: 30_000,
    });
    const err = await rejection(s.start());
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(err.message).toContain('redis://***@127.0.0.1:1');
    expect(err.message).not.toContain('s3cret');
    await s.stop().catch(() => undefined);
  });
});
