import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { natsTlsConfigFields, natsTlsConfigMappings } from '@diffmesh/discovery';
import { WRITE_THROUGH_MODES } from './write-through.js';
import {
  LogConfigSchema,
  logConfigMappings,
  TlsConfigSchema,
  tlsConfigMappings,
  defineConfig,
  type LoadConfigOptions,
  loadConfig,
  redactUri,
} from '@diffmesh/core';
import { DurableLocationError, defaultShmDir, parseDurableLocation, type DurableLocation } from '@diffmesh/tensor-client';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/** Smallest and largest Get chunk: large enough to amortise per-message cost, small enough for the 4 MiB-class message limits. */
export const MIN_CHUNK_BYTES = 1 * MiB;
export const MAX_CHUNK_BYTES = 4 * MiB;

/** Where tensor-svc keeps objects (see the `backend` field). */
export const TENSOR_SVC_BACKENDS = ['memory', 'redis', 's3'] as const;
export type TensorSvcBackend = (typeof TENSOR_SVC_BACKENDS)[number];

/**
 * tensor-svc configuration. Sizes are bytes, durations milliseconds. Fields whose default is
 * `''` or `0` are derived from others (see the descriptions) by {@link resolveTensorSvcConfig}.
 */
export const TensorSvcConfigSchema = z
  .object({
    listen: z.string().min(1).default('127.0.0.1:0').describe('gRPC listen address host:port (port 0 = any free port)'),
    advertiseAddress: z
      .string()
      .default('')
      .describe(
        'host:port written into ObjectRefs as owner_address for readers on other nodes; a host alone or port 0 takes the bound port (empty = the bound listen address, 127.0.0.1 for a wildcard: set it when listening on 0.0.0.0)',
      ),
    nodeId: z
      .string()
      .min(1)
      .default(hostname())
      .describe('node this service runs on; clients with the same node id read objects from shared memory (default: the host name)'),
    chunkBytes: z
      .number()
      .int()
      .min(MIN_CHUNK_BYTES)
      .max(MAX_CHUNK_BYTES)
      .default(2 * MiB)
      .describe('bytes per Get chunk (1–4 MiB)'),
    maxStreamBufferedBytes: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe(
        'most object bytes one stream holds in the heap: Get chunks read but not yet flushed to the socket, however slowly the client reads; Put chunks received but not yet written (0 = 2 × chunkBytes; at least chunkBytes)',
      ),
    memoryCapacityBytes: z
      .number()
      .int()
      .positive()
      .default(2 * GiB)
      .describe('most object bytes held in shared memory (shmDir)'),
    spillThresholdBytes: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe('shared-memory use past which new objects go to disk (spillDir) while the disk has room (0 = 80% of memoryCapacityBytes)'),
    diskCapacityBytes: z
      .number()
      .int()
      .nonnegative()
      .default(10 * GiB)
      .describe('most object bytes spilled to disk (0 = no spilling: puts past memoryCapacityBytes fail)'),
    spillDir: z
      .string()
      .default('')
      .describe('directory of spilled objects; put it on a real disk (empty = <os tmpdir>/diffmesh-spill-<nodeId>)'),
    shmDir: z
      .string()
      .default('')
      .describe(
        'shared-memory directory where objects are published for same-node readers (empty = /dev/shm/diffmesh-<nodeId>, or <os tmpdir>/diffmesh-shm-<nodeId> without /dev/shm)',
      ),
    defaultTtlMs: z
      .number()
      .int()
      .positive()
      .default(10 * 60_000)
      .describe('time to live of objects put without one'),
    sweepIntervalMs: z
      .number()
      .int()
      .nonnegative()
      .default(10_000)
      .describe('how often expired objects are deleted in the background (0 = only when accessed or when space is needed)'),
    retryAfterMs: z.number().int().positive().default(1000).describe('Retry-After suggested with STORE_FULL'),
    metricsListen: z
      .string()
      .default('')
      .describe('host:port of a Prometheus text endpoint at /metrics (empty = off; port 0 = any free port)'),
    drainGraceMs: z.number().int().nonnegative().default(10_000).describe('time calls in flight get to finish after SIGTERM'),
    backend: z
      .enum(TENSOR_SVC_BACKENDS)
      .default('memory')
      .describe(
        'where objects live: memory = this node (shared memory, then the spill disk; written through to `durable` when set); redis or s3 = the durable store alone (no shared memory)',
      ),
    durable: z
      .string()
      .default('')
      .describe(
        'durable store, redis://[:password@]host:6379/0[/prefix] or s3://bucket/prefix: the write-through target with backend memory (empty = none), the home of every object with backend redis (empty = REDIS_URL) or s3. Never logged with its credentials',
      ),
    s3Endpoint: z
      .string()
      .default('')
      .describe(
        'endpoint of an S3-compatible server for s3:// (e.g. http://127.0.0.1:9000; empty = AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)',
      ),
    writeThrough: z
      .enum(WRITE_THROUGH_MODES)
      .default('all')
      .describe(
        "with backend memory and a durable store: which objects are copied there before their put is answered: all, final (requests' results only) or none",
      ),
    writeThroughMinBytes: z.number().int().nonnegative().default(0).describe('objects smaller than this are not written through'),
    writeThroughMaxBytes: z
      .number()
      .int()
      .nonnegative()
      .default(0)
      .describe('objects larger than this are not written through (0 = no limit)'),
    durableSweepIntervalMs: z
      .number()
      .int()
      .nonnegative()
      .default(60_000)
      .describe(
        'how often expired objects are deleted from the durable store (S3 lists its prefix; redis expires keys itself) (0 = never)',
      ),
    recover: z
      .boolean()
      .default(true)
      .describe('after a crash, find the objects left in shmDir and spillDir again (expired ones are deleted); false = delete them'),
    natsUrl: z
      .string()
      .default('')
      .describe('NATS server(s) to register in as `tensor-svc` (stage `tensor`), comma-separated (empty = not registered)'),
    natsCredentials: z
      .string()
      .default('')
      .describe(
        "file with this process's NATS credentials: an nkey user seed (SU…), a .creds file or user:password (the file, never the secret, so it stays out of argv)",
      ),
    ...natsTlsConfigFields,
    instanceId: z.string().default('').describe('instance id in discovery (empty = tensor-svc-<nodeId>)'),
    capabilities: z
      .boolean()
      .default(true)
      .describe(
        "issue a capability in each stored object's ref and require it to read, touch or delete the object (false = anyone who knows an id may)",
      ),
    capabilityKeyFile: z
      .string()
      .default('')
      .describe(
        'file holding the capability key (made with a random key, mode 0600, when missing; share it between tensor services that should honour each other’s refs) (empty = <os tmpdir>/diffmesh-capability-<nodeId>.key)',
      ),
    tls: TlsConfigSchema.prefault({}).describe('TLS of the TensorService API'),
    log: LogConfigSchema.prefault({}),
  })
  .superRefine((c, ctx) => {
    if (c.spillThresholdBytes > c.memoryCapacityBytes) {
      ctx.addIssue({
        code: 'custom',
        path: ['spillThresholdBytes'],
        message: `must not exceed memoryCapacityBytes (${c.memoryCapacityBytes})`,
      });
    }
    if (c.maxStreamBufferedBytes !== 0 && c.maxStreamBufferedBytes < c.chunkBytes) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxStreamBufferedBytes'],
        message: `must be 0 or at least chunkBytes (${c.chunkBytes})`,
      });
    }
    if (c.shmDir !== '' && c.spillDir !== '' && path.resolve(c.shmDir) === path.resolve(c.spillDir)) {
      ctx.addIssue({ code: 'custom', path: ['spillDir'], message: 'must differ from shmDir' });
    }
    if (c.durable !== '') {
      try {
        const loc = parseDurableLocation(c.durable);
        if (c.backend !== 'memory' && loc.kind !== c.backend) {
          ctx.addIssue({
            code: 'custom',
            path: ['durable'],
            message: `${redactUri(c.durable)} is not a ${c.backend} location (backend ${c.backend})`,
          });
        }
      } catch (err) {
        if (!(err instanceof DurableLocationError)) throw err;
        ctx.addIssue({ code: 'custom', path: ['durable'], message: err.message });
      }
    } else if (c.backend === 's3') {
      ctx.addIssue({ code: 'custom', path: ['durable'], message: 'is required with backend s3 (s3://bucket/prefix)' });
    }
    if (c.writeThroughMaxBytes !== 0 && c.writeThroughMaxBytes < c.writeThroughMinBytes) {
      ctx.addIssue({
        code: 'custom',
        path: ['writeThroughMaxBytes'],
        message: `must be 0 or at least writeThroughMinBytes (${c.writeThroughMinBytes})`,
      });
    }
  });

