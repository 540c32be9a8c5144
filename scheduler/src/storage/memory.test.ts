import { storeConformance } from './conformance.js';
import { MemoryStore } from './memory.js';

storeConformance('memory', async () => ({
  shared: false,
  durable: false,
  open: async (_ns, opts) => {
    const s = new MemoryStore({ retentionMs: 60_000, maxRetained: 10_000, leaseMs: 30_000, ...opts });
    await s.start();
    return s;
  },
}));
