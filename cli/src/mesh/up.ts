import { randomBytes } from 'node:crypto';
import { NatsServerNotFoundError, RedisServerNotFoundError } from '@diffmesh/testing';
import path from 'node:path';
import { createLogger, type Logger, redactUri, TenantDirectory } from '@diffmesh/core';
import { defaultModelsRoot } from '@diffmesh/models';
import { modelArgument } from '../model-argument.js';
import { parseProviderSpec, startLocalMesh, type LocalMesh, type LocalMeshOptions, type ReplicaService } from './local-mesh.js';
import { ensureMeshCredentials, type MeshCredentials } from './mesh-credentials.js';
import { clearState, stateDir, writeState, type MeshState } from './state.js';
import type { UpFlags } from './up-config.js';

export type { UpFlags } from './up-config.js';

/** Short names `--replicas` takes for each service. */
const REPLICA_NAMES: Record<string, ReplicaService> = {
  scheduler: 'scheduler',
  encoder: 'encoder-svc',
  'encoder-svc': 'encoder-svc',
  dit: 'dit-svc',
  'dit-svc': 'dit-svc',
  vae: 'vae-svc',
  'vae-svc': 'vae-svc',
  gateway: 'gateway',
};

/** Parses `--replicas scheduler=2,dit=3`; throws a message naming the flag. */
export function parseReplicas(text: string | undefined): Partial<Record<ReplicaService, number>> {
  const out: Partial<Record<ReplicaService, number>> = {};
  for (const part of (text ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z-]+)=(\d+)$/.exec(part);
    if (!m) throw new Error(`replicas: expected service=count[,service=count…], got "${part}" (--replicas)`);
    const [, name, count] = m;
    if (name === 'tensor' || name === 'tensor-svc') throw new Error('replicas: tensor-svc runs once per node (--replicas)');
    const service = REPLICA_NAMES[name];
    if (!service) throw new Error(`replicas: unknown service "${name}" (known: scheduler, encoder, dit, vae, gateway) (--replicas)`);
    const n = Number(count);
    if (n < 1 || n > 16) throw new Error(`replicas: ${name} must be from 1 to 16, got ${n} (--replicas)`);
    out[service] = n;
  }
  return out;
}

/** Queue backends `up` takes. */
const QUEUES = ['memory', 'sqlite', 'redis', 'jetstream'] as const;

/** What `up` starts, from its flags once they are checked. */
interface UpPlan {
  models: string[];
  modelDirectories: string[];
  threads: number;
  queue: (typeof QUEUES)[number];
  replicas: Partial<Record<ReplicaService, number>>;
  executionProviders: Record<string, string[]>;
  tensor: Exclude<ReturnType<typeof tensorStoreArgs>, string>;
}

/** A usage problem: the message (naming the flag) and exit status 2. */
class UpUsageError extends Error {}

/**
 * `diffmesh up`: runs until SIGINT/SIGTERM; returns the exit code. One Ctrl-C stops the mesh:
 * every process runs in its own process group, so the terminal's interrupt reaches `up`
 * alone (npm's forwarded copy of it within a second counts as the same one), and `up` stops
 * the gateway, the schedulers, the stages and tensor-svc, and NATS last, once each. A later
 * second Ctrl-C kills what is left at once.
 */
