/**
 * The task queue seam. The scheduler keeps one queue per worker pool and decides dispatch
 * synchronously (a task leaves its queue only when an instance has a free slot), so the
 * operations are synchronous; only `take` waits. Backends are chosen by configuration
 * through `createTaskQueue`; a durable or shared backend keeps a local view that answers
 * these calls.
 */

/** How an item enters a queue. */
export interface EnqueueOptions {
  /**
   * Unique id of the item within the queue (for tasks: request id and stage index); used by
   * {@link TaskQueue.remove}. Enqueueing an id that is already queued is an error.
   */
  id: string;
  /** Larger runs first; items of equal priority run in arrival order. Default 0. */
  priority?: number;
  /**
   * Enqueue even past `maxLength`. For work already admitted (a request moving on to its
   * next stage, or a retry): the bound applies at admission, so an accepted request is
   * never dropped half-way. Default false.
   */
  admitted?: boolean;
}

/**
 * A bounded priority queue of work items.
 *
 * Order: larger `priority` first, first-in first-out within a priority.
 *
 * Errors (all `DiffmeshError`):
 * - `enqueue` on a full queue → `RESOURCE_EXHAUSTED` / `QUEUE_FULL` with `retryAfterMs`,
 *   and nothing is enqueued;
 * - `enqueue` after `close()` → `UNAVAILABLE` / `DRAINING`;
 * - `enqueue` with a non-finite priority → `INVALID_ARGUMENT` / `INVALID_PARAMETER` (field `priority`);
 * - `take` aborted by its signal → `CANCELLED` / `CANCELLED` (or `DEADLINE_EXCEEDED` /
 *   `TIMEOUT` when the signal's reason is a `TimeoutError`, or the reason itself when it is a
 *   `DiffmeshError`); `take` on a closed, empty queue → `UNAVAILABLE` / `DRAINING`.
 */
export interface TaskQueue<T> {
  /** Name used in messages (usually the pool); `''` when none was given. */
  readonly name: string;
  /** Most items the queue holds; `enqueue` beyond it fails with `QUEUE_FULL`. */
  readonly maxLength: number;
  /** Number of items waiting in the queue. */
  readonly size: number;

  /** Adds an item, or hands it straight to a waiting `take`. Throws when full or closed. */
  enqueue(item: T, opts: EnqueueOptions): void;

  /** Removes and returns the next item, or `undefined` when the queue is empty. */
  dequeue(): T | undefined;

  /**
   * Removes and returns the next item, waiting for one when the queue is empty. Waiting
   * callers are served in the order they called. Rejects when `signal` aborts (the caller
   * then never receives an item) or when the queue is closed while it waits.
   */
  take(signal?: AbortSignal): Promise<T>;

  /** Removes a queued item by id (e.g. its request was cancelled); returns it, or `undefined`. */
  remove(id: string): T | undefined;

  /** True when an item with this id is queued. */
  has(id: string): boolean;

  /**
   * Stops intake: later `enqueue` calls fail and pending `take` calls reject. Items already
   * queued stay available to `dequeue`/`take`/`remove` so they can be drained. Idempotent.
   */
  close(): void;
}
