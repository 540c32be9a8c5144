/**
 * Tasks stranded in a pool no instance can serve (none registered, serving their model in
 * their version range, and not draining): per pool, a timer that, when it fires, fails those
 * still without one (`strandedTimeoutMs`, UNAVAILABLE / POOL_UNAVAILABLE). An instance that
 * arrives in time starts the wait again.
 */
import { Code, DiffmeshError, type Logger } from '@diffmesh/core';
import type { InstanceSlots } from './instances.js';
import type { SchedulerLimits } from './limits.js';
import { current } from './record-edits.js';
import type { RequestEnding } from './request-end.js';
import type { SchedulerStore } from './storage/types.js';
import type { TaskTransitions } from './task-transitions.js';
import { MAX_TIMEOUT_MS } from './types.js';

/** A pool's queue keys with their version ranges (from the plan registry). */
export type PoolQueues = (pool: string) => ReadonlyArray<{ key: string; range?: string }>;

export interface StrandedTasksOptions {
  store: SchedulerStore;
  instances: InstanceSlots;
  transitions: TaskTransitions;
  ending: RequestEnding;
  limits: SchedulerLimits;
  log: Logger;
  /** This scheduler's id (the owner of its leases). */
  owner: string;
  queuesOf: PoolQueues;
}

export class StrandedTasks {
  /** Per pool, the timer that fails its stranded tasks. */
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly opts: StrandedTasksOptions) {}

  /**
   * Starts the pool's timer when some of its waiting tasks have no instance that can run
   * them: when it fires, those still without one fail.
   */
  watch(pool: string): void {
    const timeoutMs = Math.min(MAX_TIMEOUT_MS, this.opts.limits.strandedTimeoutMs ?? 10_000);
    if (timeoutMs <= 0 || this.timers.has(pool) || this.stopped) return;
    // Claimed at once so that concurrent calls make one timer.
    const placeholder = setTimeout(() => undefined, 0);
    this.timers.set(pool, placeholder);
    void this.kinds(pool)
      .then((kinds) => {
        if (this.timers.get(pool) !== placeholder) return;
        if (kinds.length === 0) {
          this.timers.delete(pool);
          return;
        }
        const timer = setTimeout(() => {
          this.timers.delete(pool);
          void this.fail(pool, timeoutMs).catch((err: unknown) => this.opts.log.warn({ pool, err }, 'could not fail stranded tasks'));
        }, timeoutMs);
        timer.unref();
        this.timers.set(pool, timer);
      })
      .catch(() => {
        if (this.timers.get(pool) === placeholder) this.timers.delete(pool);
      });
  }

  /** Tasks waiting for an instance get another full wait (one arrived). */
  clear(pool: string): void {
    clearTimeout(this.timers.get(pool));
    this.timers.delete(pool);
  }

  stop(): void {
    this.stopped = true;
    for (const pool of [...this.timers.keys()]) this.clear(pool);
  }

  /** Queue keys and models of `pool` with waiting tasks no instance can run. */
  private async kinds(pool: string): Promise<Array<{ queue: string; model: string; range?: string }>> {
    const ranges = new Map(this.opts.queuesOf(pool).map((q) => [q.key, q.range]));
    const kinds = await this.opts.store.queuedKinds(pool);
    return kinds
      .map((k) => ({ queue: k.queue, model: k.model, range: ranges.get(k.queue) ?? rangeOfKey(k.queue) }))
      .filter((k) => !this.opts.instances.runnable(pool, k.model, k.range));
  }

  private async fail(pool: string, timeoutMs: number): Promise<void> {
    const { store, instances, transitions, ending, owner } = this.opts;
    for (const kind of await this.kinds(pool)) {
      for (;;) {
        if (instances.runnable(pool, kind.model, kind.range)) break;
        const lease = await store.lease({ pool, fits: [{ queues: [kind.queue], models: [kind.model] }], owner });
        if (!lease) break;
        const rec = await store.read(lease.item.reqId);
        if (!rec || !current(rec, lease.item)) {
          await transitions.repair(lease);
          continue;
        }
        const stage = rec.state.context.executionPlan.stages[lease.item.stageIndex];
        const error = new DiffmeshError(
          Code.UNAVAILABLE,
          'POOL_UNAVAILABLE',
          `pool "${pool}" (stage ${stage.name}) has had no instance serving model "${kind.model}" for ${timeoutMs} ms`,
          { metadata: { pool, stage: stage.name, model: kind.model }, retryAfterMs: 1000 },
        );
        await ending.end(lease.item.reqId, { type: 'failed', error }, { ack: lease });
      }
    }
  }
}

/** The range of a queue key `pool@range` (none for a plain pool). */
function rangeOfKey(key: string): string | undefined {
  const at = key.indexOf('@');
  return at === -1 ? undefined : key.slice(at + 1);
}
