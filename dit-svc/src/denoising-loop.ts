import { ATTR, SPAN, withSpan, type StageContext, type StageResult, type StageTask } from '@diffmesh/core';
import type { ModelRunObserver } from '@diffmesh/stage-host';
import { toBytes, type TensorStore } from '@diffmesh/tensor-client';
import type { Checkpointer, DenoiseCheckpoint } from './checkpoint.js';
import { LoopPreviews, type LatentFrame, type LatentRgbProjection } from './latent-preview.js';
import { applyGuidance } from './samplers.js';
import { StepCache, stepCacheWarning } from './step-cache.js';
import type { Prediction } from './step-batcher.js';

/** What a checkpoint of a run holds besides where it stood (the latent, the noise stream, a scheduler's state). */
export type RunState = Omit<DenoiseCheckpoint, 'step' | 'totalSteps' | 'fingerprint'>;

/** What the loop needs to know of a run before its first step. */
export interface RunPlan {
  /** Model steps of the whole run. */
  totalSteps: number;
  /** The step a fresh run starts at (image-conditioned built-ins: the one `strength` picks); progress counts from it. */
  firstStep: number;
  /** What the run is (see `runFingerprint`): a checkpoint of another run is not resumed. */
  fingerprint: string;
  /** Values in the latent (a checkpoint's must match). */
  latentLength: number;
  /** Denoiser calls per step: 2 for a CFG pair, else 1 (for the step cache's count). */
  callsPerStep: number;
  /** How the latent's channels become a preview's RGB. */
  projection: LatentRgbProjection;
}

/**
 * One task's denoising run as a denoiser sets it up: what the loop cannot know. The built-in
 * models and the model directories differ only here (how to predict, how to step the sampler,
 * what a checkpoint holds, how a preview frame is read); the loop does the rest.
 */
export interface DenoisingRun {
  readonly plan: RunPlan;
  /** The denoiser's latent input at step `i` (the step cache compares it with the previous step's). */
  modelInput(i: number): Float32Array;
  /** Runs the denoiser at step `i` on `input` (through the denoiser's step batcher). */
  predict(input: Float32Array, i: number, signal: AbortSignal): Promise<Prediction>;
  /** Moves the latent from step `i` to `i + 1` with the model's (guided) output. */
  step(out: Float32Array, i: number): void;
  /** What a checkpoint after the current step holds. */
  state(): RunState;
  /** Goes on from a checkpoint of this run. */
  restore(c: DenoiseCheckpoint): void;
  /** The latent's first frame as [C, h, w] (a copy), for a preview. */
  previewFrame(): LatentFrame;
  /** The stage's `latents` output, float32. */
  output(): { data: Float32Array; shape: number[] };
}

export interface DenoisingLoopDeps {
  store: TensorStore;
  /** Resumes, saves and yields on preemption (every run has one; `every: 0` saves only when preempted). */
  checkpoints: Checkpointer;
  metrics?: ModelRunObserver;
}

/** One run in the loop: the task, its context and what is kept between its steps. */
interface Looping {
  task: StageTask;
  ctx: StageContext;
  run: DenoisingRun;
  cache: StepCache | undefined;
  previews: LoopPreviews;
}

/**
 * The denoising loop, one for every model: resume from a checkpoint, then per step the abort
 * check, the step's span, the step cache, the model call, classifier-free guidance and the
 * sampler's step; after it the previews, preemption (with the previews of that step), the
 * scheduled checkpoint and the progress event; at the end the `latents` output and the step
 * cache's warning.
 */
export class DenoisingLoop {
  constructor(private readonly deps: DenoisingLoopDeps) {}

  async run(task: StageTask, ctx: StageContext, run: DenoisingRun): Promise<StageResult> {
    // A retried task goes on from its last checkpoint.
    const { plan } = run;
    const resumed = await this.deps.checkpoints.resume(task, ctx, plan.fingerprint, plan.totalSteps, plan.latentLength);
    if (resumed) run.restore(resumed);
    const p = task.params;
    // Step caching (off unless the params ask): a resumed run starts with an empty cache.
    const cache = StepCache.of(p.stepCache, plan.totalSteps - 1);
    const looping: Looping = { task, ctx, run, cache, previews: new LoopPreviews(p.preview, plan.projection) };
    for (let i = resumed?.step ?? plan.firstStep; i < plan.totalSteps; i += 1) {
      ctx.signal.throwIfAborted();
      await this.step(looping, i);
      await this.afterStep(looping, i);
    }
    return this.finish(looping);
  }

  /** Step `i` in its span (the wait for the shared batch and the run itself): cached, or predicted and guided. */
  private step({ task, ctx, run, cache }: Looping, i: number): Promise<void> {
    const attributes = { [ATTR.stage]: 'denoising', [ATTR.model]: task.model, [ATTR.step]: i + 1, [ATTR.stepCount]: run.plan.totalSteps };
    return withSpan(SPAN.modelRun, attributes, async (span) => {
      const input = run.modelInput(i);
      // step cache: a step whose input barely moved reuses the last output (no model run).
      const cached = cache?.lookup(input, i);
      if (cached) {
        span.setAttributes({ [ATTR.modelRuns]: 0, [ATTR.stepCached]: true });
        run.step(cached, i);
        return;
      }
      const { cond, uncond } = await run.predict(input, i, ctx.signal);
      span.setAttributes({
        [ATTR.batchSize]: Math.max(cond.batchSize, uncond?.batchSize ?? 0),
        [ATTR.modelRuns]: uncond && uncond.run !== cond.run ? 2 : 1,
      });
      const out = uncond ? applyGuidance(uncond.out, cond.out, task.params.guidanceScale) : cond.out;
      cache?.store(out);
      run.step(out, i);
    });
  }

  /** After step `i`: previews, then preemption or the scheduled checkpoint, and the step's progress. */
  private async afterStep({ task, ctx, run, previews }: Looping, i: number): Promise<void> {
    const { totalSteps: total, firstStep, fingerprint } = run.plan;
    const done = i + 1;
    const step = { step: done - firstStep, totalSteps: total - firstStep };
    // Live previews (params.preview): the frame copied at a due step, drawn while the next step runs.
    const ready = await previews.after(step.step, step.totalSteps, () => run.previewFrame());
    const progress = ready.length > 0 ? { ...step, previews: ready } : step;
    const checkpoints = this.deps.checkpoints;
    const state = (): DenoiseCheckpoint => ({ step: done, totalSteps: total, fingerprint, ...run.state() });
    if (checkpoints.preempting(ctx, done, total)) await checkpoints.yieldSlot(task, ctx, state(), progress);
    if (checkpoints.due(done, total)) await checkpoints.save(task, ctx, state(), progress);
    else ctx.onProgress(progress);
  }

  /** Stores the `latents` output; says what the step cache saved. */
  private async finish({ task, run, cache }: Looping): Promise<StageResult> {
    const { data, shape } = run.output();
    const latents = await this.deps.store.put({ requestId: task.reqId, name: 'latents', data: toBytes(data), shape, dtype: 'float32' });
    const warning = cache && stepCacheWarning(cache, run.plan.callsPerStep);
    if (cache) this.deps.metrics?.stepCacheSkipped?.(cache.skipped * run.plan.callsPerStep);
    return { outputs: { latents }, ...(warning ? { warnings: [warning] } : {}) };
  }
}
