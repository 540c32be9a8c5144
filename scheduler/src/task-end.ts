/**
 * How one try of a stage task ended, and the states a task goes through: the vocabulary of
 * the dispatcher (which sees a try end) and the request lifecycle (which records it). The
 * table in the README's "Lifecycle" section uses these names.
 */
import { Code, DiffmeshError, asDiffmeshError, type ObjectRef, type StageName, type StageResult } from '@diffmesh/core';
import { TaskRefused } from './types.js';

/**
 * A stage task's states. A task is one stage of one request (one queue item, `{reqId}#{stage}`,
 * of one generation); a request has at most one task at a time.
 * - `queued`: waiting in its pool's queue (after a failure, perhaps backing off first);
 * - `leased`: taken from the queue by a scheduler for a free slot, not yet sent;
 * - `running`: sent to a stage instance (the record's `startedBy` is the lease's token);
 * - `done`: finished (acknowledged; the next stage's task is queued or the request completed);
 * - `dropped`: gone without finishing (its request ended, or a stage before it re-runs).
 *
 * `TaskTransitions` names each move it makes with these (counted, and logged at debug).
 */
export const TASK_STATES = ['queued', 'leased', 'running', 'done', 'dropped'] as const;
export type TaskState = (typeof TASK_STATES)[number];

/**
 * How a try of a task ended. {@link classifyTaskEnd} decides the kind, in one place;
 * `TaskTransitions.taskEnded` acts on it with one `switch`.
 *
 * To add a kind: a member here, a line in {@link classifyTaskEnd} (where its check belongs in
 * the order), and a case in `TaskTransitions.taskEnded` (the switch is exhaustive, so the
 * compiler names a missing case).
 */
export type TaskEnd =
  /** The instance answered with the stage's outputs: the request moves on to its next stage, or completes. */
  | { kind: 'completed'; result: StageResult }
  /** This scheduler lost the task's lease (not renewed in time): another may run it now; nothing is recorded. */
  | { kind: 'superseded' }
  /** The instance refused the task without running it (its breaker): back in its place as the same try. */
  | { kind: 'refused'; error: DiffmeshError }
  /**
   * A draining scheduler or instance gave the task back: back in its place at once as the next
   * try, not counted against any budget.
   */
  | { kind: 'handed-back'; error: DiffmeshError }
  /**
   * The task gave its slot to a more urgent one at a step boundary, as this scheduler asked
   * (preemption): back in its place at once as the next try, resuming from the checkpoint where
   * it stopped (`at`); counted against no budget.
   */
  | { kind: 'preempted'; error: DiffmeshError; at: PreemptedAt }
  /** The task's request ended while it ran (cancelled, failed or timed out): nothing to retry. */
  | { kind: 'request-ended'; error: DiffmeshError }
  /**
   * The instance was lost with the task (its stream broke): tried again at once, counted as a
   * lost try (at most `MAX_LOST_TRIES` per stage, in case the task is what kills instances).
   */
  | { kind: 'lost'; error: DiffmeshError }
  /**
   * The task's own failure: `retryable` ones are tried again after a back-off, counted as a
   * failed try (at most `maxAttempts` per stage); `inputsMayBeLost` when the error may mean
   * an input is gone (then the stage that made it runs again, if it can).
   */
  | { kind: 'failed'; error: DiffmeshError; retryable: boolean; inputsMayBeLost: boolean };

export type TaskEndKind = TaskEnd['kind'];

/** Where a preempted try stopped, and why (the request's `preempted` event). */
export interface PreemptedAt {
  pool: string;
  instanceId: string;
  /** E.g. `priority 10 > 0` or `deadline at risk`. */
  reason: string;
  /** Steps done when it stopped, of `totalSteps`. */
  step: number;
  totalSteps: number;
  /** The checkpoint written at that step (the next try resumes from it). */
  checkpoint?: Record<string, ObjectRef>;
}

/** What the dispatcher saw of a try, besides the instance's answer. */
export interface TrySeen {
  stage: StageName;
  /** The lease was lost (not renewed in time). */
  leaseLost: boolean;
  /** This scheduler handed the task back (it drains). */
  handedBack: boolean;
  /** The request ended while the task ran; the instance was told to stop. */
  requestEnded: boolean;
  /** The try ran past the stage's time limit (`stageTimeoutMs`). */
  timedOut: boolean;
  /** This scheduler asked the instance to preempt the task: where it stopped, as far as known. */
  preempting?: PreemptedAt;
  /** Whether the instance is gone for good (its connection lost); asked only when it matters. */
  instanceGone: () => boolean;
}

/** Failure reasons that may mean a task's input is gone. */
const LOST_INPUT_REASONS = new Set(['OBJECT_NOT_FOUND', 'OBJECT_EXPIRED', 'CHECKSUM_MISMATCH', 'TRANSPORT']);

/**
 * The one place that decides how a try ended, from the instance's answer (its result, or what
 * it rejected with) and what the dispatcher saw. The checks go in order; the first that holds
 * decides. A new kind's check goes here, where it ranks.
 */
export function classifyTaskEnd(answer: { result: StageResult } | { rejected: unknown }, seen: TrySeen): TaskEnd {
  // Someone else runs it now: what this try made or left is reaped by TTL.
  if (seen.leaseLost) return { kind: 'superseded' };
  if ('result' in answer) return { kind: 'completed', result: answer.result };
  const raw = answer.rejected;
  if (raw instanceof TaskRefused) return { kind: 'refused', error: raw };
  const error = seen.timedOut
    ? new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `stage ${seen.stage} exceeded its deadline`)
    : asDiffmeshError(raw);
  // An instance that drains gives back what it could not finish in its grace (or what reached
  // it after it began draining): not a failure of the task.
  if (seen.handedBack || (error.code === Code.UNAVAILABLE && error.reason === 'DRAINING')) return { kind: 'handed-back', error };
  if (seen.requestEnded) return { kind: 'request-ended', error };
  if (seen.preempting && error.reason === 'PREEMPTED') return { kind: 'preempted', error, at: seen.preempting };
  if (error.reason === 'TRANSPORT' && seen.instanceGone()) return { kind: 'lost', error };
  return {
    kind: 'failed',
    error,
    retryable: isRetryable(error),
    inputsMayBeLost: !seen.timedOut && (LOST_INPUT_REASONS.has(error.reason) || error.code === Code.UNAVAILABLE),
  };
}

/** Codes a stage failure is retried on. */
export function isRetryable(e: DiffmeshError): boolean {
  return e.code === Code.UNAVAILABLE || e.code === Code.DEADLINE_EXCEEDED || e.code === Code.RESOURCE_EXHAUSTED || e.code === Code.INTERNAL;
}
