import { startRedisServer, type RunningRedisServer } from '@diffmesh/testing';
import { storeConformance } from './conformance.js';
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
    close: () => server.stop(),
  };
});
