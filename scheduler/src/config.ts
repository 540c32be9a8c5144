import { hostname } from 'node:os';
import { z } from 'zod';
import { LogConfigSchema, TlsConfigSchema, defineConfig, logConfigMappings, tlsConfigMappings } from '@diffmesh/core';
import { natsTlsConfigFields, natsTlsConfigMappings } from '@diffmesh/discovery';
import { STORE_BACKENDS } from './storage/types.js';
import { MAX_TIMEOUT_MS } from './types.js';
import { DEADLINE_POLICIES } from './limits.js';

/** The scheduler service's configuration (env prefix `DIFFMESH_SCHEDULER_`). */
export const SchedulerConfigSchema = z.object({
  listen: z.string().default('127.0.0.1:0').describe('gRPC listen address host:port (port 0 = any free port)'),
  advertiseAddress: z
    .string()
    .default('')
    .describe(
      'host:port peers on other nodes dial, registered in discovery; a host alone or port 0 takes the bound port (empty = the bound listen address, 127.0.0.1 for a wildcard: set it when listening on 0.0.0.0)',
    ),
  nodeId: z.string().default(hostname()).describe('node this scheduler runs on'),
  instanceId: z.string().default('').describe('instance id in discovery (default: scheduler-<random>)'),
  version: z
    .string()
    .default('')
    .describe('version reported in discovery and GetStatus (default: the package version), e.g. a release or image tag'),
  natsUrl: z.string().default('').describe('NATS server for discovery (empty = in-process discovery only)'),
  natsCredentials: z
    .string()
    .default('')
    .describe(
      "file with this process's NATS credentials: an nkey user seed (SU…), a .creds file or user:password (the file, never the secret, so it stays out of argv); also used by the jetstream queue on the same server",
    ),
  ...natsTlsConfigFields,
  plansFile: z.string().default('').describe('ExecutionPlan registry file (empty = the shipped plans.yaml)'),
  modelDirectories: z
    .array(z.string())
    .default([])
    .describe(
      'model directories (diffusers/optimum ONNX layout) served under their absolute real path, with plans derived from their files',
    ),
  tensorAddress: z.string().default('').describe("this node's tensor-svc, for deleting request objects"),
  maxQueueLength: z.number().int().positive().default(256).describe('most tasks waiting in one pool queue'),
  maxInFlight: z.number().int().positive().default(1024).describe('most requests accepted and not finished'),
  maxAttempts: z.number().int().positive().default(3).describe('tries per stage task'),
  retryBackoffMs: z.number().int().nonnegative().max(MAX_TIMEOUT_MS).default(200).describe('first retry back-off, doubled per attempt'),
  defaultTimeoutMs: z
    .number()
    .int()
    .nonnegative()
    .max(MAX_TIMEOUT_MS)
    .default(600_000)
    .describe('request timeout when none is given (0 = none; at most 2147483647, about 24.8 days)'),
  stageTimeoutMs: z
    .number()
    .int()
    .nonnegative()
    .max(MAX_TIMEOUT_MS)
    .default(300_000)
    .describe('deadline of one stage dispatch (0 = none; at most 2147483647)'),
  retentionMs: z.number().int().positive().default(600_000).describe('how long finished requests stay visible'),
  maxRetained: z.number().int().positive().default(10_000).describe('most finished requests kept visible (the oldest go first)'),
  strandedTimeoutMs: z
    .number()
    .int()
    .nonnegative()
    .max(MAX_TIMEOUT_MS)
    .default(10_000)
    .describe(
      'how long a queued task waits when its pool has no instance that can run it, before its request fails (0 = until the request times out)',
    ),
  eventIntervalMs: z
    .number()
    .int()
    .nonnegative()
    .default(20)
    .describe('least time between two event messages of a Generate/Watch stream; the end is sent at once (0 = every event loop turn)'),
  drainGraceMs: z.number().int().nonnegative().default(30_000).describe('time to finish requests after SIGTERM'),
  queue: z
    .enum(STORE_BACKENDS, {
      error: (iss) => `unknown queue backend ${JSON.stringify(iss.input)} (available: ${STORE_BACKENDS.join(', ')})`,
    })
    .default('memory')
    .describe(
      'where requests and task queues live: memory (this process only), sqlite (this node, survives a restart), redis or jetstream (shared by several schedulers)',
    ),
  queueUrl: z
    .string()
    .default('')
    .describe(
      'redis: redis://[user:password@]host:port[/db] (default: the REDIS_URL environment variable); jetstream: the NATS URL (default: --nats)',
    ),
  sqlitePath: z.string().default('diffmesh-scheduler.sqlite').describe('sqlite: the database file (its folder is created)'),
  queueNamespace: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ and - only')
    .default('diffmesh')
    .describe('names the shared state: redis key prefix, JetStream streams and bucket (meshes sharing a server use different ones)'),
  leaseMs: z
    .number()
    .int()
    .min(100)
    .max(MAX_TIMEOUT_MS)
    .default(10_000)
    .describe("how long a dispatched task stays taken without renewal: a dead scheduler's tasks return to their queues after this"),
  fairShare: z
    .boolean()
    .default(true)
    .describe('weighted fair queuing across tenants in every pool (false = first come, first served within a priority)'),
  preemption: z
    .enum(['on', 'off'])
    .default('on')
    .describe(
      'step-boundary preemption: a waiting task of higher priority (or with its deadline at risk) takes the slot of the least urgent running one at its next step; the preempted task keeps a checkpoint there and resumes with the same result',
    ),
  preemptMinRunMs: z
    .number()
    .int()
    .nonnegative()
    .max(MAX_TIMEOUT_MS)
    .default(1000)
    .describe('least time a task runs before it may be preempted (and it must make a step of progress between two preemptions)'),
  deadlinePolicy: z
    .enum(DEADLINE_POLICIES)
    .default('refuse')
    .describe(
      'requests with a deadline the pool cannot meet by its measured step time: refuse (DEADLINE_EXCEEDED / DEADLINE_UNREACHABLE at admission, or failed early while running) or best-effort (run anyway, earliest deadline first)',
    ),
  tenantsFile: z
    .string()
    .default('')
    .describe(
      'tenants file (YAML or JSON: each tenant with its API keys, certificate identities, weight, limits, admin), reloaded when it changes; empty = tenancy off',
    ),
  ffmpeg: z.string().default('ffmpeg').describe('ffmpeg binary for MP4 and WebM results of GetResult (a name on PATH or a path)'),
  metricsListen: z.string().default('').describe('host:port of the Prometheus /metrics endpoint (empty = off; port 0 = any free port)'),
  tls: TlsConfigSchema.prefault({}).describe('TLS of the scheduler API and of its calls to stage services and tensor-svc'),
  log: LogConfigSchema.prefault({}),
});
export type SchedulerConfig = z.output<typeof SchedulerConfigSchema>;

