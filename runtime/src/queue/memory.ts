import { Code, DiffmeshError, cancelled, invalidParameter } from '../errors/index.js';
import type { EnqueueOptions, TaskQueue } from './types.js';

/** Options of {@link MemoryTaskQueue}. */
export interface MemoryTaskQueueOptions {
  /** Name used in messages, e.g. the pool. */
  name?: string;
  /** Most items held; must be a positive integer. */
  maxLength: number;
  /**
   * `retryAfterMs` suggested on `QUEUE_FULL` until the queue has seen items leave; after
   * that the suggestion follows the observed drain rate. Default 1000.
   */
  retryAfterMs?: number;
  /** Clock, for tests. Default `Date.now`. */
  now?: () => number;
}

/** Bounds of the drain-rate based `retryAfterMs` estimate. */
const MIN_RETRY_AFTER_MS = 100;
const MAX_RETRY_AFTER_MS = 60_000;

interface Node<T> {
  id: string;
  item: T;
  priority: number;
  seq: number;
  pos: number;
}

interface Waiter<T> {
  resolve(item: T): void;
  reject(err: unknown): void;
}

/**
 * In-memory {@link TaskQueue}: a binary heap ordered by (priority desc, arrival seq asc),
 * with an id index so `remove` is O(log n). Waiting `take` calls are served FIFO; an item
 * enqueued while someone waits goes straight to that waiter.
 */
export class MemoryTaskQueue<T> implements TaskQueue<T> {
  readonly name: string;
  readonly maxLength: number;
  private readonly heap: Node<T>[] = [];
  private readonly byId = new Map<string, Node<T>>();
  private readonly waiters = new Set<Waiter<T>>();
  private readonly fallbackRetryAfterMs: number;
  private readonly now: () => number;
  private seq = 0;
  private closed = false;
  private lastOutAt: number | undefined;
  private outIntervalEwma: number | undefined;

  constructor(opts: MemoryTaskQueueOptions) {
    this.name = opts.name ?? '';
    if (!Number.isInteger(opts.maxLength) || opts.maxLength <= 0) {
      throw new RangeError(`${label(this.name)}: maxLength must be a positive integer, got ${opts.maxLength}`);
    }
    this.maxLength = opts.maxLength;
    this.fallbackRetryAfterMs = opts.retryAfterMs ?? 1000;
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.heap.length;
  }

  enqueue(item: T, opts: EnqueueOptions): void {
    const priority = opts.priority ?? 0;
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      throw invalidParameter('priority', `must be a finite number, got ${String(priority)}`);
    }
    if (typeof opts.id !== 'string' || opts.id === '') throw new TypeError(`${label(this.name)}: id must be a non-empty string`);
    if (this.closed) throw closedError(this.name);
    if (this.byId.has(opts.id)) throw new Error(`${label(this.name)}: "${opts.id}" is already queued`);

    const now = this.now();
    const waiter = this.waiters.values().next();
    if (!waiter.done) {
      // Waiters exist only while the heap is empty, so this keeps priority order.
      this.waiters.delete(waiter.value);
      this.noteOut(now);
      waiter.value.resolve(item);
      return;
    }
    if (this.heap.length >= this.maxLength && !opts.admitted) {
      const retryAfterMs = this.retryAfterMs(now);
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'QUEUE_FULL',
        `${label(this.name)} is full (${this.maxLength} tasks waiting); retry in ${Math.ceil(retryAfterMs / 1000)}s`,
        { retryAfterMs, metadata: { queue: this.name, max_length: String(this.maxLength) } },
      );
    }
    const node: Node<T> = { id: opts.id, item, priority, seq: this.seq++, pos: this.heap.length };
    this.heap.push(node);
    this.byId.set(node.id, node);
    this.siftUp(node.pos);
  }

  dequeue(): T | undefined {
    return this.pop();
  }

  take(signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortError(signal, this.name));
    if (this.heap.length > 0) return Promise.resolve(this.pop() as T);
    if (this.closed) return Promise.reject(closedError(this.name));
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        this.waiters.delete(waiter);
        reject(abortError(signal as AbortSignal, this.name));
      };
      const waiter: Waiter<T> = {
        resolve: (item) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(item);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      this.waiters.add(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  remove(id: string): T | undefined {
    const node = this.byId.get(id);
    if (!node) return undefined;
    this.removeAt(node.pos);
    return node.item;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w.reject(closedError(this.name));
  }

  private pop(): T | undefined {
    if (this.heap.length === 0) return undefined;
    const top = this.heap[0];
    this.removeAt(0);
    this.noteOut(this.now());
    return top.item;
  }

  /** Tracks how fast items leave, to suggest a useful retry delay when full. */
  private noteOut(now: number): void {
    if (this.lastOutAt !== undefined) {
      const interval = Math.max(0, now - this.lastOutAt);
      this.outIntervalEwma = this.outIntervalEwma === undefined ? interval : 0.8 * this.outIntervalEwma + 0.2 * interval;
    }
    this.lastOutAt = now;
  }

  private retryAfterMs(now: number): number {
    if (this.outIntervalEwma === undefined || this.lastOutAt === undefined) return this.fallbackRetryAfterMs;
    // One slot frees after about one drain interval; a queue that stopped draining waits longer.
    const estimate = Math.max(this.outIntervalEwma, now - this.lastOutAt);
    return Math.min(MAX_RETRY_AFTER_MS, Math.max(MIN_RETRY_AFTER_MS, Math.round(estimate)));
  }

  private removeAt(pos: number): void {
    const heap = this.heap;
    const node = heap[pos];
    this.byId.delete(node.id);
    const last = heap.pop() as Node<T>;
    if (pos === heap.length) return;
    heap[pos] = last;
    last.pos = pos;
    if (pos > 0 && before(last, heap[(pos - 1) >> 1])) this.siftUp(pos);
    else this.siftDown(pos);
  }

  private siftUp(pos: number): void {
    const heap = this.heap;
    const node = heap[pos];
    while (pos > 0) {
      const parentPos = (pos - 1) >> 1;
      const parent = heap[parentPos];
      if (!before(node, parent)) break;
      heap[pos] = parent;
      parent.pos = pos;
      pos = parentPos;
    }
    heap[pos] = node;
    node.pos = pos;
  }

  private siftDown(pos: number): void {
    const heap = this.heap;
    const n = heap.length;
    const node = heap[pos];
    for (;;) {
      const left = 2 * pos + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && before(heap[right], heap[left]) ? right : left;
      if (!before(heap[child], node)) break;
      heap[pos] = heap[child];
      heap[pos].pos = pos;
      pos = child;
    }
    heap[pos] = node;
    node.pos = pos;
  }
}

function before<T>(a: Node<T>, b: Node<T>): boolean {
  return a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq);
}

function label(name: string): string {
  return name === '' ? 'task queue' : `queue ${name}`;
}

function closedError(name: string): DiffmeshError {
  return new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `${label(name)} is closed`);
}

function abortError(signal: AbortSignal, name: string): DiffmeshError {
  const reason: unknown = signal.reason;
  if (reason instanceof DiffmeshError) return reason;
  if (typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'TimeoutError') {
    return new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `timed out waiting on ${label(name)}`, { cause: reason });
  }
  const err = cancelled(`stopped waiting on ${label(name)}`);
  return reason === undefined ? err : new DiffmeshError(err.code, err.reason, err.message, { cause: reason });
}
