import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDiscovery, type Discovery } from '@diffmesh/discovery';
import { gatewayConfig } from '@diffmesh/gateway';
import { loadPlanRegistry, schedulerConfig } from '@diffmesh/scheduler';
import { tensorSvcConfig } from '@diffmesh/tensor-svc';
import {
  startNatsServer,
  startRedisServer,
  startS3Server,
  type RunningNatsServer,
  type RunningRedisServer,
  type RunningS3Server,
  Supervisor,
  type ManagedProcess,
} from '@diffmesh/testing';
import { configArgs, type ConfigValues, type StageName } from '@diffmesh/core';
import { EXECUTION_PROVIDERS, stageServiceConfig, type StageServiceConfigSchema } from '@diffmesh/stage-host';
import type { NatsRole } from './mesh-credentials.js';
import { meshNatsServerSecurity } from './nats-permissions.js';
import {
  REPLICA_SERVICES,
  type LocalMesh,
  type LocalMeshOptions,
  type ReplicaService,
  type SchedulerProcessSpec,
  type StageProcessSpec,
} from './local-mesh-options.js';

export { REPLICA_SERVICES };
export type { LocalMesh, LocalMeshOptions, ReplicaService, SchedulerProcessSpec, StageProcessSpec };

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
 * key, the CA, client certificates required, and its NATS role's seed file; for the mesh's
 * own nats-server (TLS only), the same CA, certificate and key for NATS. Paths only.
 */
