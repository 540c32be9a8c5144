import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** How a stage task ended, as the `outcome` label says it. */
export type StageTaskOutcome = 'ok' | 'failed' | 'cancelled' | 'timeout' | 'refused' | 'preempted';

/** Timing hooks an ONNX stage reports its model runs through (implemented by {@link StageMetrics}). */
export interface ModelRunObserver {
  /** One model run (an ONNX `session.run`) took `seconds`. */
  modelRun(seconds: number): void;
  /** One denoiser run carried `size` latents. */
  denoiseBatch?(size: number): void;
  /** Step caching spared `calls` denoiser model calls (a CFG step counts two). */
  stepCacheSkipped?(calls: number): void;
  /** A task's LoRA adapter was found loaded (`hit`) or read from its file (`load`). */
  adapterLookup?(outcome: 'hit' | 'load'): void;
  /** The stage now holds `held` adapters loaded and has `available` in its adapter folder. */
  adapterCounts?(held: number, available: number): void;
}

/** Options of {@link StageMetrics}. */
export interface StageMetricsOptions {
  stage: string;
  pool: string;
  /** Registry to use; default a new one. */
  registry?: Registry;
  /** Also collect Node.js process metrics (prefix `diffmesh_stage_`). Default false. */
  processMetrics?: boolean;
}

const TASK_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const RUN_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64];

/**
 * Prometheus metrics of one stage service instance:
 * - `diffmesh_stage_tasks_total{stage,pool,outcome}`: tasks ended, by outcome
 *   (ok | failed | cancelled | timeout | refused | preempted);
 * - `diffmesh_stage_task_seconds{stage,pool}`: run time of a task (admitted to ended);
 * - `diffmesh_stage_in_flight{stage,pool}`: tasks running now;
 * - `diffmesh_denoising_steps_total{pool}`: denoising steps done by this instance;
 * - `diffmesh_model_run_seconds{stage}`: one ONNX model run;
 * - `diffmesh_denoise_batch_size`: latents per denoiser run;
 * - `diffmesh_dit_step_cache_skipped_total{pool}`: denoiser model calls step caching spared;
 * - `diffmesh_dit_adapter_lookups_total{pool,outcome}`: a task's adapter found loaded (hit) or read (load);
 * - `diffmesh_dit_adapters{pool,state}`: adapters held loaded (`held`) and in the adapter folder (`available`).
 */
export class StageMetrics implements ModelRunObserver {
  readonly registry: Registry;
  private readonly labels: { stage: string; pool: string };
  private readonly tasks: Counter<'stage' | 'pool' | 'outcome'>;
  private readonly taskSeconds: Histogram<'stage' | 'pool'>;
  private readonly inFlight: Gauge<'stage' | 'pool'>;
  private readonly steps: Counter<'pool'>;
  private readonly runSeconds: Histogram<'stage'>;
  private readonly batchSize: Histogram;
  private readonly cacheSkipped: Counter<'pool'>;
  private readonly adapterLookups: Counter<'pool' | 'outcome'>;
  private readonly adapterGauge: Gauge<'pool' | 'state'>;
  /** Series of this instance's labels, bound once (a labelled call hashes its labels each time). */
  private readonly bound: {
    inFlight: ReturnType<Gauge['labels']>;
    taskSeconds: ReturnType<Histogram['labels']>;
    outcomes: Record<StageTaskOutcome, ReturnType<Counter['labels']>>;
  };