export async function runUp(flags: UpFlags): Promise<number> {
  const log = createLogger({ name: 'diffmesh-up', level: flags.logLevel, format: flags.logFormat });
  let plan: UpPlan;
  try {
    plan = await planUp(flags);
  } catch (err) {
    if (!(err instanceof UpUsageError)) throw err;
    process.stderr.write(`diffmesh: ${err.message}\n`);
    return 2;
  }
  const credentials = await prepareCredentials(flags.insecure === true);
  if (credentials === 'failed') return 1;
  // The gateway turns auth on with a key from DIFFMESH_API_KEY, or one made up here.
  const apiKey = process.env.DIFFMESH_API_KEY || `dm-${randomBytes(24).toString('base64url')}`;
  const signals = stopSignals();
  let state: MeshState | undefined;
  let mesh: LocalMesh | undefined;
  const writeProcesses = async (): Promise<void> => {
    if (state && mesh) await writeState(withProcesses(state, mesh)).catch(() => undefined);
  };
  try {
    const started = startLocalMesh(meshOptions(flags, plan, log, apiKey, credentials, () => void writeProcesses()));
    // Ctrl-C while the mesh starts: stop what started, then leave.
    const first = await Promise.race([started.then((m) => ({ m })), signals.stopWanted.then(() => undefined)]);
    if (!first) {
      process.stderr.write('stopping the mesh…\n');
      await started.then((m) => m.stop()).catch(() => undefined);
      return finish(130);
    }
    mesh = first.m;
    signals.running(mesh);
  } catch (err) {
    const known = err instanceof NatsServerNotFoundError || err instanceof RedisServerNotFoundError;
    process.stderr.write(`diffmesh: ${known ? '' : 'could not start the mesh: '}${err instanceof Error ? err.message : String(err)}\n`);
    return finish(1);
  }
  const client = credentials ? await credentials.tls('client') : undefined;
  await printMesh(mesh, flags, plan, apiKey, credentials);
  state = meshState(mesh, plan.queue, credentials, client, !flags.nats);
  await writeProcesses();
  process.stdout.write(`mesh ready: serving ${plan.models.join(', ')} (logs in ${mesh.logDir}; Ctrl-C stops it)\n`);
  await signals.stopWanted;
  process.stderr.write('stopping the mesh…\n');
  await mesh.stop();
  await clearState();
  return finish(0);
}

/** Checks every flag before any process starts; throws {@link UpUsageError} naming the flag. */
async function planUp(flags: UpFlags): Promise<UpPlan> {
  // A model directory is served under its real path; it is checked here.
  const models: string[] = [];
  const modelDirectories: string[] = [];
  for (const m of flags.models
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const arg = await modelArgument(m).catch((err: unknown) => {
      throw new UpUsageError(`${err instanceof Error ? err.message : String(err)} (--models)`);
    });
    models.push(arg.id);
    if (arg.directory) modelDirectories.push(arg.directory);
  }
  const threads = Number(flags.threads);
  if (!Number.isInteger(threads) || threads < 0) throw new UpUsageError(`threads: expected a non-negative integer, got "${flags.threads}"`);
  const queue = flags.queue as (typeof QUEUES)[number];
  if (!QUEUES.includes(queue)) throw new UpUsageError(`queue: expected one of ${QUEUES.join(', ')}, got "${flags.queue}" (--queue)`);
  const replicas = usage(() => parseReplicas(flags.replicas));
  if (queue === 'memory' && (replicas.scheduler ?? 1) > 1) {
    throw new UpUsageError('replicas: several schedulers need a shared queue; use --queue sqlite, redis or jetstream (--replicas)');
  }
  const executionProviders = usage(() => parseProviderSpec(flags.executionProviders ?? ''));
  const tensor = tensorStoreArgs(flags);
  if (typeof tensor === 'string') throw new UpUsageError(tensor);
  if (flags.tenants) {
    const file = flags.tenants;
    usage(() => TenantDirectory.load(file), ' (--tenants)');
  }
  return { models, modelDirectories, threads, queue, replicas, executionProviders, tensor };
}

/** `fn`'s result; what it throws becomes a {@link UpUsageError} (with `suffix`). */
function usage<T>(fn: () => T, suffix = ''): T {
  try {
    return fn();
  } catch (err) {
    throw new UpUsageError(`${(err as Error).message}${suffix}`);
  }
}

/**
 * Authenticated unless told otherwise: a CA and certificates for mutual TLS, and nkeys for
 * NATS, kept beside the state file and reused by the next `up`.
 */
async function prepareCredentials(insecure: boolean): Promise<MeshCredentials | undefined | 'failed'> {
  if (insecure) {
    process.stderr.write(
      'diffmesh: WARNING: running WITHOUT TLS and NATS credentials (--insecure): any process on this network can join the mesh and read its prompts and tensors\n',
    );
    return undefined;
  }
  try {
    return await ensureMeshCredentials(path.join(stateDir(), 'credentials'));
  } catch (err) {
    process.stderr.write(`diffmesh: could not prepare the mesh's credentials: ${err instanceof Error ? err.message : String(err)}\n`);
    return 'failed';
  }
}

/**
 * Signals: the first starts the stop; a copy within a second (npm forwards the terminal's
 * interrupt to its child too) is the same keypress; a later one kills the mesh's processes.
 */
