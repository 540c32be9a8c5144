/**
 * Where durable copies of objects live: a redis server or an S3-compatible bucket, named by
 * a URI. The credential-free form of the URI is what refs carry (`ObjectRef.durableUri`) and
 * what logs show; credentials come only from configuration and the standard environment.
 */
import { redactUri } from '@diffmesh/core';

/** The kinds of durable store. */
export const DURABLE_KINDS = ['redis', 's3'] as const;
export type DurableKind = (typeof DURABLE_KINDS)[number];

/** Key prefix of a redis store whose URI names none. */
export const DEFAULT_REDIS_PREFIX = 'diffmesh:tensor';

/** A redis store: `redis[s]://[user:password@]host[:port][/db[/prefix]]`. */
export interface RedisLocation {
  kind: 'redis';
  /** `redis[s]://host:port/db[/prefix]`, without credentials. */
  uri: string;
  host: string;
  port: number;
  db: number;
  tls: boolean;
  /** Prefix of every key ({@link DEFAULT_REDIS_PREFIX} unless the URI names one). */
  prefix: string;
  username?: string;
  password?: string;
}

/** An S3-compatible bucket: `s3://bucket[/prefix]`. The endpoint and credentials come from configuration. */
export interface S3Location {
  kind: 's3';
  /** `s3://bucket[/prefix]`. */
  uri: string;
  bucket: string;
  /** Key prefix without a trailing `/` (`''` = the bucket's root). */
  prefix: string;
}

export type DurableLocation = RedisLocation | S3Location;

/** A URI that cannot name a durable store. The message never repeats credentials. */
export class DurableLocationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DurableLocationError';
  }
}

/**
 * Parses `redis://…`, `rediss://…` (TLS) or `s3://bucket/prefix`. Throws
 * {@link DurableLocationError} naming what is wrong, never the URI's credentials.
 */
export function parseDurableLocation(text: string): DurableLocation {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new DurableLocationError(
      `not a URI: expected redis://host:port/db or s3://bucket/prefix, got ${JSON.stringify(redactUri(text))}`,
    );
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme === 'redis' || scheme === 'rediss') {
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (!host) throw new DurableLocationError(`${scheme}:// URI names no host`);
    const port = url.port === '' ? 6379 : Number(url.port);
    const [dbText = '', ...rest] = url.pathname.replace(/^\/+/, '').split('/');
    const db = dbText === '' ? 0 : Number(dbText);
    if (!Number.isInteger(db) || db < 0)
      throw new DurableLocationError(`${scheme}:// URI: the database must be a number, got ${JSON.stringify(dbText)}`);
    const prefix = decodeURIComponent(rest.join('/').replace(/\/+$/, '')) || DEFAULT_REDIS_PREFIX;
    const hostPart = host.includes(':') ? `[${host}]` : host;
    const uri = `${scheme}://${hostPart}:${port}/${db}${prefix === DEFAULT_REDIS_PREFIX ? '' : `/${encodeURIComponent(prefix)}`}`;
    return {
      kind: 'redis',
      uri,
      host,
      port,
      db,
      tls: scheme === 'rediss',
      prefix,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    };
  }
  if (scheme === 's3') {
    if (url.username || url.password) throw new DurableLocationError('s3:// URI: credentials come from AWS_* variables, not the URI');
    const bucket = url.hostname;
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
      throw new DurableLocationError(`s3:// URI: ${JSON.stringify(bucket)} is not a bucket name (3-63 of a-z 0-9 . -)`);
    }
    const prefix = decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, '');
    return { kind: 's3', uri: prefix ? `s3://${bucket}/${prefix}` : `s3://${bucket}`, bucket, prefix };
  }
  throw new DurableLocationError(`unknown scheme ${JSON.stringify(scheme)}: expected redis://, rediss:// or s3://`);
}
