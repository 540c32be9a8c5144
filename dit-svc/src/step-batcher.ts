import type { StageTask } from '@diffmesh/core';
import { floatOutput, type ModelRunObserver, type ModelSession, type ort } from '@diffmesh/stage-host';
import { MicroBatcher } from './batching.js';

/** What one batch item gets back from a denoiser run. */
export interface StepOutput {
  out: Float32Array;
  /** Items in the run that produced it. */
  batchSize: number;
  /** Which run (a counter), to tell whether two items shared one. */
  run: number;
}

/** A step's model outputs for one request: the conditional one and, with CFG, the unconditional one. */
export interface Prediction {
  cond: StepOutput;
  uncond?: StepOutput;
}

/**
 * One denoiser call of one request (a CFG request makes two per step). It names its request,
 * so that a run can read each item's own parameters (per-request adapters, say).
 */
export interface StepBatchItem {
  request: StageTask;
}

/** One denoiser run of a batch, as a denoiser stacks its items. */
export interface BatchRun {
  session: ModelSession;
  feeds: Record<string, ort.Tensor>;
  /** The output holding the prediction, batch axis first. */
  output: string;
  /** Move the feeds' buffers to the runner thread (they must be this run's own). */
  transfer?: boolean;
}

export interface StepBatcherOptions {
  /** Most items in one run. */
  maxBatch: number;
  /** Runs of one key in flight at once (default 1). */
  runConcurrency?: number;
  metrics?: ModelRunObserver;
  /** Called after every denoiser run with its batch size and time. */
  onBatch?: (size: number, ms: number) => void;
}

/**
 * The step batcher of a denoiser: items submitted under one key (one model and shapes) share a
 * denoiser run, whatever request or step they come from. The denoiser stacks a batch's items
 * into feeds (`stack`); the batcher runs them, reports the run's time and size, and gives each
 * item its slice of the output.
 */
export class StepBatcher<I extends StepBatchItem> {
  private readonly batcher: MicroBatcher<I, StepOutput>;
  private runs = 0;

  constructor(
    private readonly stack: (items: I[]) => Promise<BatchRun>,
    private readonly opts: StepBatcherOptions,
  ) {
    this.batcher = new MicroBatcher((_key, items) => this.runBatch(items), opts.maxBatch, opts.runConcurrency ?? 1);
  }

  /**
   * One step of one request: the conditional item and, with CFG, the unconditional one, submitted
   * together (under one key the pair always shares a run).
   */
  async predict(keys: { cond: string; uncond: string }, cond: I, uncond: I | undefined, signal: AbortSignal): Promise<Prediction> {
    const [c, u] = await Promise.all([
      this.batcher.submit(keys.cond, cond, signal),
      uncond ? this.batcher.submit(keys.uncond, uncond, signal) : undefined,
    ]);
    return u ? { cond: c, uncond: u } : { cond: c };
  }

  /** Stacks the items, runs the denoiser once, splits the output. */
  private async runBatch(items: I[]): Promise<StepOutput[]> {
    const { session, feeds, output, transfer } = await this.stack(items);
    const n = items.length;
    const started = performance.now();
    const result = await session.run(feeds, transfer ? { transfer } : {});
    const out = floatOutput(result[output]);
    const ms = performance.now() - started;
    this.opts.metrics?.modelRun(ms / 1000);
    this.opts.metrics?.denoiseBatch?.(n);
    this.opts.onBatch?.(n, ms);
    const run = ++this.runs;
    const size = out.length / n;
    return items.map((_, b) => ({ out: out.slice(b * size, (b + 1) * size), batchSize: n, run }));
  }
}
