import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { newRecord, storeConformance } from './conformance.js';
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
    // A file of the version before tenants: no tenant column, no tenant in the items' bodies.
    legacy: async (open, ns, items) => {
      const before = await open(ns);
      for (const item of items) await before.admit(newRecord(item.reqId), item, 100);
      await before.stop();
      const db = new Database(path.join(dir, `${ns}.sqlite`));
      db.exec(`ALTER TABLE items DROP COLUMN tenant; UPDATE items SET body = json_remove(body, '$.tenant');`);
      db.close();
      return open(ns);
    },
    close: () => rm(dir, { recursive: true, force: true }),
  };
});