function stopSignals(): { stopWanted: Promise<void>; running(mesh: LocalMesh): void } {
  let stopRequested: (() => void) | undefined;
  const stopWanted = new Promise<void>((resolve) => (stopRequested = resolve));
  let firstSignalAt = 0;
  let mesh: LocalMesh | undefined;
  const onSignal = (): void => {
    const now = Date.now();
    if (firstSignalAt === 0) {
      firstSignalAt = now;
      stopRequested?.();
      return;
    }
    if (now - firstSignalAt < 1000) return;
    process.stderr.write('diffmesh: interrupted again; killing the mesh now\n');
    for (const p of mesh?.supervisor.processes ?? []) p.child.kill('SIGKILL');
    process.exit(130);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { stopWanted, running: (m) => (mesh = m) };
}

/** The options of the local mesh `up` starts (supervised, restarted, in its own process groups). */
function meshOptions(
  flags: UpFlags,
  plan: UpPlan,
  log: Logger,
  apiKey: string,
  credentials: MeshCredentials | undefined,
  onRestart: () => void,
): LocalMeshOptions {
  return {
    ...(flags.nats ? { natsUrl: flags.nats } : {}),
    ...(flags.tenants ? { tenantsFile: path.resolve(flags.tenants) } : {}),
    ...(flags.gateway ? { gateway: { listen: flags.gatewayListen, apiKeys: [apiKey] } } : {}),
    modelsDirs: flags.modelsDir ?? [defaultModelsRoot()],
    serviceLog: { format: flags.logFormat },
    ...(flags.loraDir ? { stageOptions: { loraDir: path.resolve(flags.loraDir) } } : {}),
    models: plan.models,
    modelDirectories: plan.modelDirectories,
    threads: plan.threads,
    ...(Object.keys(plan.executionProviders).length > 0 ? { executionProviders: plan.executionProviders } : {}),
    log,
    queue: plan.queue,
    ...(flags.queueUrl ? { queueUrl: flags.queueUrl } : {}),
    ...(flags.sqlitePath ? { sqlitePath: flags.sqlitePath } : {}),
    replicas: plan.replicas,
    restart: true,
    ownProcessGroup: true,
    ...(credentials ? { credentials } : {}),
    onEvent: (e) => {
      if (e.type === 'exited' && e.restartInMs !== undefined) {
        process.stderr.write(`diffmesh: ${e.name} exited (${e.how}); restarting in ${e.restartInMs} ms (restart ${e.restarts + 1})\n`);
      } else if (e.type === 'exited') {
        process.stderr.write(`diffmesh: ${e.name} exited (${e.how})\n`);
      } else if (e.type === 'restarted') {
        process.stderr.write(`diffmesh: ${e.name} restarted (pid ${e.pid}, ${e.address}, restart ${e.restarts})\n`);
        onRestart();
      } else {
        process.stderr.write(`diffmesh: ${e.name} could not restart (${e.error}); trying again in ${e.restartInMs} ms\n`);
      }
    },
    ...plan.tensor,
  };
}

/** The lines `up` prints once the mesh is ready: where each part listens, and how to call it. */
async function printMesh(
  mesh: LocalMesh,
  flags: UpFlags,
  plan: UpPlan,
  apiKey: string,
  credentials: MeshCredentials | undefined,
): Promise<void> {
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  out(
    `nats ${mesh.natsUrl}${credentials ? (flags.nats ? ' (nkey users only)' : ' (TLS only, nkey users with per-role permissions)') : ' (no credentials)'}`,
  );
  out(credentials ? `security mutual TLS and NATS nkeys; credentials in ${credentials.dir}` : 'security none (--insecure)');
  out(`queue ${plan.queue}${mesh.queue.url ? ` ${mesh.queue.url}` : mesh.queue.sqlitePath ? ` ${mesh.queue.sqlitePath}` : ''}`);
  out(`tensor-svc ${mesh.tensorAddress}`);
  if (mesh.tensorStore) {
    const { backend, location, endpoint } = mesh.tensorStore;
    out(`tensor store ${backend} ${location}${endpoint ? ` at ${endpoint}` : ''} (started for the mesh)`);
  } else if (flags.tensorBackend !== 'memory' || flags.tensorDurable) {
    out(`tensor store ${flags.tensorBackend}${flags.tensorDurable ? ` ${redactUri(flags.tensorDurable)}` : ''}`);
  }
  for (const name of mesh.schedulers) out(`${name} (gRPC) ${mesh.supervisor.get(name)?.address ?? ''}`);
  const metricsUrl = (await mesh.discovery.instances()).find((i) => i.name === 'scheduler')?.metadata.metrics_url;
  if (metricsUrl) out(`scheduler metrics ${metricsUrl}`);
  for (const p of mesh.supervisor.processes) {
    if (!mesh.schedulers.includes(p.name) && p.name !== 'tensor-svc' && !p.name.startsWith('gateway')) out(`${p.name} ${p.address}`);
  }
  if (!mesh.gatewayUrl) return;
  out(`gateway ${mesh.gatewayUrl} (OpenAPI: ${mesh.gatewayUrl}/openapi.json)`);
  if (flags.tenants) out(`API keys: those of the tenants in ${flags.tenants}`);
  else
    out(
      `API key ${apiKey}${process.env.DIFFMESH_API_KEY ? ' (from DIFFMESH_API_KEY)' : ' (generated; set DIFFMESH_API_KEY to choose one)'}`,
    );
}

/** The state file's content: how `generate --remote local`, `status` and the rest find this mesh. */
function meshState(
  mesh: LocalMesh,
  queue: string,
  credentials: MeshCredentials | undefined,
  client: Awaited<ReturnType<MeshCredentials['tls']>> | undefined,
  ownNats: boolean,
): MeshState {
  return {
    pid: process.pid,
    ...(mesh.gatewayUrl ? { gatewayUrl: mesh.gatewayUrl } : {}),
    natsUrl: mesh.natsUrl,
    schedulerAddress: mesh.schedulerAddress,
    schedulerAddresses: mesh.schedulerAddresses,
    tensorAddress: mesh.tensorAddress,
    logDir: mesh.logDir,
    startedAt: new Date().toISOString(),
    queue,
    ...(credentials && client
      ? {
          credentials: {
            ca: client.ca,
            cert: client.cert,
            key: client.key,
            nats: credentials.natsSeedFile('client'),
            ...(ownNats ? { natsTls: true } : {}),
          },
        }
      : {}),
  };
}

/** `state` with the mesh's processes as they are now (pids and addresses change on restarts). */
function withProcesses(state: MeshState, mesh: LocalMesh): MeshState {
  state.processes = mesh.supervisor.processes.map((p) => ({
    name: p.name,
    pid: p.pid,
    address: p.address,
    restarts: p.restarts,
    state: p.state,
  }));
  state.schedulerAddresses = mesh.schedulers.map((n) => mesh.supervisor.get(n)?.address ?? '').filter(Boolean);
  return state;
}

/**
 * Leaves with `code` once the clean-up is done: anything left holding the event loop (a
 * client reconnecting to a server that is gone) must not keep `up` alive.
 */
function finish(code: number): number {
  setTimeout(() => process.exit(code), 1000).unref();
  return code;
}

/**
 * tensor-svc's flags for `--tensor-backend`, `--tensor-durable` and `--s3-endpoint` (its
 * `--backend`, `--durable`, `--s3-endpoint`); every service also gets the S3 endpoint as
 * `AWS_ENDPOINT_URL_S3`, to read durable copies. A message naming the flag when they do not fit.
 */
function tensorStoreArgs(
  flags: UpFlags,
): { tensorArgs: string[]; stageArgs?: string[]; env?: Record<string, string>; tensorStore?: 'redis' | 's3' } | string {
  const backend = flags.tensorBackend;
  if (!['memory', 'redis', 's3'].includes(backend))
    return `tensor-backend: expected memory, redis or s3, got "${backend}" (--tensor-backend)`;
  // No location of the user's: the mesh starts the store itself (redis-server, an S3-protocol server).
  if (backend === 'redis' && !flags.tensorDurable && !process.env.REDIS_URL) return { tensorArgs: [], tensorStore: 'redis' };
  if (backend === 's3' && !flags.tensorDurable) {
    if (flags.s3Endpoint) return 'tensor-durable: backend s3 with --s3-endpoint needs s3://bucket/prefix (--tensor-durable)';
    return { tensorArgs: [], tensorStore: 's3' };
  }
  const tensorArgs = ['--backend', backend];
  if (flags.tensorDurable) tensorArgs.push('--durable', flags.tensorDurable);
  if (!flags.s3Endpoint) return { tensorArgs };
  tensorArgs.push('--s3-endpoint', flags.s3Endpoint);
  return { tensorArgs, stageArgs: ['--s3-endpoint', flags.s3Endpoint], env: { AWS_ENDPOINT_URL_S3: flags.s3Endpoint } };
}
