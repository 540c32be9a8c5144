import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDiscovery, type Discovery } from '@diffmesh/discovery';
import { loadPlanRegistry } from '@diffmesh/scheduler';
import {
  startNatsServer,
  startRedisServer,
  startS3Server,
  type RunningNatsServer,
  type RunningRedisServer,
  type RunningS3Server,
  Supervisor,
  type ManagedProcess,
  type RestartPolicy,
  type SupervisorEvent,
} from '@diffmesh/testing';
import { configArgs, type ConfigValues, type LogConfigSchema, type Logger, type StageName } from '@diffmesh/core';
import { EXECUTION_PROVIDERS, stageServiceConfig, type StageServiceConfigSchema } from '@diffmesh/stage-host';
import type { MeshCredentials, NatsRole } from './mesh-credentials.js';

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

/** Absolute path of a service package's compiled entry point. */
export function serviceEntry(pkg: 'scheduler' | 'tensor-svc' | 'encoder-svc' | 'dit-svc' | 'vae-svc' | 'gateway'): string {
  return fileURLToPath(import.meta.resolve(`@diffmesh/${pkg}/main`));
}

/** The environment prefix of each service's configuration. */
const ENV_PREFIX: Record<'scheduler' | 'tensor-svc' | 'gateway' | StageProcessSpec['service'], string> = {
  scheduler: 'DIFFMESH_SCHEDULER_',
  'tensor-svc': 'DIFFMESH_TENSOR_',
  gateway: 'DIFFMESH_GATEWAY_',
  'encoder-svc': 'DIFFMESH_ENCODER_',
  'dit-svc': 'DIFFMESH_DIT_',
  'vae-svc': 'DIFFMESH_VAE_',
};

/**
 * The environment that points `service` at its credentials: its identity's certificate and
 * key, the CA, client certificates required, and its NATS role's seed file. Paths only.
 */
async function credentialEnv(
  credentials: MeshCredentials | undefined,
  service: keyof typeof ENV_PREFIX,
  identity: string,
): Promise<Record<string, string>> {
  if (!credentials) return {};
  const tls = await credentials.tls(identity);
  const role: NatsRole = service === 'scheduler' || service === 'tensor-svc' || service === 'gateway' ? service : 'stage';
  const p = ENV_PREFIX[service];
  return {
    [`${p}TLS_CA`]: tls.ca,
    [`${p}TLS_CERT`]: tls.cert,
    [`${p}TLS_KEY`]: tls.key,
    [`${p}TLS_REQUIRE_CLIENT_CERT`]: 'true',
    [`${p}NATS_CREDENTIALS`]: credentials.natsSeedFile(role),
  };
}

const SERVICE_OF_STAGE: Partial<Record<StageName, StageProcessSpec['service']>> = {
  text_encoding: 'encoder-svc',
  text_encoding_2: 'encoder-svc',
  image_encoding: 'vae-svc',
  denoising: 'dit-svc',
  vae_decoding: 'vae-svc',
};

/** Stages a service runs only when asked with `--stage`. */
const SECOND_STAGES: ReadonlySet<StageName> = new Set(['text_encoding_2', 'image_encoding']);

let meshesStarted = 0;

/**
 * The node id of a mesh started without one: `local-<pid>` (then `-2`, `-3`… for further
 * meshes of this process). A node id names the node's shared-memory directory, so two meshes
 * on one machine (a `diffmesh up` and a test run, say) must not share one.
 */
function defaultNodeId(): string {
  meshesStarted += 1;
  return `local-${process.pid}${meshesStarted > 1 ? `-${meshesStarted}` : ''}`;
}

/**
 * Starts a whole mesh on loopback, every service its own process: nats-server (unless one
 * is given), tensor-svc, the scheduler and the stage services, each registered in NATS.
 * Resolves once the scheduler's discovery has seen every stage instance. With `host`,
 * `launcher` and `namePrefix` it starts one node of several that share a NATS (and a redis or
 * JetStream queue): the node's own tensor-svc, schedulers and stage processes.
 */
