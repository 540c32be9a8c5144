#!/usr/bin/env node
/**
 * A host of many simulated GPU workers for `npm run bench -- sim`: each worker is a real stage
 * service (a StageService on its own gRPC server with the Work stream, its own NATS connection
 * and registration, outputs put into this node's tensor-svc), whose model run is replaced by a
 * modelled duration (see {@link ModelledEngine}). Many workers share one process so that
 * hundreds fit on a small machine.
 *
 * Usage: node bench/dist/sim-worker.js '<json WorkerHostSpec>'
 * Prints `sim-worker listening on http://127.0.0.1:PORT` once every worker is registered;
 * `GET /stats` on that address answers {@link WorkerHostStats} as JSON.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createLogger,
  GrpcServer,
  runProcess,
  type Logger,
  type ObjectRef,
  type StageContext,
  type StageHandler,
  type StageName,
  type StageTask,
} from '@diffmesh/core';
import { createDiscovery } from '@diffmesh/discovery';
import { StageService } from '@diffmesh/stage-host';
import { DurableStores, RemoteTensorStore, RoutedTensorStore, type TensorStore } from '@diffmesh/tensor-client';

/** One pool's workers in this host. */
export interface SimPoolSpec {
  pool: string;
  stage: StageName;
  /** Workers of this pool in this host; instance ids are `<pool>-<first + i>`. */
  count: number;
  first: number;
  /** Cost of one model run of `b` items: `fixedMs + perItemMs × b` (already scaled), repeated `steps` times per task. */
  fixedMs: number;
  perItemMs: number;
  steps: number;
  /** Items one run takes (the worker's slots). */
  maxBatch: number;
}

export interface WorkerHostSpec {
  natsUrl: string;
  tensorAddress: string;
  nodeId: string;
  modelsDir: string;
  /** Bytes of each output tensor (float32; 0 = no output). */
  outputBytes: number;
  pools: SimPoolSpec[];
}

/** Per pool, since the host started. */
export interface PoolStats {
  workers: number;
  /** Sum over the pool's workers of the modelled time spent running, ms. */
  busyMs: number;
  /** Model runs, and items in them (a denoising task of 50 steps at batch 1 = 50 runs, 50 items). */
  runs: number;
  items: number;
  /** Tasks finished. */
  tasks: number;
}

export interface WorkerHostStats {
  /** Milliseconds since the epoch when the stats were taken. */
  at: number;
  pools: Record<string, PoolStats>;
}

interface Item {
  stepsLeft: number;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * One simulated GPU: runs its items in model runs of up to `maxBatch` at once, each run taking
 * `fixedMs + perItemMs × b`; an item needs `steps` runs. Items that arrive while a run goes
 * join the next one (continuous batching at step granularity, as dit-svc's batcher does).
 * Back-to-back runs are timed from the previous run's planned end, so timer lateness on a busy
 * machine does not turn into lost GPU time.
 */
export class ModelledEngine {
  private readonly active: Item[] = [];
  private running = false;
  private plannedEnd = 0;
  /** Modelled time of the runs that ended, ms; and the run going now, if any. */
  private busyDone = 0;
  private current: { start: number; ms: number } | undefined;

  constructor(
    private readonly spec: Pick<SimPoolSpec, 'fixedMs' | 'perItemMs' | 'steps' | 'maxBatch'>,
    private readonly stats: PoolStats,
  ) {}

  /** Modelled busy time up to `now` (performance.now()), ms: a run counts as far as it has gone. */
  busyMs(now = performance.now()): number {
    const c = this.current;
    return this.busyDone + (c ? Math.min(c.ms, Math.max(0, now - c.start)) : 0);
  }

  run(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const item: Item = { stepsLeft: this.spec.steps, resolve, reject };
      if (signal) {
        if (signal.aborted) return reject(signal.reason);
        signal.addEventListener(
          'abort',
          () => {
            const i = this.active.indexOf(item);
            if (i >= 0) this.active.splice(i, 1);
            reject(signal.reason);
          },
          { once: true },
        );
      }
      this.active.push(item);
      if (!this.running) {
        this.running = true;
        // Items of this turn go together.
        setImmediate(() => this.next(false));
      }
    });
  }

  private next(backToBack: boolean): void {
    const batch = this.active.slice(0, this.spec.maxBatch);
    if (batch.length === 0) {
      this.running = false;
      return;
    }
    const ms = this.spec.fixedMs + this.spec.perItemMs * batch.length;
    const now = performance.now();
    // A run that follows the previous one starts at its planned end (if the timer was late by
    // less than a run, the GPU did not idle).
    const start = backToBack && now - this.plannedEnd < ms ? this.plannedEnd : now;
    this.plannedEnd = start + ms;
    this.current = { start, ms };
    this.stats.runs += 1;
    this.stats.items += batch.length;
    setTimeout(
      () => {
        this.busyDone += ms;
        this.current = undefined;
        for (const item of batch) {
          item.stepsLeft -= 1;
          if (item.stepsLeft <= 0) {
            const i = this.active.indexOf(item);
            if (i >= 0) {
              this.active.splice(i, 1);
              this.stats.tasks += 1;
              item.resolve();
            }
          }
        }
        this.next(true);
      },
      Math.max(0, this.plannedEnd - performance.now()),
    );
  }
}

