import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createDiscovery,
  loadPlanRegistry,
  startNatsServer,
  type Discovery,
  type Logger,
  type RunningNatsServer,
  type StageName,
} from '@diffmesh/runtime';
import { Supervisor, type ManagedProcess } from './supervisor.js';

/** One stage service process to run. */
export interface StageProcessSpec {
  service: 'encoder-svc' | 'dit-svc' | 'vae-svc';
  pool: string;
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
  /** Further stage processes (beyond one per pool of `models`). */
  extraStages?: StageProcessSpec[];
  /** onnxruntime threads per service. */
  threads?: number;
  /** Node id of every process (default `local-<pid>`, unique per mesh on this machine). */
  nodeId?: string;
  log: Logger;
  /** Folder for process logs (default: a temp folder). */
  logDir?: string;
  /** Extra flags for the scheduler, e.g. `--max-queue-length 4`. */
  schedulerArgs?: string[];
  /** Flags added to every stage process, e.g. `--inline-max-bytes 0`. */
  stageArgs?: string[];
  /** TLS files (PEM paths) for every service, as server and as client (mutual TLS). */
  tls?: { ca: string; cert: string; key: string };
  /** Start the HTTP gateway too (after the stages). */
  gateway?: { listen?: string; adminListen?: string; apiKeys: string[] };
  /** Slots per instance of each stage service (default: dit-svc 4, others 2). */
  capacities?: Partial<Record<StageProcessSpec['service'], number>>;
  /**
   * Environment added to every service process (tensor-svc, scheduler, stages), e.g. the
   * `OTEL_*` variables of a trace collector. A stage's own `env` wins over it.
   */
  env?: Record<string, string>;
}

export interface LocalMesh {
  /** The node id every process of the mesh runs with. */
  nodeId: string;
  natsUrl: string;
  schedulerAddress: string;
  tensorAddress: string;
  /** `http://host:port` of the gateway, when started. */
  gatewayUrl?: string;
  logDir: string;
  supervisor: Supervisor;
  discovery: Discovery;
  /** Starts one more stage process and waits until discovery sees it. */
  addStage(spec: StageProcessSpec, name?: string): Promise<ManagedProcess>;
  stop(): Promise<void>;
}

/** Absolute path of a service package's compiled entry point. */
export function serviceEntry(pkg: 'scheduler' | 'tensor-svc' | 'encoder-svc' | 'dit-svc' | 'vae-svc' | 'gateway'): string {
  return fileURLToPath(import.meta.resolve(`@diffmesh/${pkg}/main`));
}

const SERVICE_OF_STAGE: Partial<Record<StageName, StageProcessSpec['service']>> = {
  text_encoding: 'encoder-svc',
  denoising: 'dit-svc',
  vae_decoding: 'vae-svc',
};

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
 * Resolves once the scheduler's discovery has seen every stage instance.
 */