export async function startLocalMesh(opts: LocalMeshOptions): Promise<LocalMesh> {
  const logDir = opts.logDir ?? (await mkdtemp(path.join(tmpdir(), 'diffmesh-mesh-')));
  const restart = opts.restart === true ? {} : opts.restart || undefined;
  const supervisor = new Supervisor({
    logPath: (name) => path.join(logDir, `${name}.log`),
    ...(restart ? { restart } : {}),
    ...(opts.ownProcessGroup ? { ownProcessGroup: true } : {}),
    ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
  });
  const nodeId = opts.nodeId ?? defaultNodeId();
  const queue = opts.queue ?? 'memory';
  const replicas = (service: ReplicaService): number =>
    Math.max(service === 'scheduler' || service === 'gateway' ? 1 : 0, Math.trunc(opts.replicas?.[service] ?? 1));
  const host = opts.host ?? '127.0.0.1';
  const bracket = (h: string): string => (h.includes(':') ? `[${h}]` : h);
  const listen = `${bracket(opts.listenHost ?? host)}:0`;
  const advertise = opts.listenHost !== undefined && opts.listenHost !== host ? ['--advertise-address', bracket(host)] : [];
  const prefix = opts.namePrefix ?? '';
  const launcher = opts.launcher ? { launcher: opts.launcher } : {};
  if (queue === 'memory' && replicas('scheduler') > 1) {
    throw new Error(
      'several schedulers need a shared queue: --queue memory keeps requests in one scheduler; use sqlite, redis or jetstream',
    );
  }
  // Services stop when the supervisor dies without stopping them (their process group is their own).
  const env = { ...opts.env, ...(opts.ownProcessGroup ? { DIFFMESH_EXIT_WITH_PARENT: '1' } : {}) };
  let nats: RunningNatsServer | undefined;
  let redis: RunningRedisServer | undefined;
  let s3: RunningS3Server | undefined;
  let discovery: Discovery | undefined;
  try {
    if (!opts.natsUrl) {
      nats = await startNatsServer({
        log: opts.log,
        jetstream: queue === 'jetstream' && !opts.queueUrl,
        ...(opts.ownProcessGroup ? { ownProcessGroup: true } : {}),
        ...(opts.credentials
          ? { authorization: { nkeys: opts.credentials.natsPublicKeys, clientSeed: opts.credentials.natsClientSeed } }
          : {}),
      });
    }
    const natsUrl = opts.natsUrl ?? nats!.url;
    if ((queue === 'redis' && !opts.queueUrl) || opts.tensorStore === 'redis')
      redis = await startRedisServer({ log: opts.log, ...(opts.ownProcessGroup ? { ownProcessGroup: true } : {}) });
    let tensorStore: LocalMesh['tensorStore'];
    if (opts.tensorStore === 'redis') tensorStore = { backend: 'redis', location: `${redis!.url}/1/tensors` };
    if (opts.tensorStore === 's3') {
      s3 = await startS3Server({ buckets: ['diffmesh'] });
      tensorStore = { backend: 's3', location: 's3://diffmesh/tensors', endpoint: s3.endpoint };
      Object.assign(env, {
        AWS_ENDPOINT_URL_S3: s3.endpoint,
        AWS_ACCESS_KEY_ID: s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
        AWS_REGION: s3.region,
      });
    }
    const tensorStoreArgs = tensorStore
      ? [
          '--backend',
          tensorStore.backend,
          '--durable',
          tensorStore.location,
          ...(tensorStore.endpoint ? ['--s3-endpoint', tensorStore.endpoint] : []),
        ]
      : [];
    const queueUrl = opts.queueUrl ?? redis?.url ?? (queue === 'jetstream' ? natsUrl : undefined);
    const sqlitePath = queue === 'sqlite' ? (opts.sqlitePath ?? path.join(logDir, 'scheduler.sqlite')) : undefined;
    const tlsArgs = opts.tls
      ? ['--tls-ca', opts.tls.ca, '--tls-cert', opts.tls.cert, '--tls-key', opts.tls.key, '--tls-require-client-cert']
      : [];
    const log = { level: 'info', ...opts.serviceLog } as const;
    // Every service takes the log section's flags (core's logConfigMappings): the stage schema's names them.
    const logArgs = configArgs(stageServiceConfig('stage', 'DIFFMESH_STAGE_'), { log });
    const common = ['--node-id', nodeId, ...logArgs, ...advertise, ...tlsArgs];
    const tensor = await supervisor.start({
      name: `${prefix}tensor-svc`,
      entry: serviceEntry('tensor-svc'),
      args: [...common, '--listen', listen, '--nats', natsUrl, ...tensorStoreArgs, ...(opts.tensorArgs ?? [])],
      env: { ...env, ...(await credentialEnv(opts.credentials, 'tensor-svc', 'tensor-svc')) },
      ...launcher,
      readyPrefix: 'tensor-svc listening on ',
      listenFlag: '--listen',
    });
    const queueArgs = [
      '--queue',
      queue,
      ...(queueUrl && queue !== 'memory' && queue !== 'sqlite' ? ['--queue-url', queueUrl] : []),
      ...(sqlitePath ? ['--sqlite-path', sqlitePath] : []),
      ...(opts.leaseMs ? ['--lease-ms', String(opts.leaseMs)] : []),
    ];
    const schedulerNames =
      replicas('scheduler') === 1
        ? [`${prefix}scheduler`]
        : Array.from({ length: replicas('scheduler') }, (_, i) => `${prefix}scheduler-${i + 1}`);
    // What every scheduler and stage process gets: its id, a free port, NATS, this node's tensor-svc, metrics.
    const serviceArgs = (instanceId: string): string[] => [
      ...common,
      '--instance-id',
      instanceId,
      '--listen',
      listen,
      '--nats',
      natsUrl,
      '--tensor',
      tensor.address,
      '--metrics-listen',
      listen,
    ];
    const startScheduler = async (name: string, spec: SchedulerProcessSpec = {}): Promise<ManagedProcess> =>
      supervisor.start({
        name,
        entry: serviceEntry('scheduler'),
        args: [
          ...serviceArgs(spec.instanceId ?? (name === `${prefix}scheduler` ? `${prefix}scheduler-1` : name)),
          ...queueArgs,
          ...(opts.modelDirectories?.length ? ['--model-directories', opts.modelDirectories.join(',')] : []),
          ...(opts.plansFile ? ['--plans', opts.plansFile] : []),
          ...(opts.tenantsFile ? ['--tenants-file', opts.tenantsFile] : []),
          ...(opts.schedulerArgs ?? []),
          ...(spec.args ?? []),
        ],
        env: { ...env, ...(await credentialEnv(opts.credentials, 'scheduler', 'scheduler')), ...spec.env },
        ...launcher,
        readyPrefix: 'scheduler listening on ',
        listenFlag: '--listen',
      });
    const schedulerProcs: ManagedProcess[] = [];
    for (const name of schedulerNames) schedulerProcs.push(await startScheduler(name));
    discovery = await createDiscovery(
      { backend: 'nats', url: natsUrl, ...(opts.credentials ? { credentialsFile: opts.credentials.natsSeedFile('client') } : {}) },
      opts.log,
    );
    const disc = discovery;

    const counters = new Map<string, number>();
    const addStage = async (spec: StageProcessSpec, name?: string): Promise<ManagedProcess> => {
      const n = (counters.get(spec.service) ?? 0) + 1;
      counters.set(spec.service, n);
      const procName = name ?? `${prefix}${spec.service}-${n}`;
      const proc = await supervisor.start({
        name: procName,
        entry: serviceEntry(spec.service),
        args: [
          ...serviceArgs(procName),
          ...configArgs(stageServiceConfig(spec.service, ''), {
            ...opts.stageOptions,
            pool: spec.pool,
            capacity: spec.capacity,
            threads: opts.threads ?? 1,
            modelsDirs: spec.modelsDirs ?? opts.modelsDirs,
            ...(spec.lazy ? {} : { models: spec.models }),
            ...(spec.stage ? { stage: spec.stage } : {}),
            ...(providersOf(opts.executionProviders, spec) ?? {}),
          }),
          ...(opts.stageArgs ?? []),
          ...(spec.args ?? []),
        ],
        env: { ...env, ...(await credentialEnv(opts.credentials, spec.service, `stage:${spec.pool}`)), ...spec.env },
        ...launcher,
        readyPrefix: `${spec.service} listening on `,
        listenFlag: '--listen',
      });
      await waitForInstance(disc, procName, 15_000);
      return proc;
    };

    const registry = await loadPlanRegistry(opts.plansFile, { directories: opts.modelDirectories ?? [] });
    const seen = new Set<string>();
    const specs: StageProcessSpec[] = [];
    for (const id of opts.models) {
      const entry = registry.lookup(id);
      // A directory served under an id of its own is loaded by the stage processes as id=DIR.
      const model = entry.directory !== undefined && entry.directory !== id ? `${id}=${entry.directory}` : id;
      for (const stage of entry.stages) {
        const service = SERVICE_OF_STAGE[stage.name];
        if (!service) throw new Error(`stage ${stage.name} of ${model} has no service in this build`);
        const key = `${service}|${stage.name}|${stage.pool}`;
        if (seen.has(key)) {
          specs.find((s) => s.service === service && s.pool === stage.pool && (s.stage ?? stage.name) === stage.name)?.models.push(model);
          continue;
        }
        seen.add(key);
        const capacity = opts.capacities?.[service] ?? (service === 'dit-svc' ? 4 : 2);
        specs.push({
          service,
          pool: stage.pool,
          models: [model],
          capacity,
          ...(SECOND_STAGES.has(stage.name) ? { stage: stage.name } : {}),
        });
      }
    }
    // Start stage processes one at a time: on two cores, parallel model loading only thrashes.
    // A service's second stages (text_encoding_2, image_encoding) come after its first, so a
    // model's main instances keep the names <service>-1….
    const ordered = [...specs.filter((s) => !s.stage), ...specs.filter((s) => s.stage)];
    for (const spec of ordered) for (let i = 0; i < replicas(spec.service); i += 1) await addStage(spec);
    for (const spec of opts.extraStages ?? []) await addStage(spec);

    const gatewayUrls: string[] = [];
    if (opts.gateway) {
      for (let i = 0; i < replicas('gateway'); i += 1) {
        const gw = await supervisor.start({
          name: i === 0 ? `${prefix}gateway` : `${prefix}gateway-${i + 1}`,
          entry: serviceEntry('gateway'),
          args: [
            '--node-id',
            nodeId,
            ...logArgs,
            '--nats',
            natsUrl,
            '--listen',
            i === 0 ? (opts.gateway.listen ?? listen) : listen,
            '--admin-listen',
            i === 0 ? (opts.gateway.adminListen ?? listen) : listen,
            ...(opts.tls ? ['--tls-ca', opts.tls.ca, '--tls-cert', opts.tls.cert, '--tls-key', opts.tls.key] : []),
            ...(opts.tenantsFile ? ['--tenants-file', opts.tenantsFile] : []),
          ],
          // Keys go in the environment, not argv (argv is visible to every user in ps).
          env: {
            ...env,
            ...(await credentialEnv(opts.credentials, 'gateway', 'gateway')),
            DIFFMESH_GATEWAY_API_KEYS: opts.gateway.apiKeys.join(','),
          },
          ...launcher,
          readyPrefix: 'gateway listening on ',
          listenFlag: '--listen',
        });
        gatewayUrls.push(gw.address);
      }
    }

    let stopping: Promise<void> | undefined;
    return {
      nodeId,
      natsUrl,
      schedulerAddress: schedulerProcs[0].address,
      schedulerAddresses: schedulerProcs.map((p) => p.address),
      schedulers: schedulerNames,
      queue: {
        backend: queue,
        ...(queueUrl && queue !== 'memory' && queue !== 'sqlite' ? { url: queueUrl } : {}),
        ...(sqlitePath ? { sqlitePath } : {}),
      },
      tensorAddress: tensor.address,
      ...(tensorStore ? { tensorStore } : {}),
      ...(gatewayUrls[0] ? { gatewayUrl: gatewayUrls[0] } : {}),
      logDir,
      supervisor,
      discovery: disc,
      stageSpecs: specs,
      addStage,
      async addScheduler(name, spec) {
        const proc = await startScheduler(name, spec);
        schedulerNames.push(name);
        return proc;
      },
      stop() {
        // The front doors first, then the schedulers (they hand back or finish their work),
        // then everything else; NATS (and redis) last.
        stopping ??= (async () => {
          for (let i = gatewayUrls.length - 1; i >= 0; i -= 1)
            await supervisor.stop(i === 0 ? `${prefix}gateway` : `${prefix}gateway-${i + 1}`);
          await Promise.all(schedulerNames.map((n) => supervisor.stop(n)));
          await supervisor.stopAll();
          await disc.close();
          await nats?.stop();
          await redis?.stop();
          await s3?.stop();
        })();
        return stopping;
      },
    };
  } catch (err) {
    await supervisor.stopAll(2000);
    await discovery?.close();
    await nats?.stop();
    await redis?.stop();
    await s3?.stop();
    throw err;
  }
}

