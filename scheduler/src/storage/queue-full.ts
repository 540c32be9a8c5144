import { Code, DiffmeshError } from '@diffmesh/core';

/** Bounds of the drain-rate based `retryAfterMs` estimate. */
const MIN_RETRY_AFTER_MS = 100;
const MAX_RETRY_AFTER_MS = 60_000;

/** Retry-After suggested on QUEUE_FULL before a queue has been seen to drain. */
export const DEFAULT_RETRY_AFTER_MS = 1000;

/**
 * How fast items leave each queue (as this process sees them leave), to suggest a useful
 * `retryAfterMs` when a queue is full: one slot frees after about one drain interval.
 */
export class DrainRate {
  private readonly queues = new Map<string, { lastOutAt: number; ewma: number | undefined }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** An item left `queue`. */
  out(queue: string): void {
    const now = this.now();
    const q = this.queues.get(queue);
    if (!q) {
      this.queues.set(queue, { lastOutAt: now, ewma: undefined });
      return;
    }
    const interval = Math.max(0, now - q.lastOutAt);
    q.ewma = q.ewma === undefined ? interval : 0.8 * q.ewma + 0.2 * interval;
    q.lastOutAt = now;
  }

  /** The delay to suggest for `queue`; a queue that stopped draining gets a longer one. */
  retryAfterMs(queue: string): number {
    const q = this.queues.get(queue);
    if (!q || q.ewma === undefined) return DEFAULT_RETRY_AFTER_MS;
    const estimate = Math.max(q.ewma, this.now() - q.lastOutAt);
    return Math.min(MAX_RETRY_AFTER_MS, Math.max(MIN_RETRY_AFTER_MS, Math.round(estimate)));
  }
}

/** `RESOURCE_EXHAUSTED` / `QUEUE_FULL` for a queue holding `maxLength` waiting tasks. */
export function queueFullError(queue: string, maxLength: number, retryAfterMs: number): DiffmeshError {
  return new DiffmeshError(
    Code.RESOURCE_EXHAUSTED,
    'QUEUE_FULL',
    `queue ${queue} is full (${maxLength} tasks waiting); retry in ${Math.ceil(retryAfterMs / 1000)}s`,
    { retryAfterMs, metadata: { queue, max_length: String(maxLength) } },
  );
}

/** `UNAVAILABLE` / `DRAINING` for a store used after `stop()`. */
export function storeStoppedError(backend: string): DiffmeshError {
  return new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `scheduler store (${backend}) is stopped`);
}
