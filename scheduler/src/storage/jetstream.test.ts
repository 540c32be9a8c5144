import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';
import { storeConformance } from './conformance.js';
import { JetStreamStore } from './jetstream.js';

storeConformance('jetstream', async () => {
  const server: RunningNatsServer = await startNatsServer({ jetstream: true });
  return {
    shared: true,
    durable: true,
    open: async (ns, opts) => {
      const s = new JetStreamStore({ url: server.url, namespace: ns, retentionMs: 60_000, maxRetained: 10_000, leaseMs: 30_000, ...opts });
      await s.start();
      return s;
    },
    close: () => server.stop(),
  };
});