export type TensorSvcConfig = z.output<typeof TensorSvcConfigSchema>;
export type TensorSvcConfigInput = z.input<typeof TensorSvcConfigSchema>;

/** Environment variables (prefix `DIFFMESH_TENSOR_`) and flags of tensor-svc. */
export const tensorSvcConfig = defineConfig({
  name: 'tensor-svc',
  schema: TensorSvcConfigSchema,
  envPrefix: 'DIFFMESH_TENSOR_',
  env: {
    LISTEN: 'listen',
    ADVERTISE_ADDRESS: 'advertiseAddress',
    NODE_ID: 'nodeId',
    CHUNK_BYTES: 'chunkBytes',
    MAX_STREAM_BUFFERED_BYTES: 'maxStreamBufferedBytes',
    MEMORY_CAPACITY_BYTES: 'memoryCapacityBytes',
    SPILL_THRESHOLD_BYTES: 'spillThresholdBytes',
    DISK_CAPACITY_BYTES: 'diskCapacityBytes',
    SPILL_DIR: 'spillDir',
    SHM_DIR: 'shmDir',
    DEFAULT_TTL_MS: 'defaultTtlMs',
    SWEEP_INTERVAL_MS: 'sweepIntervalMs',
    RETRY_AFTER_MS: 'retryAfterMs',
    METRICS_LISTEN: 'metricsListen',
    DRAIN_GRACE_MS: 'drainGraceMs',
    BACKEND: 'backend',
    DURABLE: 'durable',
    S3_ENDPOINT: 's3Endpoint',
    WRITE_THROUGH: 'writeThrough',
    WRITE_THROUGH_MIN_BYTES: 'writeThroughMinBytes',
    WRITE_THROUGH_MAX_BYTES: 'writeThroughMaxBytes',
    DURABLE_SWEEP_INTERVAL_MS: 'durableSweepIntervalMs',
    RECOVER: 'recover',
    CAPABILITIES: 'capabilities',
    CAPABILITY_KEY_FILE: 'capabilityKeyFile',
    NATS_URL: 'natsUrl',
    NATS_CREDENTIALS: 'natsCredentials',
    ...natsTlsConfigMappings().env,
    INSTANCE_ID: 'instanceId',
    ...tlsConfigMappings().env,
    ...logConfigMappings().env,
    LOG_PRETTY: 'log.pretty',
  },
  flags: {
    listen: 'listen',
    'advertise-address': 'advertiseAddress',
    'node-id': 'nodeId',
    'chunk-bytes': 'chunkBytes',
    'max-stream-buffered-bytes': 'maxStreamBufferedBytes',
    'memory-capacity-bytes': 'memoryCapacityBytes',
    'spill-threshold-bytes': 'spillThresholdBytes',
    'disk-capacity-bytes': 'diskCapacityBytes',
    'spill-dir': 'spillDir',
    'shm-dir': 'shmDir',
    'default-ttl-ms': 'defaultTtlMs',
    'sweep-interval-ms': 'sweepIntervalMs',
    'retry-after-ms': 'retryAfterMs',
    'metrics-listen': 'metricsListen',
    'drain-grace-ms': 'drainGraceMs',
    backend: 'backend',
    durable: 'durable',
    's3-endpoint': 's3Endpoint',
    'write-through': 'writeThrough',
    'write-through-min-bytes': 'writeThroughMinBytes',
    'write-through-max-bytes': 'writeThroughMaxBytes',
    'durable-sweep-interval-ms': 'durableSweepIntervalMs',
    recover: 'recover',
    capabilities: 'capabilities',
    'capability-key-file': 'capabilityKeyFile',
    nats: 'natsUrl',
    'nats-credentials': 'natsCredentials',
    ...natsTlsConfigMappings().flags,
    'instance-id': 'instanceId',
    ...tlsConfigMappings().flags,
    ...logConfigMappings().flags,
    'log-pretty': 'log.pretty',
  },
});

