import { EventEmitter } from 'node:events';
import CircuitBreaker from 'opossum';
import { Code, DiffmeshError, isRetryableCode } from '../errors/errors.js';

/** Breaker tuning; defaults suit a stage instance or a tensor owner. */
export interface BreakerOptions {
  /** Name in logs and metrics, e.g. the instance id. */
  name: string;
  /** Failure percentage (of counted calls in the window) that opens the breaker. */
  errorThresholdPercentage?: number;
  /** Calls in the window before the percentage is considered. */
  volumeThreshold?: number;
  /** Time open before a half-open probe. */
  resetTimeoutMs?: number;
  /** Length of the rolling window. */
  rollingCountTimeoutMs?: number;
  /**
   * Which failures count against the breaker; the others reach the caller without opening
   * it. Default {@link countsForBreaker}.
   */
  counts?: (err: unknown) => boolean;
}

/** True for errors a breaker counts: UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL. */
export function countsForBreaker(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'number' && isRetryableCode(code);
}

/**
 * One bucket-rotation timer per bucket length, shared by every breaker of this process:
 * opossum otherwise starts a timer per breaker (and another for its stats snapshots), so a
 * scheduler with 500 stage instances ran 1,000 timers a second. The timer stops itself once
 * no breaker listens (every breaker of that length was shut down).
 */
const rotations = new Map<number, EventEmitter>();

function rotationFor(bucketMs: number): EventEmitter {
  const existing = rotations.get(bucketMs);
  if (existing) return existing;
  const created = new EventEmitter();
  created.setMaxListeners(0);
  const timer = setInterval(() => {
    if (created.listenerCount('rotate') > 0) {
      created.emit('rotate');
      return;
    }
    clearInterval(timer);
    if (rotations.get(bucketMs) === created) rotations.delete(bucketMs);
  }, bucketMs);
  timer.unref();
  rotations.set(bucketMs, created);
  return created;
}

/** Buckets in a breaker's rolling window (opossum's default). */
const BUCKETS = 10;

/**
 * A circuit breaker (opossum) around an async call. Only failures `opts.counts` accepts
 * count against it (by default the retryable ones) — a caller's bad request never opens it.
 * When open, calls fail at once with UNAVAILABLE / BREAKER_OPEN.
 */
export function createBreaker<A extends unknown[], R>(fn: (...args: A) => Promise<R>, opts: BreakerOptions): CircuitBreaker<A, R> {
  const counts = opts.counts ?? countsForBreaker;
  const rollingCountTimeout = opts.rollingCountTimeoutMs ?? 10_000;
  const breaker = new CircuitBreaker<A, R>(fn, {
    name: opts.name,
    timeout: false,
    errorThresholdPercentage: opts.errorThresholdPercentage ?? 50,
    volumeThreshold: opts.volumeThreshold ?? 3,
    resetTimeout: opts.resetTimeoutMs ?? 5_000,
    rollingCountTimeout,
    rollingCountBuckets: BUCKETS,
    // Only the counts decide the breaker's state. Nothing here reads opossum's latency
    // percentiles or listens to its per-bucket `snapshot` events (each one summed the whole
    // window, per breaker, every bucket), and the buckets rotate on a shared timer.
    rollingPercentilesEnabled: false,
    enableSnapshots: false,
    rotateBucketController: rotationFor(Math.max(1, Math.floor(rollingCountTimeout / BUCKETS))),
    // A filtered error is passed to the caller but not counted as a failure.
    errorFilter: (err: unknown) => !counts(err),
  });
  // opossum calls the fallback for every failure, not only when open (its last argument is
  // the error): answer BREAKER_OPEN only for a call the open breaker refused.
  breaker.fallback((...args: unknown[]) => {
    const err = args.at(-1);
    if ((err as { code?: unknown } | undefined)?.code === 'EOPENBREAKER') {
      throw new DiffmeshError(Code.UNAVAILABLE, 'BREAKER_OPEN', `circuit breaker "${opts.name}" is open`, {
        retryAfterMs: opts.resetTimeoutMs ?? 5_000,
      });
    }
    throw err;
  });
  return breaker;
}

export type { CircuitBreaker };