export const schedulerConfig = defineConfig({
  name: 'scheduler',
  schema: SchedulerConfigSchema,
  envPrefix: 'DIFFMESH_SCHEDULER_',
  env: {
    LISTEN: 'listen',
    ADVERTISE_ADDRESS: 'advertiseAddress',
    NODE_ID: 'nodeId',
    INSTANCE_ID: 'instanceId',
    VERSION: 'version',
    NATS_URL: 'natsUrl',
    NATS_CREDENTIALS: 'natsCredentials',
    PLANS_FILE: 'plansFile',
    MODEL_DIRECTORIES: 'modelDirectories',
    TENSOR_ADDRESS: 'tensorAddress',
    MAX_QUEUE_LENGTH: 'maxQueueLength',
    MAX_IN_FLIGHT: 'maxInFlight',
    MAX_ATTEMPTS: 'maxAttempts',
    RETRY_BACKOFF_MS: 'retryBackoffMs',
    DEFAULT_TIMEOUT_MS: 'defaultTimeoutMs',
    STAGE_TIMEOUT_MS: 'stageTimeoutMs',
    RETENTION_MS: 'retentionMs',
    MAX_RETAINED: 'maxRetained',
    STRANDED_TIMEOUT_MS: 'strandedTimeoutMs',
    EVENT_INTERVAL_MS: 'eventIntervalMs',
    DRAIN_GRACE_MS: 'drainGraceMs',
    QUEUE: 'queue',
    QUEUE_URL: 'queueUrl',
    SQLITE_PATH: 'sqlitePath',
    QUEUE_NAMESPACE: 'queueNamespace',
    LEASE_MS: 'leaseMs',
    FAIR_SHARE: 'fairShare',
    PREEMPTION: 'preemption',
    PREEMPT_MIN_RUN_MS: 'preemptMinRunMs',
    DEADLINE_POLICY: 'deadlinePolicy',
    FFMPEG: 'ffmpeg',
    TENANTS_FILE: 'tenantsFile',
    METRICS_LISTEN: 'metricsListen',
    ...logConfigMappings().env,
    ...tlsConfigMappings().env,
    ...natsTlsConfigMappings().env,
  },
  flags: {
    listen: 'listen',
    'advertise-address': 'advertiseAddress',
    'node-id': 'nodeId',
    'instance-id': 'instanceId',
    version: 'version',
    nats: 'natsUrl',
    'nats-credentials': 'natsCredentials',
    plans: 'plansFile',
    'model-directories': 'modelDirectories',
    tensor: 'tensorAddress',
    'max-queue-length': 'maxQueueLength',
    'max-in-flight': 'maxInFlight',
    'max-attempts': 'maxAttempts',
    'retry-backoff-ms': 'retryBackoffMs',
    'default-timeout-ms': 'defaultTimeoutMs',
    'stage-timeout-ms': 'stageTimeoutMs',
    'retention-ms': 'retentionMs',
    'max-retained': 'maxRetained',
    'stranded-timeout-ms': 'strandedTimeoutMs',
    'event-interval-ms': 'eventIntervalMs',
    'drain-grace-ms': 'drainGraceMs',
    queue: 'queue',
    'queue-url': 'queueUrl',
    'sqlite-path': 'sqlitePath',
    'queue-namespace': 'queueNamespace',
    'lease-ms': 'leaseMs',
    'fair-share': 'fairShare',
    preemption: 'preemption',
    'preempt-min-run-ms': 'preemptMinRunMs',
    'deadline-policy': 'deadlinePolicy',
    ffmpeg: 'ffmpeg',
    'tenants-file': 'tenantsFile',
    'metrics-listen': 'metricsListen',
    ...logConfigMappings().flags,
    ...tlsConfigMappings().flags,
    ...natsTlsConfigMappings().flags,
  },
});
