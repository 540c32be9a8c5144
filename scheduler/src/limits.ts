/** Limits and policies of a scheduler; every field has a documented default in config.ts. */
export interface SchedulerLimits {
  /** Most tasks waiting in one pool's queue. */
  maxQueueLength: number;
  /** Most requests accepted here and not yet finished. */
  maxInFlight: number;
  /** Tries per stage task before the request fails (1 = no retry). */
  maxAttempts: number;
  /** First retry back-off; doubles per attempt. */
  retryBackoffMs: number;
  /** Request timeout when the request gives none; 0 = none. */
  defaultTimeoutMs: number;
  /** Deadline of one stage dispatch; 0 = none. */
  stageTimeoutMs: number;
  /** How long a finished request stays visible to Get/Watch. */
  retentionMs: number;
  /**
   * Most finished requests kept for Get/Watch; past it the oldest are forgotten before their
   * retention ends (bounds the scheduler's memory under sustained load). Default 10000.
   */
  maxRetained?: number;
  /**
   * How long a queued task waits when its pool has no instance that can run it (none
   * registered, serving its model in its version range, and not draining) before its
   * request fails with UNAVAILABLE / POOL_UNAVAILABLE; an instance that arrives in time
   * takes it. 0 = it waits for the request timeout. Default 10000.
   */
  strandedTimeoutMs?: number;
  /**
   * How long a dispatched task's lease holds without renewal: a scheduler that dies loses
   * its tasks to other schedulers after this long. Default 10000 (shared stores).
   */
  leaseMs?: number;
  /**
   * Step-boundary preemption (see `preemption.ts`): a more urgent task waiting for a pool with
   * no free slot takes the slot of the least urgent running one that has run at least
   * {@link preemptMinRunMs}. Default true.
   */
  preemption?: boolean;
  /** Least time a task runs (in this try) before it may be preempted. Default 1000. */
  preemptMinRunMs?: number;
  /**
   * What a request's deadline does when the pool's measured speed says it cannot be met:
   * `refuse` (DEADLINE_EXCEEDED / DEADLINE_UNREACHABLE at admission; a running request fails
   * as soon as its estimated finish passes its deadline) or `best-effort` (it runs anyway,
   * earliest deadline first within its priority). Default `refuse`.
   */
  deadlinePolicy?: DeadlinePolicy;
}

/** See {@link SchedulerLimits.deadlinePolicy}. */
export const DEADLINE_POLICIES = ['refuse', 'best-effort'] as const;
export type DeadlinePolicy = (typeof DEADLINE_POLICIES)[number];

/** Default of {@link SchedulerLimits.preemptMinRunMs}. */
export const DEFAULT_PREEMPT_MIN_RUN_MS = 1000;

/** Default of {@link SchedulerLimits.maxRetained}. */
export const DEFAULT_MAX_RETAINED = 10_000;

/** Default of {@link SchedulerLimits.strandedTimeoutMs}. */
export const DEFAULT_STRANDED_TIMEOUT_MS = 10_000;

/** Default of {@link SchedulerLimits.leaseMs}. */
export const DEFAULT_LEASE_MS = 10_000;