/** Resolves when discovery reports instance `id` up; rejects after `timeoutMs`. */
export function waitForInstance(discovery: Discovery, id: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    let unsubscribe: (() => void) | undefined;
    const finish = (err?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe?.();
      if (err) reject(err);
      else resolve();
    };
    const timer = setTimeout(() => finish(new Error(`timed out waiting for ${id} to register`)), timeoutMs);
    unsubscribe = discovery.subscribe(
      (e) => {
        if (e.type !== 'down' && e.instance.id === id) finish();
      },
      { replay: true },
    );
    if (done) unsubscribe();
  });
}

/** Short names a provider spec may use for a service. */
const SERVICE_SHORT: Record<StageProcessSpec['service'], string> = { 'encoder-svc': 'encoder', 'dit-svc': 'dit', 'vae-svc': 'vae' };

/** `--execution-providers` of one stage process: its pool's entry, else its service's, else `*`. */
function providersOf(
  providers: Record<string, string[]> | undefined,
  spec: StageProcessSpec,
): { executionProviders: ConfigValues<typeof StageServiceConfigSchema>['executionProviders'] } | undefined {
  if (!providers) return undefined;
  const list = providers[spec.pool] ?? providers[spec.service] ?? providers[SERVICE_SHORT[spec.service]] ?? providers['*'];
  // parseProviderSpec checked every name against EXECUTION_PROVIDERS.
  return list && list.length > 0 ? { executionProviders: list as (typeof EXECUTION_PROVIDERS)[number][] } : undefined;
}

