/**
 * Preemption's bookkeeping (the choice itself is `preemption.ts`): per pool, the tasks queued
 * here that may take a running task's slot (the waiters), one look for victims at a time, and
 * the timer of a second look when a victim has not run long enough yet. A victim is asked to
 * stop at its next step boundary (`TaskTry.stop('preempted')`).
 */
import { Code, DiffmeshError, type Logger, type RequestContext } from '@diffmesh/core';
import { fitsTask } from './instance-choice.js';
import type { InstanceSlots } from './instances.js';
import { DEFAULT_PREEMPT_MIN_RUN_MS, type SchedulerLimits } from './limits.js';
import { chooseVictim, deadlineAtRisk, type RunningTask } from './preemption.js';
import { current } from './record-edits.js';
import type { RunningTries } from './running-tries.js';
import type { QueueItem, SchedulerStore } from './storage/types.js';
import type { TaskCosts } from './task-cost.js';
import type { TaskTry } from './task-try.js';

export interface PreemptorOptions {
  store: SchedulerStore;
  instances: InstanceSlots;
  tries: RunningTries;
  costs: TaskCosts;
  limits: SchedulerLimits;
  log: Logger;
  /** False once the dispatcher drains or stops: no more looks. */
  active: () => boolean;
}

/** A running try as the victim choice sees it, for one waiting task. */
type Candidate = RunningTask & { t: TaskTry; leftMs?: number };

export class Preemptor {
  /** Per pool, tasks queued here that may preempt a running one (by item id). */
  private readonly waiters = new Map<string, Map<string, QueueItem>>();
  /** The request contexts of waiters with a deadline (their run time estimates), by item id. */
  private readonly contexts = new Map<string, RequestContext>();
  /** Pools with a look in flight. */
  private readonly looking = new Set<string>();
  /** Per pool, a pending second look for a victim (one that has not run long enough yet). */
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(private readonly opts: PreemptorOptions) {}

  private get minRunMs(): number {
    return this.opts.limits.preemptMinRunMs ?? DEFAULT_PREEMPT_MIN_RUN_MS;
  }

  /** A task was queued here: when its pool has no free slot, a less urgent running task may give up its slot. */
  queued(item: QueueItem): void {
    if (this.opts.limits.preemption === false) return;
    let m = this.waiters.get(item.pool);
    if (!m) {
      m = new Map();
      this.waiters.set(item.pool, m);
    }
    m.set(item.id, item);
    this.consider(item.pool);
  }

  /** A task left its queue (it is dispatched here). */
  taken(item: QueueItem): void {
    this.waiters.get(item.pool)?.delete(item.id);
    this.contexts.delete(item.id);
  }

  /** A request ended: its task waits no more. */
  forget(reqId: string): void {
    for (const m of this.waiters.values()) {
      for (const [id, w] of m) {
        if (w.reqId !== reqId) continue;
        m.delete(id);
        this.contexts.delete(id);
      }
    }
  }

  /** A slot of `pool` freed: a waiter may find a victim now (or the freed slot takes it). */
  slotFreed(pool: string): void {
    if (this.waiters.get(pool)?.size) this.consider(pool);
  }

