import type { Discovery } from '@diffmesh/discovery';
import type { ConfigValues, LogConfigSchema, Logger, StageName } from '@diffmesh/core';
import type { StageServiceConfigSchema } from '@diffmesh/stage-host';
import type { ManagedProcess, RestartPolicy, Supervisor, SupervisorEvent } from '@diffmesh/testing';
import type { MeshCredentials } from './mesh-credentials.js';

/** One stage service process to run. */
export interface StageProcessSpec {
  service: 'encoder-svc' | 'dit-svc' | 'vae-svc';
  pool: string;
  /** `--stage`, for a service's second stage (encoder-svc `text_encoding_2`, vae-svc `image_encoding`). */
  stage?: StageName;
  models: string[];
  capacity: number;
  /** Extra flags, e.g. `--max-batch 4`. */
  args?: string[];
  /** Extra environment, e.g. a different package version for pinning tests. */
  env?: Record<string, string>;
  /** Models folders for this process (default: the mesh's). */
  modelsDirs?: string[];
  /** Skip loading models at start (they load on first use). */
  lazy?: boolean;
}

export interface LocalMeshOptions {
  /** Use this NATS server instead of starting one. */
  natsUrl?: string;
  modelsDirs: string[];
  /** Models whose pools get one instance of each stage (from the plan registry). */
  models: string[];
  /**
   * Model directories (diffusers/optimum ONNX layout) among `models`, by their id (real path):
   * the scheduler serves them (`--model-directories`) and their stage processes load them.
   */
  modelDirectories?: string[];
  /** Plan registry file of the scheduler (and of this mesh's stage layout); default: the shipped one. */
  plansFile?: string;
  /** Further stage processes (beyond one per pool of `models`). */
  extraStages?: StageProcessSpec[];
  /** onnxruntime threads per service. */
  threads?: number;
  /**
   * onnxruntime execution providers of the stage processes, in order of preference, by pool
   * name, by service (`dit-svc`, or `dit`), or `*` for the rest, e.g.
   * `{ dit: ['webgpu', 'cpu'] }` (see {@link parseProviderSpec}). Default: the CPU everywhere.
   */
  executionProviders?: Record<string, string[]>;
  /** Node id of every process (default `local-<pid>`, unique per mesh on this machine). */
  nodeId?: string;
  /**
   * Address every service listens on and advertises (gRPC and metrics), default `127.0.0.1`:
   * a node's own address when several meshes on different nodes share one NATS.
   */
  host?: string;
  /**
   * Address the services bind, when not `host`: with a wildcard such as `0.0.0.0` they listen
   * on every interface and advertise `host` (`--advertise-address`).
   */
  listenHost?: string;
  /** Command every service process runs under, e.g. `ip netns exec NODE` (see `createNodeNetwork`). */
  launcher?: string[];
  /**
   * Prefix of every process name and instance id (e.g. `node1-`), so that meshes of several
   * nodes sharing one NATS have distinct instances.
   */
  namePrefix?: string;
  log: Logger;
  /**
   * The `log` section of every service process (default level `info`, format `json`), e.g.
   * `{ format: 'pretty' }` for log files a person reads.
   */
  serviceLog?: ConfigValues<typeof LogConfigSchema>;
  /**
   * Options of every stage process, by the stage schema's field names, e.g.
   * `{ runnerThreads: 2, inlineMaxBytes: 0 }` (a misspelt name does not compile).
   */
  stageOptions?: ConfigValues<typeof StageServiceConfigSchema>;
  /** Folder for process logs (default: a temp folder). */
  logDir?: string;
  /** Extra flags for the scheduler, e.g. `--max-queue-length 4`. */
  schedulerArgs?: string[];
  /** Flags added to every stage process, e.g. `--inline-max-bytes 0`. */
  stageArgs?: string[];
  /** Flags added to tensor-svc, e.g. `--backend redis --durable redis://127.0.0.1:6390/0`. */
  tensorArgs?: string[];
  /**
   * Keep tensor-svc's objects in a store started for the mesh (its `--backend`): `redis`
   * (database 1 of the mesh's redis-server, started unless the queue's runs already) or `s3`
   * (an S3-protocol server on loopback with bucket `diffmesh`; every service gets its
   * endpoint and credentials as `AWS_*`). For a store of your own, pass `tensorArgs`.
   */
  tensorStore?: 'redis' | 's3';
  /** TLS files (PEM paths) for every service, as server and as client (mutual TLS). */
  tls?: { ca: string; cert: string; key: string };
  /**
   * Authenticate the mesh (see {@link ensureMeshCredentials}): every gRPC server requires a
   * client certificate of the mesh's CA, every process calls with its own identity's
   * certificate (`scheduler`, `tensor-svc`, `gateway`, `stage:<pool>`), and the nats-server
   * started for the mesh admits only the mesh's nkey users. Each process gets the paths of
   * its files in its environment (`DIFFMESH_<SERVICE>_TLS_CA`, `…_TLS_CERT`, `…_TLS_KEY`,
   * `…_TLS_REQUIRE_CLIENT_CERT`, `…_NATS_CREDENTIALS`), never the secrets and never in argv.
   */
  credentials?: MeshCredentials;
  /**
   * Tenants file of the schedulers and the gateway (their `--tenants-file`): each request
   * belongs to its caller's tenant and only that tenant sees it. Default: tenancy off.
   */
  tenantsFile?: string;
  /** Start the HTTP gateway too (after the stages). */
  gateway?: { listen?: string; adminListen?: string; apiKeys: string[] };
  /** Slots per instance of each stage service (default: dit-svc 4, others 2). */
  capacities?: Partial<Record<StageProcessSpec['service'], number>>;
  /**
   * Environment added to every service process (tensor-svc, scheduler, stages), e.g. the
   * `OTEL_*` variables of a trace collector. A stage's own `env` wins over it.
   */
  env?: Record<string, string>;
  /**
   * Where the schedulers keep requests and task queues (their `--queue`): `memory` (the
   * default here; one scheduler only), `sqlite` (a file in the log folder unless
   * `sqlitePath`), `redis` (a redis-server started for the mesh unless `queueUrl`) or
   * `jetstream` (the mesh's NATS with JetStream on, unless `queueUrl`).
   */
  queue?: 'memory' | 'sqlite' | 'redis' | 'jetstream';
  queueUrl?: string;
  sqlitePath?: string;
  /** Lease of a dispatched task (`--lease-ms` of the schedulers). */
  leaseMs?: number;
  /**
   * Processes per service (default 1 each): `scheduler`, `encoder-svc`, `dit-svc`, `vae-svc`,
   * `gateway`. A stage service may have 0 (another node runs it; see `stageSpecs`).
   */
  replicas?: Partial<Record<ReplicaService, number>>;
  /** Restart processes that die, with back-off (`true` = the default policy). Off by default. */
  restart?: RestartPolicy | boolean;
  /**
   * Start every process in its own process group (so a terminal's Ctrl-C reaches only this
   * one, which stops them in order) and have the services stop when this process dies.
   */
  ownProcessGroup?: boolean;
  /** Sees the supervisor's exits and restarts. */
  onEvent?: (event: SupervisorEvent) => void;
}