const OUTPUT_NAME: Partial<Record<StageName, string>> = {
  text_encoding: 'prompt_embeds',
  denoising: 'latents',
  vae_decoding: 'sim_output',
};

/** A stage whose model run is a {@link ModelledEngine}: reads its inputs and puts a small output, as a real stage would. */
class ModelledStage implements StageHandler {
  constructor(
    readonly stage: StageName,
    private readonly engine: ModelledEngine,
    private readonly store: TensorStore,
    private readonly outputBytes: number,
  ) {}

  models(): string[] {
    return [];
  }

  async execute(task: StageTask, ctx: StageContext): Promise<{ outputs: Record<string, ObjectRef> }> {
    for (const ref of Object.values(task.inputs)) await this.store.get(ref);
    await this.engine.run(ctx.signal);
    if (this.outputBytes <= 0) return { outputs: {} };
    const n = Math.max(1, Math.floor(this.outputBytes / 4));
    const name = OUTPUT_NAME[this.stage] ?? 'sim_output';
    const ref = await this.store.put({ requestId: task.reqId, name, data: new Uint8Array(n * 4), shape: [n], dtype: 'float32' });
    return { outputs: { [name]: ref } };
  }
}

/** One running simulated worker. */
interface RunningWorker {
  stop(): Promise<void>;
}

/**
 * One worker, wired as `startStageService` wires a stage process (StageService with its Work
 * stream on its own gRPC server, its own NATS connection and registration, a tensor-svc
 * client), less what a modelled run does not need: ONNX sessions (whose start-up probe costs
 * ~60 ms of CPU per instance), the model catalog and the metrics endpoint.
 */
async function startWorker(
  spec: WorkerHostSpec,
  p: SimPoolSpec,
  instanceId: string,
  engine: ModelledEngine,
  log: Logger,
): Promise<RunningWorker> {
  const store = new RoutedTensorStore({
    remote: new RemoteTensorStore({ address: spec.tensorAddress, nodeId: spec.nodeId, log }),
    durable: new DurableStores({ logger: log }),
    log,
  });
  const service = new StageService(
    new ModelledStage(p.stage, engine, store, spec.outputBytes),
    { instanceId, nodeId: spec.nodeId, pool: p.pool, version: '0.1.0', capacity: p.maxBatch, tensorAddress: spec.tensorAddress },
    log,
  );
  const server = await GrpcServer.start({ address: '127.0.0.1:0', services: [service.binding()], log });
  const discovery = await createDiscovery({ backend: 'nats', url: spec.natsUrl }, log);
  const registration = await discovery.register(
    {
      id: instanceId,
      name: 'sim-stage',
      version: '0.1.0',
      nodeId: spec.nodeId,
      pool: p.pool,
      stage: p.stage,
      grpcAddress: server.address,
      models: [],
      capacity: p.maxBatch,
      tensorAddress: spec.tensorAddress,
    },
    () => ({ inFlight: service.load.inFlight }),
  );
  return {
    async stop() {
      await registration.stop().catch(() => undefined);
      service.handBack();
      await server.drain(500).catch(() => undefined);
      server.forceStop();
      await discovery.close().catch(() => undefined);
      await store.close().catch(() => undefined);
    },
  };
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as WorkerHostSpec;
  const log = createLogger({ name: 'sim-worker', level: 'warn', pretty: false });
  const stats: Record<string, PoolStats> = {};
  const workers: RunningWorker[] = [];
  const engines: { pool: string; engine: ModelledEngine }[] = [];
  await runProcess('sim-worker', log, async () => {
    const starts: Promise<RunningWorker>[] = [];
    for (const p of spec.pools) {
      const poolStats = (stats[p.pool] ??= { workers: 0, busyMs: 0, runs: 0, items: 0, tasks: 0 });
      for (let i = 0; i < p.count; i += 1) {
        poolStats.workers += 1;
        const engine = new ModelledEngine(p, poolStats);
        engines.push({ pool: p.pool, engine });
        starts.push(startWorker(spec, p, `${p.pool}-${p.first + i}`, engine, log));
        // A few at a time: hundreds of NATS connections and servers at once stall the event loop.
        if (starts.length % 25 === 0) workers.push(...(await Promise.all(starts.splice(0))));
      }
    }
    workers.push(...(await Promise.all(starts)));
    const server = createServer((req, res) => {
      if (req.url === '/stats') {
        const now = performance.now();
        for (const st of Object.values(stats)) st.busyMs = 0;
        for (const { pool, engine } of engines) stats[pool].busyMs += engine.busyMs(now);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ at: Date.now(), pools: stats } satisfies WorkerHostStats));
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      address: `http://127.0.0.1:${port}`,
      async stop() {
        server.close();
        await Promise.all(workers.map((w) => w.stop()));
      },
    };
  });
}

await main();
