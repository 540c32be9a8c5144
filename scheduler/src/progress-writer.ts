/**
 * Writes a running try's progress to the request's record. On the memory store every step is
 * written (a write costs nothing there); on a shared store a write is a round trip, so writes
 * are throttled to one per `intervalMs` and one at a time, a checkpoint is written at once, and
 * the last step rides with the stage's end (see `TaskTransitions.taskEnded`).
 */
import type { Logger, ObjectRef } from '@diffmesh/core';
import type { TaskTransitions } from './task-transitions.js';
import type { TaskTry } from './task-try.js';

interface Pending {
  step: number;
  totalSteps: number;
  checkpoint?: Record<string, ObjectRef>;
}

export class ProgressWriter {
  /** When the last write went (performance.now()). */
  private writtenAt = 0;
  /** A write is in flight; `next` waits for it. */
  private writing = false;
  private next?: Pending;
  /** The last step reported (written with the stage's end on shared stores). */
  private last?: { step: number; totalSteps: number };

  constructor(
    private readonly t: TaskTry,
    private readonly transitions: TaskTransitions,
    private readonly log: Logger,
    /** Least time between two writes; 0 = every step. */
    private readonly intervalMs: number,
  ) {}

  /** What the stage's end writes besides its outcome: the record hint (when no write is in flight) and the last step. */
  endOptions(): { hint?: NonNullable<TaskTry['record']>; lastProgress?: { step: number; totalSteps: number } } {
    const last = this.intervalMs > 0 ? this.last : undefined;
    return { ...(this.t.record && !this.writing ? { hint: this.t.record } : {}), ...(last ? { lastProgress: last } : {}) };
  }

  /** A step the instance reported. */
  write(step: number, totalSteps: number, checkpoint?: Record<string, ObjectRef>): void {
    const { t } = this;
    if (t.muted) return;
    const interval = this.intervalMs;
    if (interval === 0) {
      // Every step (the memory store writes in the caller's turn, in order).
      void this.transitions
        .progress(t.lease, step, totalSteps, checkpoint ? { checkpoint } : {})
        .catch((err: unknown) => this.log.debug({ err }, 'could not record progress'));
      return;
    }
    this.last = { step, totalSteps };
    // A checkpoint waiting for its write rides with the next one.
    if (this.next?.checkpoint) checkpoint = { ...this.next.checkpoint, ...checkpoint };
    // The last step is written with the stage's end (a checkpoint is not needed any more then).
    if (step >= totalSteps) {
      this.next = undefined;
      return;
    }
    const now = performance.now();
    if (this.writing || (!checkpoint && now - this.writtenAt < interval)) {
      this.next = { step, totalSteps, ...(checkpoint ? { checkpoint } : {}) };
      if (!this.writing) setTimeout(() => this.flush(), interval - (now - this.writtenAt)).unref();
      return;
    }
    this.writtenAt = now;
    this.writing = true;
    void this.transitions
      .progress(t.lease, step, totalSteps, { ...(t.record ? { hint: t.record } : {}), ...(checkpoint ? { checkpoint } : {}) })
      .then((rec) => {
        if (rec) t.record = rec;
      })
      .catch((err: unknown) => this.log.debug({ err }, 'could not record progress'))
      .finally(() => {
        this.writing = false;
        this.flush();
      });
  }

  private flush(): void {
    const next = this.next;
    if (!next || this.writing || this.t.state === 'done') return;
    this.next = undefined;
    this.write(next.step, next.totalSteps, next.checkpoint);
  }
}