export async function startLocalMesh(opts: LocalMeshOptions): Promise<LocalMesh> {
  const logDir = opts.logDir ?? (await mkdtemp(path.join(tmpdir(), 'diffmesh-mesh-')));
  const supervisor = new Supervisor({ logPath: (name) => path.join(logDir, `${name}.log`) });
  const nodeId = opts.nodeId ?? defaultNodeId();
  let nats: RunningNatsServer | undefined;
  let discovery: Discovery | undefined;
  try {
    if (!opts.natsUrl) nats = await startNatsServer({ log: opts.log });
    const natsUrl = opts.natsUrl ?? nats!.url;
    const tlsArgs = opts.tls
      ? ['--tls-ca', opts.tls.ca, '--tls-cert', opts.tls.cert, '--tls-key', opts.tls.key, '--tls-require-client-cert']
      : [];
    const common = ['--node-id', nodeId, '--log-level', 'info', ...tlsArgs];
    const tensor = await supervisor.start({
      name: 'tensor-svc',
      entry: serviceEntry('tensor-svc'),
      args: [...common, '--nats', natsUrl],
      ...(opts.env ? { env: opts.env } : {}),
      readyPrefix: 'tensor-svc listening on ',
    });
    const scheduler = await supervisor.start({
      name: 'scheduler',
      entry: serviceEntry('scheduler'),
      args: [...common, '--nats', natsUrl, '--tensor', tensor.address, '--metrics-listen', '127.0.0.1:0', ...(opts.schedulerArgs ?? [])],
      ...(opts.env ? { env: opts.env } : {}),
      readyPrefix: 'scheduler listening on ',
    });
    discovery = await createDiscovery({ backend: 'nats', url: natsUrl }, opts.log);
    const disc = discovery;

    const counters = new Map<string, number>();
    const addStage = async (spec: StageProcessSpec, name?: string): Promise<ManagedProcess> => {
      const n = (counters.get(spec.service) ?? 0) + 1;
      counters.set(spec.service, n);
      const procName = name ?? `${spec.service}-${n}`;
      const proc = await supervisor.start({
        name: procName,
        entry: serviceEntry(spec.service),
        args: [
          ...common,
          '--instance-id', procName,
          '--nats', natsUrl,
          '--tensor', tensor.address,
          '--pool', spec.pool,
          '--capacity', String(spec.capacity),
          '--threads', String(opts.threads ?? 1),
          '--models-dirs', (spec.modelsDirs ?? opts.modelsDirs).join(','),
          '--metrics-listen', '127.0.0.1:0',
          ...(spec.lazy ? [] : ['--models', spec.models.join(',')]),
          ...(opts.stageArgs ?? []),
          ...(spec.args ?? []),
        ],
        ...(opts.env || spec.env ? { env: { ...opts.env, ...spec.env } } : {}),
        readyPrefix: `${spec.service} listening on `,
      });
      await waitForInstance(disc, procName, 15_000);
      return proc;
    };

    const registry = await loadPlanRegistry();
    const seen = new Set<string>();
    const specs: StageProcessSpec[] = [];
    for (const model of opts.models) {
      for (const stage of registry.lookup(model).stages) {
        const service = SERVICE_OF_STAGE[stage.name];
        if (!service) throw new Error(`stage ${stage.name} of ${model} has no service in this build`);
        const key = `${service}|${stage.pool}`;
        if (seen.has(key)) {
          specs.find((s) => s.service === service && s.pool === stage.pool)?.models.push(model);
          continue;
        }
        seen.add(key);
        const capacity = opts.capacities?.[service] ?? (service === 'dit-svc' ? 4 : 2);
        specs.push({ service, pool: stage.pool, models: [model], capacity });
      }
    }
    // Start stage processes one at a time: on two cores, parallel model loading only thrashes.
    for (const spec of [...specs, ...(opts.extraStages ?? [])]) await addStage(spec);

    let gatewayUrl: string | undefined;
    if (opts.gateway) {
      const gw = await supervisor.start({
        name: 'gateway',
        entry: serviceEntry('gateway'),
        args: [
          '--node-id', nodeId,
          '--log-level', 'info',
          '--nats', natsUrl,
          '--listen', opts.gateway.listen ?? '127.0.0.1:0',
          '--admin-listen', opts.gateway.adminListen ?? '127.0.0.1:0',
          ...(opts.tls ? ['--tls-ca', opts.tls.ca, '--tls-cert', opts.tls.cert, '--tls-key', opts.tls.key] : []),
        ],
        // Keys go in the environment, not argv (argv is visible to every user in ps).
        env: { ...opts.env, DIFFMESH_GATEWAY_API_KEYS: opts.gateway.apiKeys.join(',') },
        readyPrefix: 'gateway listening on ',
      });
      gatewayUrl = gw.address;
    }

    return {
      nodeId,
      natsUrl,
      schedulerAddress: scheduler.address,
      tensorAddress: tensor.address,
      ...(gatewayUrl ? { gatewayUrl } : {}),
      logDir,
      supervisor,
      discovery: disc,
      addStage,
      async stop() {
        await supervisor.stop('gateway');
        await supervisor.stop('scheduler');
        await supervisor.stopAll();
        await disc.close();
        await nats?.stop();
      },
    };
  } catch (err) {
    await supervisor.stopAll(2000);
    await discovery?.close();
    await nats?.stop();
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
