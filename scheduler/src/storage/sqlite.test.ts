import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { storeConformance } from './conformance.js';
import { SqliteStore } from './sqlite.js';

storeConformance('sqlite', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-sqlite-'));
  return {
    shared: true,
    durable: true,
    open: async (ns, opts) => {
      const s = new SqliteStore({
        file: path.join(dir, `${ns}.sqlite`),
        retentionMs: 60_000,
        maxRetained: 10_000,
        leaseMs: 30_000,
        ...opts,
      });
      await s.start();
      return s;
    },
    close: () => rm(dir, { recursive: true, force: true }),
  };
});