/** Reads tensor-svc's configuration from defaults, a file, `DIFFMESH_TENSOR_*` and flags; throws ConfigError. */
export function loadTensorSvcConfig(opts: LoadConfigOptions = {}): TensorSvcConfig {
  return loadConfig(tensorSvcConfig, opts);
}

/** A configuration with every derived field filled in. */
export interface ResolvedTensorSvcConfig extends TensorSvcConfig {
  shmDir: string;
  spillDir: string;
  spillThresholdBytes: number;
  maxStreamBufferedBytes: number;
  /** The durable store (`durable`, or REDIS_URL with backend redis), with its credentials; undefined = none. */
  durableLocation?: DurableLocation;
}

/** What tensor-svc reads from the standard environment beyond `DIFFMESH_TENSOR_*`. */
export interface TensorSvcEnv {
  /** Redis location of backend redis without `durable`, and credentials for redis locations on its server. */
  REDIS_URL?: string;
  AWS_ENDPOINT_URL_S3?: string;
  AWS_ENDPOINT_URL?: string;
  AWS_REGION?: string;
  AWS_DEFAULT_REGION?: string;
}

/** The standard environment variables tensor-svc uses (AWS credentials are read by the AWS SDK itself). */
export function tensorSvcEnv(env: NodeJS.ProcessEnv = process.env): TensorSvcEnv {
  const pick = ['REDIS_URL', 'AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL', 'AWS_REGION', 'AWS_DEFAULT_REGION'] as const;
  return Object.fromEntries(pick.filter((k) => env[k]).map((k) => [k, env[k]]));
}

