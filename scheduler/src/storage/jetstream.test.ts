import { connect } from 'nats';
import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';
import { newItem, newRecord, storeConformance } from './conformance.js';
import { JetStreamStore } from './jetstream.js';

const tok = (s: string): string => Buffer.from(s, 'utf8').toString('base64url');

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
    // Items of the version before tenants: subjects `{ns}.t.{pool}.{priority}.{queue}.{model}.{arrival}.{id}`
    // (no tenant token), no tenant in their bodies.
    legacy: async (open, ns, items) => {
      const s = await open(ns);
      // The pool's stream, as that version made it too.
      await s.admit(newRecord('first'), newItem('first'), 100);
      const first = await s.lease({ pool: 'enc', fits: [{ queues: ['enc'] }], owner: 'test' });
      if (first) await s.apply({ ack: first });
      const nc = await connect({ servers: server.url });
      try {
        const js = nc.jetstream();
        for (const [n, item] of items.entries()) {
          const { tenant: _, ...old } = item;
          const priority = String(2147483647 - item.priority).padStart(10, '0');
          const arrival = `${String(Date.now()).padStart(13, '0')}${String(n).padStart(6, '0')}`;
          const subject = `${ns}.t.${tok(item.pool)}.${priority}.${tok(item.queue)}.${tok(item.model)}.${arrival}.${tok(item.id)}`;
          await js.publish(subject, new TextEncoder().encode(JSON.stringify(old)));
        }
      } finally {
        await nc.close();
      }
      return s;
    },
    close: () => server.stop(),
  };
});
