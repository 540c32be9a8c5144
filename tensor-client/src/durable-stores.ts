import type { Logger } from '@diffmesh/core';
import { parseDurableLocation, type DurableLocation, type RedisLocation } from './durable-location.js';
import type { DurableStore } from './durable-store.js';
import { RedisTensorStore } from './redis-store.js';
import { S3TensorStore } from './s3-store.js';

/** How a process reaches durable stores: endpoints and credentials (from configuration and the standard environment). */
export interface DurableSettings {
  /**
   * Endpoint of the S3-compatible server for `s3://` locations (`http://127.0.0.1:9000`);
   * absent = AWS (or the SDK's own `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`).
   */
  s3Endpoint?: string;
  /** S3 region. Default `AWS_REGION`, else `us-east-1`. */
  s3Region?: string;
  /**
   * Redis URIs with credentials this process was given (`--durable`, `REDIS_URL`): a ref's
   * `redis://host:port/…` is opened with the credentials of the one naming the same server.
   */
  redisCredentials?: string[];
  /** TTL of objects put without one (ms). */
  defaultTtlMs?: number;
  /** Most bytes a store keeps (0 = no limit of diffmesh's own). */
  capacityBytes?: number;
  /** Background sweep of each store opened (0 = none). */
  sweepIntervalMs?: number;
  retryAfterMs?: number;
  /** Bytes per redis value. */
  redisChunkBytes?: number;
  /** Part size of S3 multipart uploads. */
  s3PartBytes?: number;
  logger?: Logger;
}

/**
 * The durable settings of the standard environment: `REDIS_URL` (credentials for redis
 * locations on its server), `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (an S3-compatible
 * endpoint) and `AWS_REGION` / `AWS_DEFAULT_REGION`. AWS credentials themselves are read by the
 * AWS SDK's own chain (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, profiles, roles).
 */
export function durableSettingsFromEnv(env: Record<string, string | undefined>): DurableSettings {
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL;
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION;
  return {
    ...(endpoint ? { s3Endpoint: endpoint } : {}),
    ...(region ? { s3Region: region } : {}),
    ...(env.REDIS_URL ? { redisCredentials: [env.REDIS_URL] } : {}),
  };
}

/** Opens a durable store at `location` (a URI, or one parsed by {@link parseDurableLocation}). */
export function openDurableStore(location: string | DurableLocation, settings: DurableSettings = {}): DurableStore {
  const loc = typeof location === 'string' ? parseDurableLocation(location) : location;
  const common = {
    ...(settings.defaultTtlMs ? { defaultTtlMs: settings.defaultTtlMs } : {}),
    ...(settings.capacityBytes ? { capacityBytes: settings.capacityBytes } : {}),
    ...(settings.sweepIntervalMs ? { sweepIntervalMs: settings.sweepIntervalMs } : {}),
    ...(settings.retryAfterMs ? { retryAfterMs: settings.retryAfterMs } : {}),
    ...(settings.logger ? { logger: settings.logger } : {}),
  };
  if (loc.kind === 'redis') {
    return new RedisTensorStore({
      ...common,
      location: withCredentials(loc, settings.redisCredentials ?? []),
      ...(settings.redisChunkBytes ? { chunkBytes: settings.redisChunkBytes } : {}),
    });
  }
  return new S3TensorStore({
    ...common,
    location: loc,
    ...(settings.s3Endpoint ? { endpoint: settings.s3Endpoint } : {}),
    ...(settings.s3Region ? { region: settings.s3Region } : {}),
    ...(settings.s3PartBytes ? { partBytes: settings.s3PartBytes } : {}),
  });
}

/** A redis location with the credentials of a known URI naming the same server, unless it has its own. */
function withCredentials(loc: RedisLocation, known: string[]): RedisLocation {
  if (loc.password !== undefined || loc.username !== undefined) return loc;
  for (const text of known) {
    let other;
    try {
      other = parseDurableLocation(text);
    } catch {
      continue;
    }
    if (other.kind === 'redis' && other.host === loc.host && other.port === loc.port) {
      return {
        ...loc,
        ...(other.username !== undefined ? { username: other.username } : {}),
        ...(other.password !== undefined ? { password: other.password } : {}),
      };
    }
  }
  return loc;
}

/**
 * The durable stores a process reads from, one per URI, opened on first use: a reader
 * follows a ref's `durableUri` to the store holding its copy. Stores this process opened
 * itself (the one it puts into) can be added so that they are shared.
 */
export class DurableStores {
  private readonly stores = new Map<string, DurableStore>();
  private readonly owned = new Set<DurableStore>();

  constructor(private readonly settings: DurableSettings = {}) {}

  /** The store named by a ref's `durableUri` (throws DurableLocationError for a URI that names none). */
  open(uri: string): DurableStore {
    let store = this.stores.get(uri);
    if (!store) {
      const loc = parseDurableLocation(uri);
      store = this.stores.get(loc.uri);
      if (!store) {
        store = openDurableStore(loc, { ...this.settings, sweepIntervalMs: 0, capacityBytes: 0 });
        this.owned.add(store);
        this.stores.set(loc.uri, store);
      }
      this.stores.set(uri, store);
    }
    return store;
  }

  /** Makes `store` the one used for its URI (it stays the caller's to close). */
  add(store: DurableStore): void {
    this.stores.set(store.uri, store);
  }

  /** Closes the stores it opened. */
  async close(): Promise<void> {
    const owned = [...this.owned];
    this.owned.clear();
    this.stores.clear();
    await Promise.all(owned.map((s) => s.close()));
  }
}