/** One more scheduler process (see {@link LocalMesh.addScheduler}). */
export interface SchedulerProcessSpec {
  /** `--instance-id` (default: the process name). */
  instanceId?: string;
  /** Extra flags after the mesh's `schedulerArgs`, e.g. `--version 1.1.0` or `--drain-grace-ms 0`. */
  args?: string[];
  /** Extra environment. */
  env?: Record<string, string>;
}

/** Services whose process count `replicas` sets. */
export const REPLICA_SERVICES = ['scheduler', 'encoder-svc', 'dit-svc', 'vae-svc', 'gateway'] as const;
export type ReplicaService = (typeof REPLICA_SERVICES)[number];

export interface LocalMesh {
  /** The node id every process of the mesh runs with. */
  nodeId: string;
  natsUrl: string;
  /** The first scheduler's gRPC address. */
  schedulerAddress: string;
  /** Every scheduler's gRPC address (any of them serves any request with a shared queue). */
  schedulerAddresses: string[];
  /** Process names of the schedulers (`scheduler`, or `scheduler-1`… with replicas). */
  schedulers: string[];
  /** The queue backend and, for redis and jetstream, its URL. */
  queue: { backend: 'memory' | 'sqlite' | 'redis' | 'jetstream'; url?: string; sqlitePath?: string };
  tensorAddress: string;
  /** The store started for tensor-svc's objects (`tensorStore`), as its `--durable` location. */
  tensorStore?: { backend: 'redis' | 's3'; location: string; endpoint?: string };
  /** `http://host:port` of the gateway, when started. */
  gatewayUrl?: string;
  logDir: string;
  supervisor: Supervisor;
  discovery: Discovery;
  /** The stage processes of the served models, one per pool (started `replicas` times each). */
  stageSpecs: StageProcessSpec[];
  /** Starts one more stage process and waits until discovery sees it. */
  addStage(spec: StageProcessSpec, name?: string): Promise<ManagedProcess>;
  /**
   * Starts one more scheduler with the mesh's queue settings, e.g. the new version in a rolling
   * upgrade (with `memory` it has a queue of its own: a replacement for a stopped one), and adds
   * its name to `schedulers`. Resolves once it listens.
   */
  addScheduler(name: string, spec?: SchedulerProcessSpec): Promise<ManagedProcess>;
  stop(): Promise<void>;
}