/**
 * Parses `up`'s `--execution-providers`: a list for every stage (`webgpu,cpu`), or entries
 * `TARGET=LIST` separated by `;` where TARGET is a pool, a service (`dit`, `dit-svc`, `encoder`,
 * `vae`) or `*` (`dit=webgpu,cpu;vae=webgpu,cpu`). Throws a message naming the flag.
 */
export function parseProviderSpec(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const list = (v: string): string[] =>
    v
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);
  const trimmed = text.trim();
  if (trimmed === '') return out;
  if (!trimmed.includes('=')) {
    out['*'] = list(trimmed);
  } else {
    for (const part of trimmed
      .split(';')
      .map((p) => p.trim())
      .filter(Boolean)) {
      const eq = part.indexOf('=');
      if (eq <= 0) throw new Error(`execution providers: expected TARGET=LIST[;TARGET=LIST…], got "${part}" (--execution-providers)`);
      out[part.slice(0, eq).trim()] = list(part.slice(eq + 1));
    }
  }
  for (const [target, providers] of Object.entries(out)) {
    if (providers.length === 0) throw new Error(`execution providers: no provider given for ${target} (--execution-providers)`);
    const unknown = providers.filter((p) => !(EXECUTION_PROVIDERS as readonly string[]).includes(p));
    if (unknown.length > 0) {
      throw new Error(
        `execution providers: unknown ${unknown.map((u) => `"${u}"`).join(', ')} for ${target} (known: ${EXECUTION_PROVIDERS.join(', ')}) (--execution-providers)`,
      );
    }
  }
  return out;
}
