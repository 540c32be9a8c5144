import { ConfigError } from '@diffmesh/core';
import type { NatsTlsFiles } from '@diffmesh/discovery';
import { JetStreamStore } from './jetstream.js';
import { MemoryStore } from './memory.js';
import { RedisStore } from './redis.js';
import { SqliteStore } from './sqlite.js';
import { STORE_BACKENDS, type SchedulerStore, type StoreBackend, type StoreOptions } from './types.js';

/** Where a scheduler keeps requests and task queues (the `queue*` fields of its config). */
export interface StoreConfig {
  /** `memory` (default), `sqlite`, `redis` or `jetstream`. */
  backend: StoreBackend;
  /** redis: `redis://host:port[/db]`; jetstream: the NATS URL. */
  url?: string;
  /** sqlite: the database file. */
  sqlitePath?: string;
  /** Names the shared state (redis key prefix `{namespace}:`, JetStream streams and bucket). Default `diffmesh`. */
  namespace?: string;
  /** jetstream: file with the NATS credentials (see `natsAuthenticatorFromFile` of discovery). */
  natsCredentials?: string;
  /** jetstream: TLS of the NATS connection (PEM files). */
  natsTls?: NatsTlsFiles;
}

/**
 * Makes the store a configuration names. Throws {@link ConfigError} naming the field when
 * the backend needs a setting it was not given (`queueUrl` for redis and jetstream,
 * `sqlitePath` for sqlite). The store still has to be started.
 */
export function createSchedulerStore(config: StoreConfig, opts: StoreOptions): SchedulerStore {
  const fail = (path: string, message: string): never => {
    throw new ConfigError([{ path, source: 'scheduler store', message }]);
  };
  const namespace = config.namespace || 'diffmesh';
  switch (config.backend) {
    case 'memory':
      return new MemoryStore(opts);
    case 'sqlite':
      return new SqliteStore({ ...opts, file: config.sqlitePath || fail('sqlitePath', 'is required with queue sqlite') });
    case 'redis':
      return new RedisStore({
        ...opts,
        url: config.url || fail('queueUrl', 'is required with queue redis (e.g. redis://127.0.0.1:6379, or set REDIS_URL)'),
        prefix: `${namespace}:`,
      });
    case 'jetstream':
      return new JetStreamStore({
        ...opts,
        url: config.url || fail('queueUrl', 'is required with queue jetstream (the NATS URL; --nats is used when it is set)'),
        namespace,
        ...(config.natsCredentials ? { credentialsFile: config.natsCredentials } : {}),
        ...(config.natsTls ? { natsTls: config.natsTls } : {}),
      });
    default:
      return fail('queue', `unknown backend ${JSON.stringify(config.backend)} (available: ${STORE_BACKENDS.join(', ')})`);
  }
}