async function credentialEnv(ctx: MeshContext, service: keyof typeof ENV_PREFIX, identity: string): Promise<Record<string, string>> {
  const credentials = ctx.opts.credentials;
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
    ...(ctx.natsTls ? { [`${p}NATS_TLS_CA`]: tls.ca, [`${p}NATS_TLS_CERT`]: tls.cert, [`${p}NATS_TLS_KEY`]: tls.key } : {}),
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

/** What every step of {@link startLocalMesh} shares: the options and the mesh's settings. */
interface MeshContext {
  opts: LocalMeshOptions;
  supervisor: Supervisor;
  nodeId: string;
  queue: NonNullable<LocalMeshOptions['queue']>;
  replicas(service: ReplicaService): number;
  /** `host:0` every service listens on. */
  listen: string;
  prefix: string;
  launcher: { launcher?: string[] };
  /** The environment of every service process. */
  env: Record<string, string>;
  /** Flags every service takes: node id, log, advertised address, TLS. */
  common: string[];
  /** The mesh's own nats-server (started here, with credentials) speaks TLS only, with mutual TLS. */
  natsTls: boolean;
}

/** The servers a mesh runs on, started for it unless given: NATS, redis, an S3-protocol server. */
interface BackingServers {
  natsUrl: string;
  nats?: RunningNatsServer;
  redis?: RunningRedisServer;
  s3?: RunningS3Server;
  tensorStore?: LocalMesh['tensorStore'];
  queueUrl?: string;
  sqlitePath?: string;
  /** Stops what was started here, NATS (and redis, S3) last. */
  stop(): Promise<void>;
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
  const ctx = meshContext(opts, logDir);
  let servers: BackingServers | undefined;
  let discovery: Discovery | undefined;
  try {
    servers = await startBackingServers(ctx, logDir);
    const tensor = await startTensorSvc(ctx, servers);
    const startScheduler = schedulerStarter(ctx, servers, tensor.address);
    const schedulerNames =
      ctx.replicas('scheduler') === 1
        ? [`${ctx.prefix}scheduler`]
        : Array.from({ length: ctx.replicas('scheduler') }, (_, i) => `${ctx.prefix}scheduler-${i + 1}`);
    const schedulerProcs: ManagedProcess[] = [];
    for (const name of schedulerNames) schedulerProcs.push(await startScheduler(name));
    const client = opts.credentials ? await opts.credentials.tls('client') : undefined;
    discovery = await createDiscovery(
      {
        backend: 'nats',
        url: servers.natsUrl,
        ...(opts.credentials ? { credentialsFile: opts.credentials.natsSeedFile('client') } : {}),
        ...(ctx.natsTls && client ? { tls: client } : {}),
      },
      opts.log,
    );
    const addStage = stageStarter(ctx, servers.natsUrl, tensor.address, discovery);
    const specs = await stageSpecs(opts);
    // Start stage processes one at a time: on two cores, parallel model loading only thrashes.
    // A service's second stages (text_encoding_2, image_encoding) come after its first, so a
    // model's main instances keep the names <service>-1….
    const ordered = [...specs.filter((s) => !s.stage), ...specs.filter((s) => s.stage)];
    for (const spec of ordered) for (let i = 0; i < ctx.replicas(spec.service); i += 1) await addStage(spec);
    for (const spec of opts.extraStages ?? []) await addStage(spec);
    const gatewayUrls = await startGateways(ctx, servers.natsUrl);
    return meshHandle(ctx, {
      servers,
      discovery,
      logDir,
      tensorAddress: tensor.address,
      schedulerNames,
      schedulerProcs,
      specs,
      gatewayUrls,
      addStage,
      startScheduler,
    });
  } catch (err) {
    await ctx.supervisor.stopAll(2000);
    await discovery?.close();
    await servers?.stop();
    throw err;
  }
}

function meshContext(opts: LocalMeshOptions, logDir: string): MeshContext {
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
  if (queue === 'memory' && replicas('scheduler') > 1) {
    throw new Error(
      'several schedulers need a shared queue: --queue memory keeps requests in one scheduler; use sqlite, redis or jetstream',
    );
  }
  const host = opts.host ?? '127.0.0.1';
  const bracket = (h: string): string => (h.includes(':') ? `[${h}]` : h);
  const advertise = opts.listenHost !== undefined && opts.listenHost !== host ? ['--advertise-address', bracket(host)] : [];
  const tlsArgs = opts.tls
    ? ['--tls-ca', opts.tls.ca, '--tls-cert', opts.tls.cert, '--tls-key', opts.tls.key, '--tls-require-client-cert']
    : [];
  // Every service takes the log section's flags (core's logConfigMappings): the stage schema's names them.
  const logArgs = configArgs(stageServiceConfig('stage', 'DIFFMESH_STAGE_'), { log: { level: 'info', ...opts.serviceLog } });
  return {
    opts,
    supervisor,
    nodeId,
    queue,
    replicas,
    listen: `${bracket(opts.listenHost ?? host)}:0`,
    prefix: opts.namePrefix ?? '',
    launcher: opts.launcher ? { launcher: opts.launcher } : {},
    // Services stop when the supervisor dies without stopping them (their process group is their own).
    env: { ...opts.env, ...(opts.ownProcessGroup ? { DIFFMESH_EXIT_WITH_PARENT: '1' } : {}) },
    common: ['--node-id', nodeId, ...logArgs, ...advertise, ...tlsArgs],
    natsTls: Boolean(opts.credentials) && !opts.natsUrl,
  };
}

/** NATS unless given (with JetStream for that queue), redis for a redis queue or tensor store, S3 for an s3 tensor store. */
async function startBackingServers(ctx: MeshContext, logDir: string): Promise<BackingServers> {
  const { opts, queue } = ctx;
  const own = opts.ownProcessGroup ? { ownProcessGroup: true } : {};
  const out: Omit<BackingServers, 'natsUrl' | 'stop'> = {};
  const stop = async (): Promise<void> => {
    await out.nats?.stop();
    await out.redis?.stop();
    await out.s3?.stop();
  };
  try {
    if (!opts.natsUrl) {
      out.nats = await startNatsServer({
        log: opts.log,
        jetstream: queue === 'jetstream' && !opts.queueUrl,
        ...own,
        ...(opts.credentials ? await meshNatsServerSecurity(opts.credentials) : {}),
      });
    }
    const natsUrl = opts.natsUrl ?? out.nats!.url;
    if ((queue === 'redis' && !opts.queueUrl) || opts.tensorStore === 'redis')
      out.redis = await startRedisServer({ log: opts.log, ...own });
    if (opts.tensorStore === 'redis') out.tensorStore = { backend: 'redis', location: `${out.redis!.url}/1/tensors` };
    if (opts.tensorStore === 's3') {
      const s3 = await startS3Server({ buckets: ['diffmesh'] });
      out.s3 = s3;
      out.tensorStore = { backend: 's3', location: 's3://diffmesh/tensors', endpoint: s3.endpoint };
      Object.assign(ctx.env, {
        AWS_ENDPOINT_URL_S3: s3.endpoint,
        AWS_ACCESS_KEY_ID: s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
        AWS_REGION: s3.region,
      });
    }
    const queueUrl = opts.queueUrl ?? out.redis?.url ?? (queue === 'jetstream' ? natsUrl : undefined);
    if (queueUrl && queue !== 'memory' && queue !== 'sqlite') out.queueUrl = queueUrl;
    if (queue === 'sqlite') out.sqlitePath = opts.sqlitePath ?? path.join(logDir, 'scheduler.sqlite');
    return { ...out, natsUrl, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** This node's tensor-svc, keeping objects in the store started for the mesh (if any). */
function startTensorSvc(ctx: MeshContext, servers: BackingServers): Promise<ManagedProcess> {
  const store = servers.tensorStore;
  const args = configArgs(tensorSvcConfig, {
    listen: ctx.listen,
    natsUrl: servers.natsUrl,
    ...(store ? { backend: store.backend, durable: store.location } : {}),
    ...(store?.endpoint ? { s3Endpoint: store.endpoint } : {}),
  });
  return credentialEnv(ctx, 'tensor-svc', 'tensor-svc').then((credentials) =>
    ctx.supervisor.start({
      name: `${ctx.prefix}tensor-svc`,
      entry: serviceEntry('tensor-svc'),
      args: [...ctx.common, ...args, ...(ctx.opts.tensorArgs ?? [])],
      env: { ...ctx.env, ...credentials },
      ...ctx.launcher,
      readyPrefix: 'tensor-svc listening on ',
      listenFlag: '--listen',
    }),
  );
}

/** Starts a scheduler with the mesh's queue, plans and tenants (and a spec's own flags). */
function schedulerStarter(
  ctx: MeshContext,
  servers: BackingServers,
  tensorAddress: string,
): (name: string, spec?: SchedulerProcessSpec) => Promise<ManagedProcess> {
  const { opts } = ctx;
  const options = {
    queue: ctx.queue,
    ...(servers.queueUrl ? { queueUrl: servers.queueUrl } : {}),
    ...(servers.sqlitePath ? { sqlitePath: servers.sqlitePath } : {}),
    ...(opts.leaseMs ? { leaseMs: opts.leaseMs } : {}),
    ...(opts.modelDirectories?.length ? { modelDirectories: opts.modelDirectories } : {}),
    ...(opts.plansFile ? { plansFile: opts.plansFile } : {}),
    ...(opts.tenantsFile ? { tenantsFile: opts.tenantsFile } : {}),
  };
  return async (name, spec = {}) =>
    ctx.supervisor.start({
      name,
      entry: serviceEntry('scheduler'),
      args: [
        ...ctx.common,
        ...configArgs(schedulerConfig, {
          instanceId: spec.instanceId ?? (name === `${ctx.prefix}scheduler` ? `${ctx.prefix}scheduler-1` : name),
          listen: ctx.listen,
          natsUrl: servers.natsUrl,
          tensorAddress,
          metricsListen: ctx.listen,
          ...options,
        }),
        ...(opts.schedulerArgs ?? []),
        ...(spec.args ?? []),
      ],
      env: { ...ctx.env, ...(await credentialEnv(ctx, 'scheduler', 'scheduler')), ...spec.env },
      ...ctx.launcher,
      readyPrefix: 'scheduler listening on ',
      listenFlag: '--listen',
    });
}

/** Starts one stage process (named `<service>-N` in order) and waits until discovery sees it. */
function stageStarter(
  ctx: MeshContext,
  natsUrl: string,
  tensorAddress: string,
  discovery: Discovery,
): (spec: StageProcessSpec, name?: string) => Promise<ManagedProcess> {
  const { opts } = ctx;
  const counters = new Map<string, number>();
  return async (spec, name) => {
    const n = (counters.get(spec.service) ?? 0) + 1;
    counters.set(spec.service, n);
    const procName = name ?? `${ctx.prefix}${spec.service}-${n}`;
    const proc = await ctx.supervisor.start({
      name: procName,
      entry: serviceEntry(spec.service),
      args: [
        ...ctx.common,
        ...configArgs(stageServiceConfig(spec.service, ''), {
          instanceId: procName,
          listen: ctx.listen,
          natsUrl,
          tensorAddress,
          metricsListen: ctx.listen,
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
      env: { ...ctx.env, ...(await credentialEnv(ctx, spec.service, `stage:${spec.pool}`)), ...spec.env },
      ...ctx.launcher,
      readyPrefix: `${spec.service} listening on `,
      listenFlag: '--listen',
    });
    await waitForInstance(discovery, procName, 15_000);
    return proc;
  };
}

/** One stage process per (service, stage, pool) of the served models' plans, each serving every model that uses it. */
async function stageSpecs(opts: LocalMeshOptions): Promise<StageProcessSpec[]> {
  const registry = await loadPlanRegistry(opts.plansFile, { directories: opts.modelDirectories ?? [] });
  const specs: StageProcessSpec[] = [];
  const seen = new Set<string>();
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
      specs.push({
        service,
        pool: stage.pool,
        models: [model],
        capacity: opts.capacities?.[service] ?? (service === 'dit-svc' ? 4 : 2),
        ...(SECOND_STAGES.has(stage.name) ? { stage: stage.name } : {}),
      });
    }
  }
  return specs;
}

/** The gateways (`replicas.gateway` of them), after the stages; their URLs. */
async function startGateways(ctx: MeshContext, natsUrl: string): Promise<string[]> {
  const { opts } = ctx;
  const urls: string[] = [];
  if (!opts.gateway) return urls;
  for (let i = 0; i < ctx.replicas('gateway'); i += 1) {
    const gw = await ctx.supervisor.start({
      name: gatewayName(ctx.prefix, i),
      entry: serviceEntry('gateway'),
      args: configArgs(gatewayConfig, {
        nodeId: ctx.nodeId,
        log: { level: 'info', ...opts.serviceLog },
        natsUrl,
        listen: i === 0 ? (opts.gateway.listen ?? ctx.listen) : ctx.listen,
        adminListen: i === 0 ? (opts.gateway.adminListen ?? ctx.listen) : ctx.listen,
        ...(opts.tls ? { tls: { ca: opts.tls.ca, cert: opts.tls.cert, key: opts.tls.key } } : {}),
        ...(opts.tenantsFile ? { tenantsFile: opts.tenantsFile } : {}),
      }),
      // Keys go in the environment, not argv (argv is visible to every user in ps).
      env: {
        ...ctx.env,
        ...(await credentialEnv(ctx, 'gateway', 'gateway')),
        DIFFMESH_GATEWAY_API_KEYS: opts.gateway.apiKeys.join(','),
      },
      ...ctx.launcher,
      readyPrefix: 'gateway listening on ',
      listenFlag: '--listen',
    });
    urls.push(gw.address);
  }
  return urls;
}

function gatewayName(prefix: string, i: number): string {
  return i === 0 ? `${prefix}gateway` : `${prefix}gateway-${i + 1}`;
}

/** The running mesh: its addresses, and how to grow and stop it. */
function meshHandle(
  ctx: MeshContext,
  parts: {
    servers: BackingServers;
    discovery: Discovery;
    logDir: string;
    tensorAddress: string;
    schedulerNames: string[];
    schedulerProcs: ManagedProcess[];
    specs: StageProcessSpec[];
    gatewayUrls: string[];
    addStage: LocalMesh['addStage'];
    startScheduler: (name: string, spec?: SchedulerProcessSpec) => Promise<ManagedProcess>;
  },
): LocalMesh {
  const { supervisor, queue, prefix } = ctx;
  const { servers, discovery, schedulerNames, gatewayUrls } = parts;
  let stopping: Promise<void> | undefined;
  return {
    nodeId: ctx.nodeId,
    natsUrl: servers.natsUrl,
    schedulerAddress: parts.schedulerProcs[0].address,
    schedulerAddresses: parts.schedulerProcs.map((p) => p.address),
    schedulers: schedulerNames,
    queue: {
      backend: queue,
      ...(servers.queueUrl ? { url: servers.queueUrl } : {}),
      ...(servers.sqlitePath ? { sqlitePath: servers.sqlitePath } : {}),
    },
    tensorAddress: parts.tensorAddress,
    ...(servers.tensorStore ? { tensorStore: servers.tensorStore } : {}),
    ...(gatewayUrls[0] ? { gatewayUrl: gatewayUrls[0] } : {}),
    logDir: parts.logDir,
    supervisor,
    discovery,
    stageSpecs: parts.specs,
    addStage: parts.addStage,
    async addScheduler(name, spec) {
      const proc = await parts.startScheduler(name, spec);
      schedulerNames.push(name);
      return proc;
    },
    stop() {
      // The front doors first, then the schedulers (they hand back or finish their work),
      // then everything else; NATS (and redis) last.
      stopping ??= (async () => {
        for (let i = gatewayUrls.length - 1; i >= 0; i -= 1) await supervisor.stop(gatewayName(prefix, i));
        await Promise.all(schedulerNames.map((n) => supervisor.stop(n)));
        await supervisor.stopAll();
        await discovery.close();
        await servers.stop();
      })();
      return stopping;
    },
  };
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
