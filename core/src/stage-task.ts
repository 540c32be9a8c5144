import { Code, DiffmeshError } from './errors/index.js';
import type { GenerationParams } from './generation-params.js';
import type { ObjectRef } from './object-ref.js';
import type { StageName } from './execution-plan.js';
import type { Logger } from 'pino';

/**
 * One unit of work for a stage instance: stage `stageIndex` of request `reqId`.
 * `(reqId, stageIndex)` is the task's identity, so running it twice is harmless.
 */
export interface StageTask {
  reqId: string;
  stageIndex: number;
  stage: StageName;
  /** 1 for the first try. */
  attempt: number;
  model: string;
  params: GenerationParams;
  /** Objects produced by earlier stages, by name. */
  inputs: Record<string, ObjectRef>;
  /** Absolute deadline in ms since the epoch; 0 = none. */
  deadline: number;
  traceContext: Record<string, string>;
  /** The plan's last stage: its outputs are the request's result (absent = false). */
  lastStage?: boolean;
  /** The tenant of the request (for logs, spans and metrics); absent = `default`. */
  tenant?: string;
}

/** Progress within a stage (denoising steps; other stages report 1 of 1). */
export interface StageProgress {
  step: number;
  totalSteps: number;
  /**
   * Objects the task keeps for a later try of itself, by name (e.g. a denoising checkpoint).
   * The scheduler hands the latest of each name to the next try of the stage in
   * `task.inputs` (a retry has `attempt` > 1), and deletes them when the stage completes or
   * the request ends.
   */
  checkpoint?: Record<string, ObjectRef>;
  /**
   * Pictures of the task's latent drawn since the last report, when the task's params ask for
   * previews; each names the step it shows. Go to those following the request live; never
   * stored.
   */
  previews?: StagePreview[];
  /**
   * The task stops here for a preemption ({@link StageContext.preempt}): `checkpoint` is where
   * it stood, and a `PREEMPTED` failure follows.
   */
  preempted?: boolean;
}

/** A small encoded image of a stage's work in progress (a denoising preview). */
export interface StagePreview {
  /** `image/png`. */
  mediaType: string;
  data: Uint8Array;
  width: number;
  height: number;
  /** The step whose latent it shows. */
  step: number;
}

/** What a stage hands on: new objects by name. */
export interface StageResult {
  outputs: Record<string, ObjectRef>;
  /**
   * Things the user should know that did not stop the stage (e.g. a prompt cut to the text
   * encoder's length); they reach the request's `stage_finished` event.
   */
  warnings?: string[];
}

/** Per-call context given to a stage handler. */
export interface StageContext {
  /** Aborted when the request is cancelled or the task's deadline passes. */
  signal: AbortSignal;
  /**
   * Aborted when the scheduler wants the task's slot for a more urgent task: a stage with
   * steps stops at its next step boundary, reports a checkpoint there with `preempted: true`,
   * and throws {@link preemptedError}; its next try resumes from that checkpoint. A stage
   * without steps may ignore it. Absent where preemption is not offered.
   */
  preempt?: AbortSignal;
  onProgress(progress: StageProgress): void;
  log: Logger;
}

/**
 * The LoRA adapters of a stage instance, by the names requests give: `held` are loaded now (a
 * task naming them starts without reading a file), `available` are in its adapter directory
 * (what it can load).
 */
export interface AdapterReport {
  held: string[];
  available: string[];
}

/**
 * The work a stage service does, independent of transport: the embedded runtime calls it
 * in-process; the mesh calls it behind the StageService gRPC API.
 */
export interface StageHandler {
  readonly stage: StageName;
  /** Models this handler can serve. */
  models(): string[];
  /**
   * Loads a model ahead of the first task. With `run`, also runs it once at its default size
   * (zeros), so the first request does not pay for a GPU's shader compilation or first-run
   * allocations.
   */
  warm?(model: string, opts?: { run?: boolean }): Promise<void>;
  execute(task: StageTask, ctx: StageContext): Promise<StageResult>;
  /** Releases model sessions. */
  close?(): Promise<void>;
  /** Its LoRA adapters now; absent (or undefined) for a handler that has none to report. */
  adapters?(): AdapterReport | undefined;
  /** Calls `listener` whenever {@link adapters} may answer otherwise; returns a function that stops the calls. */
  onAdaptersChange?(listener: () => void): () => void;
}

/** What a preempted task throws after its last checkpoint (UNAVAILABLE / PREEMPTED: it goes back to its queue). */
export function preemptedError(step: number, totalSteps: number): DiffmeshError {
  return new DiffmeshError(Code.UNAVAILABLE, 'PREEMPTED', `preempted after step ${step} of ${totalSteps}; resumes from its checkpoint`, {
    retryAfterMs: 0,
  });
}
