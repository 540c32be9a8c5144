/**
 * One try of a stage task on this scheduler: leased, sent to an instance, answered. Its state
 * is named and moves only through {@link TaskTry.transition}, which checks the move against
 * the table, logs it (debug) and counts it:
 *
 * ```
 * starting ──→ running ──→ answered ──→ done
 *    │  │         │           ↑
 *    │  │         └→ stopping(why) ──┘ (→ done when it never ran)
 *    │  └──────────────↑
 *    └→ done (stale, or its start failed)
 * ```
 *
 * `stopping(why)`: the scheduler asked the instance to stop the try, for one of the
 * {@link StopWhy} reasons. A later reason replaces an earlier one only when it ranks higher
 * (the order in which `classifyTaskEnd` reads them): `lease-lost` > `handed-back` >
 * `request-ended` > `preempted`.
 */
import { Cancellation, type DiffmeshError, type Logger, type ObjectRef, type StageName } from '@diffmesh/core';
import type { InstanceSlot } from './instances.js';
import type { Lease, RequestRecord } from './storage/types.js';
import type { TrySeen } from './task-end.js';
import type { TransitionCounts } from './transition-counts.js';

/** A try's states (see the module's diagram). */
export type TryState = 'starting' | 'running' | 'stopping' | 'answered' | 'done';

/** Why a try is stopping. */
export type StopWhy = 'preempted' | 'request-ended' | 'handed-back' | 'lease-lost';

/** The moves each state allows. */
const MOVES: Readonly<Record<TryState, readonly TryState[]>> = {
  starting: ['running', 'stopping', 'done'],
  running: ['stopping', 'answered'],
  stopping: ['stopping', 'answered', 'done'],
  answered: ['done'],
  done: [],
};

/** Rank of each reason: a stopping try takes a new reason only of a higher rank. */
const STOP_RANK: Readonly<Record<StopWhy, number>> = { preempted: 1, 'request-ended': 2, 'handed-back': 3, 'lease-lost': 4 };

/** The state names as logged and counted (no string built per move). */
const LABELS: Readonly<Record<StopWhy, string>> = {
  preempted: 'stopping(preempted)',
  'request-ended': 'stopping(request-ended)',
  'handed-back': 'stopping(handed-back)',
  'lease-lost': 'stopping(lease-lost)',
};

/** Where a preempted try was asked to stop, and (once reported) where it stopped. */
export interface Preemption {
  reason: string;
  step?: number;
  totalSteps?: number;
  checkpoint?: Record<string, ObjectRef>;
}

/** The steps a try reported: its first, its last, of `total`. */
export interface TrySteps {
  first: number;
  step: number;
  total: number;
}

export class TaskTry {
  private current: TryState = 'starting';
  private reason: StopWhy | undefined;
  /** Set when it runs: stops it (request ended, lease lost, handed back, stage timeout). */
  cancel?: Cancellation;
  /** Set when it runs: asks the instance to stop at its next step boundary (preemption). */
  readonly preempt = new AbortController();
  /** The request's record as this try last wrote it (a hint for the next write). */
  record?: RequestRecord;
  /** performance.now() when it was sent. */
  startedAt = 0;
  /** Steps reported in this try; none before the first report. */
  steps?: TrySteps;
  /** When stopping for a preemption: why, and where it stopped. */
  preemption?: Preemption;
  /**
   * The task's LoRA adapters; how many of them the instance held when it was chosen, and
   * whether the instance's own report said so (else this scheduler's memory of what it sent).
   */
  adapters?: { names: string[]; held: number; reported: boolean };
  /** Why it stops, when stopping (the error its cancellation carries). */
  private stopError?: DiffmeshError;

  constructor(
    readonly lease: Lease,
    readonly slot: InstanceSlot,
    /** The task's cost (fair share, the tenant's running cost). */
    readonly cost: number,
    private readonly log: Logger,
    private readonly counts: TransitionCounts,
  ) {}

  get state(): TryState {
    return this.current;
  }

  /** Why it stops (while `stopping`, and after it was answered). */
  get why(): StopWhy | undefined {
    return this.reason;
  }

  /** Its request ended or its lease is gone: nothing it reports is written any more. */
  get muted(): boolean {
    return this.reason === 'request-ended' || this.reason === 'lease-lost';
  }

  /**
   * Moves the try to `to` (with `why` for `stopping`) when the table allows it from the
   * current state; false (and nothing changes) otherwise.
   */
  transition(to: TryState, why?: StopWhy): boolean {
    const from = this.current;
    if (!MOVES[from].includes(to)) return false;
    if (to === 'stopping') {
      if (!why || (this.reason && STOP_RANK[why] <= STOP_RANK[this.reason])) return false;
      this.reason = why;
    }
    const fromLabel = from === 'stopping' ? LABELS[this.reason!] : from;
    this.current = to;
    const toLabel = to === 'stopping' ? LABELS[why!] : to;
    this.counts.count('try', fromLabel, toLabel);
    if (this.log.isLevelEnabled('debug'))
      this.log.debug({ reqId: this.lease.item.reqId, stageIndex: this.lease.item.stageIndex, from: fromLabel, to: toLabel }, 'try moved');
    return true;
  }

  /**
   * Asks the instance to stop the try: a preemption at its next step boundary, anything else
   * at once (with `error`). False when the try cannot take that reason now.
   */
  stop(why: StopWhy, error: DiffmeshError, preemption?: Preemption): boolean {
    if (!this.transition('stopping', why)) return false;
    if (why === 'preempted') {
      this.preemption = preemption ?? { reason: error.message };
      this.preempt.abort();
      return true;
    }
    this.stopError = error;
    this.cancel?.cancel(error);
    return true;
  }

  /** Sends it: its cancellation (stopped at once when it was asked to stop before it was sent). */
  running(stageTimeoutMs: number): Cancellation {
    const cancel = new Cancellation(stageTimeoutMs);
    this.cancel = cancel;
    this.startedAt = performance.now();
    if (this.current === 'starting') this.transition('running');
    else if (this.stopError) cancel.cancel(this.stopError);
    return cancel;
  }

  /** A step reported. */
  stepped(step: number, totalSteps: number): void {
    this.steps = { first: this.steps?.first ?? step, step, total: totalSteps };
  }

  /** What the try saw, for `classifyTaskEnd`. */
  seen(stage: StageName): TrySeen {
    const { instance } = this.slot;
    const p = this.reason === 'preempted' ? this.preemption : undefined;
    return {
      stage,
      leaseLost: this.reason === 'lease-lost',
      handedBack: this.reason === 'handed-back',
      requestEnded: this.reason === 'request-ended',
      timedOut: this.cancel?.timedOut() === true,
      instanceGone: () => instance.isGone?.() === true,
      ...(p
        ? {
            preempting: {
              pool: instance.pool,
              instanceId: instance.id,
              reason: p.reason,
              step: p.step ?? this.steps?.step ?? 0,
              totalSteps: p.totalSteps ?? this.steps?.total ?? 0,
              ...(p.checkpoint ? { checkpoint: p.checkpoint } : {}),
            },
          }
        : {}),
    };
  }
}