  constructor(opts: StageMetricsOptions) {
    const r = (this.registry = opts.registry ?? new Registry());
    this.labels = { stage: opts.stage, pool: opts.pool };
    if (opts.processMetrics) collectDefaultMetrics({ register: r, prefix: 'diffmesh_stage_' });
    this.tasks = new Counter({
      name: 'diffmesh_stage_tasks_total',
      help: 'Stage tasks ended, by outcome (ok, failed, cancelled, timeout, refused, preempted)',
      labelNames: ['stage', 'pool', 'outcome'],
      registers: [r],
    });
    this.taskSeconds = new Histogram({
      name: 'diffmesh_stage_task_seconds',
      help: 'Run time of a stage task on this instance',
      labelNames: ['stage', 'pool'],
      buckets: TASK_BUCKETS,
      registers: [r],
    });
    this.inFlight = new Gauge({
      name: 'diffmesh_stage_in_flight',
      help: 'Stage tasks running now',
      labelNames: ['stage', 'pool'],
      registers: [r],
    });
    this.steps = new Counter({
      name: 'diffmesh_denoising_steps_total',
      help: 'Denoising steps done by this instance',
      labelNames: ['pool'],
      registers: [r],
    });
    this.runSeconds = new Histogram({
      name: 'diffmesh_model_run_seconds',
      help: 'One model run (ONNX session.run)',
      labelNames: ['stage'],
      buckets: RUN_BUCKETS,
      registers: [r],
    });
    this.batchSize = new Histogram({
      name: 'diffmesh_denoise_batch_size',
      help: 'Latents per denoiser run',
      buckets: BATCH_BUCKETS,
      registers: [r],
    });
    this.cacheSkipped = new Counter({
      name: 'diffmesh_dit_step_cache_skipped_total',
      help: 'Denoiser model calls not run because step caching reused the last output (a CFG step counts two)',
      labelNames: ['pool'],
      registers: [r],
    });
    this.adapterLookups = new Counter({
      name: 'diffmesh_dit_adapter_lookups_total',
      help: "LoRA adapters of tasks, found in the stage's cache (outcome hit) or read from their files (load)",
      labelNames: ['pool', 'outcome'],
      registers: [r],
    });
    this.adapterGauge = new Gauge({
      name: 'diffmesh_dit_adapters',
      help: 'LoRA adapters of this stage: loaded in its cache (state held) and in its adapter folder (state available)',
      labelNames: ['pool', 'state'],
      registers: [r],
    });
    // Series exist from the start, so rates and "no task yet" read as 0 rather than absent.
    this.inFlight.set(this.labels, 0);
    for (const outcome of ['ok', 'failed', 'cancelled', 'timeout', 'refused', 'preempted'] as const)
      this.tasks.inc({ ...this.labels, outcome }, 0);
    if (opts.stage === 'denoising') {
      this.steps.inc({ pool: opts.pool }, 0);
      this.cacheSkipped.inc({ pool: opts.pool }, 0);
    }
    const outcome = (o: StageTaskOutcome) => this.tasks.labels({ ...this.labels, outcome: o });
    this.bound = {
      inFlight: this.inFlight.labels(this.labels),
      taskSeconds: this.taskSeconds.labels(this.labels),
      outcomes: {
        ok: outcome('ok'),
        failed: outcome('failed'),
        cancelled: outcome('cancelled'),
        timeout: outcome('timeout'),
        refused: outcome('refused'),
        preempted: outcome('preempted'),
      },
    };
  }

  /** A task was refused (at capacity, draining, wrong stage or model). */
  refused(): void {
    this.bound.outcomes.refused.inc();
  }

  /** A task started running; call the returned function once when it ends. */
  taskStarted(): (outcome: Exclude<StageTaskOutcome, 'refused'>) => void {
    const started = performance.now();
    const bound = this.bound;
    bound.inFlight.inc();
    let ended = false;
    return (outcome) => {
      if (ended) return;
      ended = true;
      bound.inFlight.dec();
      bound.outcomes[outcome].inc();
      bound.taskSeconds.observe((performance.now() - started) / 1000);
    };
  }

  /** `n` more denoising steps done. */
  denoisingSteps(n: number): void {
    if (n > 0) this.steps.inc({ pool: this.labels.pool }, n);
  }

  modelRun(seconds: number): void {
    this.runSeconds.observe({ stage: this.labels.stage }, seconds);
  }

  denoiseBatch(size: number): void {
    this.batchSize.observe(size);
  }

  stepCacheSkipped(calls: number): void {
    if (calls > 0) this.cacheSkipped.inc({ pool: this.labels.pool }, calls);
  }

  adapterLookup(outcome: 'hit' | 'load'): void {
    this.adapterLookups.inc({ pool: this.labels.pool, outcome });
  }

  adapterCounts(held: number, available: number): void {
    this.adapterGauge.set({ pool: this.labels.pool, state: 'held' }, held);
    this.adapterGauge.set({ pool: this.labels.pool, state: 'available' }, available);
  }
}
