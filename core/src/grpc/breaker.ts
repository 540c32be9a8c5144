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
 * A circuit breaker (opossum) around an async call. Only failures `opts.counts` accepts
 * count against it (by default the retryable ones) — a caller's bad request never opens it.
 * When open, calls fail at once with UNAVAILABLE / BREAKER_OPEN.
 */
export function createBreaker<A extends unknown[], R>(fn: (...args: A) => Promise<R>, opts: BreakerOptions): CircuitBreaker<A, R> {
  const counts = opts.counts ?? countsForBreaker;
  const breaker = new CircuitBreaker<A, R>(fn, {
    name: opts.name,
    timeout: false,
    errorThresholdPercentage: opts.errorThresholdPercentage ?? 50,
    volumeThreshold: opts.volumeThreshold ?? 3,
    resetTimeout: opts.resetTimeoutMs ?? 5_000,
    rollingCountTimeout: opts.rollingCountTimeoutMs ?? 10_000,
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