/**
 * Fills the derived fields: shmDir, spillDir, spillThresholdBytes, maxStreamBufferedBytes and
 * the durable location (`REDIS_URL` from `env` for backend redis without `durable`). Accepts a
 * partial input (defaults apply); throws a ZodError on invalid values, and a ConfigError-style
 * Error when backend redis has no location.
 */
export function resolveTensorSvcConfig(input: TensorSvcConfigInput | TensorSvcConfig, env: TensorSvcEnv = {}): ResolvedTensorSvcConfig {
  const c = TensorSvcConfigSchema.parse(input);
  const node = c.nodeId.replace(/[^A-Za-z0-9_.-]/g, '_');
  let durable = c.durable;
  if (!durable && c.backend === 'redis') {
    if (!env.REDIS_URL) throw new Error('durable: is required with backend redis (redis://host:6379/0), or set REDIS_URL');
    durable = env.REDIS_URL;
  }
  const durableLocation = durable ? parseDurableLocation(durable) : undefined;
  if (durableLocation && c.backend !== 'memory' && durableLocation.kind !== c.backend) {
    throw new Error(`durable: ${durableLocation.uri} is not a ${c.backend} location (backend ${c.backend})`);
  }
  return {
    ...c,
    shmDir: c.shmDir || defaultShmDir(c.nodeId),
    spillDir: c.spillDir || path.join(tmpdir(), `diffmesh-spill-${node}`),
    capabilityKeyFile: c.capabilityKeyFile || path.join(tmpdir(), `diffmesh-capability-${node}.key`),
    spillThresholdBytes: c.spillThresholdBytes || Math.floor(c.memoryCapacityBytes * 0.8),
    maxStreamBufferedBytes: c.maxStreamBufferedBytes || 2 * c.chunkBytes,
    ...(durableLocation ? { durableLocation } : {}),
  };
}