  stop(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /** Looks for victims in `pool` (one look at a time per pool). */
  private consider(pool: string): void {
    if (!this.opts.active() || this.looking.has(pool)) return;
    this.looking.add(pool);
    void this.look(pool)
      .catch((err: unknown) => this.opts.log.warn({ pool, err }, 'preemption: could not look for a victim'))
      .finally(() => this.looking.delete(pool));
  }

  private async look(pool: string): Promise<void> {
    const waiting = this.waiters.get(pool);
    if (!waiting || waiting.size === 0) return;
    // Most urgent first: larger priority, then earlier deadline, then arrival.
    const order = [...waiting.values()].sort(
      (a, b) => b.priority - a.priority || (a.deadline || Infinity) - (b.deadline || Infinity) || a.enqueuedAt - b.enqueuedAt,
    );
    // Tries already stopping for a waiter cover as many waiters (their slots go to the most urgent).
    let covered = this.opts.tries.inPool(pool).filter((t) => t.state === 'stopping' && t.why === 'preempted').length;
    let later = false;
    for (const w of order) {
      // A free slot that fits takes it without preemption.
      if (this.opts.instances.free(pool).some((s) => fitsTask(s, w))) return;
      if (covered > 0) {
        covered -= 1;
        continue;
      }
      const choice = await this.victimFor(pool, w);
      later ||= choice.later;
      if (!choice.victim) continue;
      if (!(await this.stillWaiting(w))) {
        waiting.delete(w.id);
        this.contexts.delete(w.id);
        continue;
      }
      this.preempt(choice.victim.t, w, choice.reason!);
    }
    this.lookAgain(pool, later && waiting.size > 0);
  }

  /** The running try `w` may take the slot of now, if any; `later` when one may qualify soon. */
  private async victimFor(pool: string, w: QueueItem): Promise<{ victim?: Candidate; reason?: string; later: boolean }> {
    const now = Date.now();
    const running = this.opts.tries.inPool(pool).map((t) => this.candidate(t, w));
    const soonest = Math.min(...running.map((r) => r.leftMs ?? Infinity));
    const runMs = w.deadline ? await this.estimateMs(w) : undefined;
    const atRisk = deadlineAtRisk(now, w.deadline ?? 0, runMs, Number.isFinite(soonest) ? soonest : undefined);
    return chooseVictim({ priority: w.priority, deadline: w.deadline ?? 0, atRisk }, running, this.minRunMs);
  }

  /** Still waiting: not taken elsewhere, not ended, not moved on. */
  private async stillWaiting(w: QueueItem): Promise<boolean> {
    const { store } = this.opts;
    const rec = store.peek ? store.peek(w.reqId) : await store.read(w.reqId);
    return rec !== undefined && current(rec, w) && rec.startedBy === undefined;
  }

  private preempt(t: TaskTry, w: QueueItem, reason: string): void {
    if (t.state !== 'running') return;
    const error = new DiffmeshError(Code.CANCELLED, 'PREEMPTED', `preempted for a more urgent task: ${reason}`);
    if (!t.stop('preempted', error, { reason })) return;
    this.opts.log.info(
      {
        reqId: t.lease.item.reqId,
        pool: t.slot.instance.pool,
        instance: t.slot.instance.id,
        for: w.reqId,
        reason,
        step: t.steps?.step,
        totalSteps: t.steps?.total,
      },
      'preempting a task at its next step boundary',
    );
  }

  /** A second look soon, when a try that has not run its minimum yet (or not made a step) may qualify then. */
  private lookAgain(pool: string, wanted: boolean): void {
    clearTimeout(this.timers.get(pool));
    this.timers.delete(pool);
    if (!wanted) return;
    const t = setTimeout(
      () => {
        this.timers.delete(pool);
        this.consider(pool);
      },
      Math.max(20, Math.min(250, this.minRunMs / 4)),
    );
    t.unref();
    this.timers.set(pool, t);
  }

  /** A running try as the victim choice sees it, for waiting task `w`. */
  private candidate(t: TaskTry, w: QueueItem): Candidate {
    const item = t.lease.item;
    const ctx = t.record?.state.context;
    const full = ctx
      ? this.opts.costs.estimateMs(item.pool, item.model, ctx.executionPlan.stages[item.stageIndex].name, ctx.params)
      : undefined;
    const total = t.steps?.total ?? 0;
    const step = t.steps?.step ?? 0;
    const leftMs = full === undefined ? undefined : total > 0 ? (full * (total - step)) / total : full;
    return {
      t,
      priority: item.priority,
      deadline: item.deadline ?? 0,
      step,
      totalSteps: total,
      ranMs: t.state === 'starting' ? 0 : performance.now() - t.startedAt,
      progressed: t.steps !== undefined,
      stopping: t.state !== 'starting' && t.state !== 'running',
      fits: fitsTask(t.slot, w),
      ...(leftMs === undefined ? {} : { leftMs }),
    };
  }

  /** The waiting task's run time at the measured speed (its parameters read once from its record). */
  private async estimateMs(w: QueueItem): Promise<number | undefined> {
    let ctx = this.contexts.get(w.id);
    if (!ctx) {
      const { store } = this.opts;
      ctx = (store.peek ? store.peek(w.reqId) : await store.read(w.reqId))?.state.context;
      if (!ctx) return undefined;
      if (this.waiters.get(w.pool)?.has(w.id)) this.contexts.set(w.id, ctx);
    }
    return this.opts.costs.estimateMs(w.pool, w.model, ctx.executionPlan.stages[w.stageIndex].name, ctx.params);
  }
}
