import { AdapterAffinity } from './adapter-affinity.js';
import { trace } from '@opentelemetry/api';
import {
  ATTR,
  Cancellation,
  Code,
  DiffmeshError,
  SPAN,
  SpanKind,
  asDiffmeshError,
  diffmeshTracer,
  extractTraceContext,
  injectTraceContext,
  recordError,
  type Logger,
  type ObjectRef,
  type RequestContext,
  type StageTask,
} from '@diffmesh/core';
import { busy, type InstanceSlot, type InstanceSlots, serves, versionMatches } from './instances.js';
import { deadlineOf, expiredError, type RequestLifecycle } from './lifecycle.js';
import type { SchedulerLimits } from './limits.js';
import type { Lease, QueueItem, RecordChange, RequestRecord, SchedulerStore } from './storage/types.js';
import { MAX_TIMEOUT_MS } from './types.js';
import { classifyTaskEnd, type TrySeen } from './task-end.js';
import type { FairShare } from './fair-share.js';
import type { TaskCosts } from './task-cost.js';
import type { TenantQuotas } from './tenant-quotas.js';
import { chooseVictim, deadlineAtRisk, type RunningTask } from './preemption.js';
import { DEFAULT_PREEMPT_MIN_RUN_MS } from './limits.js';

/** A pool's queue keys with their version ranges (from the plan registry). */
export type PoolQueues = (pool: string) => ReadonlyArray<{ key: string; range?: string }>;

export interface DispatcherOptions {
  store: SchedulerStore;
  instances: InstanceSlots;
  lifecycle: RequestLifecycle;
  log: Logger;
  limits: SchedulerLimits;
  /** This scheduler's id (the owner of its leases). */
  owner: string;
  queuesOf: PoolQueues;
  /**
   * Least time between two progress writes of one task (the last step is always written).
   * 0 = every step (memory: a write costs nothing).
   */
  progressIntervalMs: number;
  /**
   * How often to look for work without being told (a shared backend may miss telling); 0 =
   * never (memory tells of every item).
   */
  pollMs: number;
  /** Orders each pool's tenants by weighted fair share; none = first come, first served. */
  fairShare?: FairShare;
  /** Told of every task that starts and ends here (tenants' running cost). */
  quotas: TenantQuotas;
  /** Told how long each task ran (measured cost estimates). */
  costs: TaskCosts;
  /**
   * How many of a pool's free slots are filled at once (lease → read → start, each a round
   * trip to a shared store). Default {@link DISPATCH_LANES} on a durable store, 1 on memory
   * (it answers in the caller's turn).
   */
  dispatchLanes?: number;
}

/** Free slots of a pool filled concurrently on a durable store (see {@link DispatcherOptions.dispatchLanes}). */
export const DISPATCH_LANES = 4;

/** A task this scheduler has leased and sent to an instance. */
interface Held {
  lease: Lease;
  slot: InstanceSlot;
  /** The task's cost (fair share, the tenant's running cost). */
  cost: number;
  cancel?: Cancellation;
  /** Its request ended (elsewhere or here): the instance was told to stop. */
  ended: boolean;
  /** The lease was lost (not renewed in time): someone else may run the task now. */
  leaseLost: boolean;
  /** The scheduler is draining and gave the task back. */
  handedBack: boolean;
  /** The instance answered (its outcome is being recorded; the lease may be gone already). */
  answered?: boolean;
  /** Progress writes: the time of the last, and one waiting while another is in flight. */
  progressAt: number;
  progressBusy: boolean;
  progressNext?: { step: number; totalSteps: number; checkpoint?: Record<string, ObjectRef> };
  /** The last step reported (written with the stage's end on shared stores). */
  lastProgress?: { step: number; totalSteps: number };
  /** The request's record as this dispatch last wrote it (a hint for the next write). */
  record?: RequestRecord;
  /** The task's LoRA adapters: how many, and how many the instance held when it was chosen. */
  adapters?: { count: number; held: number };
  /** Preemption: when the try started (performance.now), the step last reported, whether it reported one. */
  startedAt?: number;
  step?: number;
  totalSteps?: number;
  progressed?: boolean;
  /** The first step this try reported (its speed is measured from the second on). */
  firstStep?: number;
  /** A deadline check is in flight. */
  lateCheck?: boolean;
  /** Aborted to preempt the task (see `preemption.ts`). */
  preempt?: AbortController;
  /** Asked to stop for a more urgent task: why, and (once reported) where it stopped. */
  preempting?: { reason: string; step?: number; totalSteps?: number; checkpoint?: Record<string, ObjectRef> };
}

/** Named states of the dispatcher. */
export type DispatcherState = 'RUNNING' | 'DRAINING' | 'STOPPED';

/**
 * Dispatch: whenever an instance this scheduler holds has a free slot, it leases the best
 * task that instance can run from the pool's queue in the store (the pull model: whichever
 * scheduler dispatches, a task leaves its queue only for a free slot), sends it on the
 * instance's stream, renews the lease while it runs, and reports the outcome to the
 * request lifecycle. It also fails tasks stranded in a pool no instance can serve.
 */
export class Dispatcher {
  private state: DispatcherState = 'RUNNING';
  private readonly held = new Set<Held>();
  /** Which instances hold which LoRA adapters (see {@link AdapterAffinity}). */
  private readonly affinity = new AdapterAffinity();
  private readonly byReq = new Map<string, Set<Held>>();
  /** Pools being filled; `again` when asked to fill once more after the current run. */
  private readonly pumps = new Map<string, 'running' | 'again'>();
  /** Per pool, the timer that fails its stranded tasks (see `strandedTimeoutMs`). */
  private readonly stranded = new Map<string, NodeJS.Timeout>();
  private readonly unsubscribe: Array<() => void> = [];
  private renewTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private idle = new Set<() => void>();
  /** Per pool, tasks queued here that may preempt a running one (by item id); see {@link queuedItem}. */
  private readonly waiters = new Map<string, Map<string, QueueItem>>();
  /** Per pool, a pending second look for a victim (one that has not run long enough yet). */
  private readonly preemptTimers = new Map<string, NodeJS.Timeout>();
  private readonly preempting = new Set<string>();
  /** The request contexts of waiters with a deadline (their run time estimates), by item id. */
  private readonly waiterContexts = new Map<string, RequestContext>();

  constructor(private readonly opts: DispatcherOptions) {}

  start(): void {
    const { store } = this.opts;
    this.unsubscribe.push(store.onQueue((pool) => this.schedule(pool)));
    this.unsubscribe.push(store.onChange((c) => this.changed(c)));
    const leaseMs = this.opts.limits.leaseMs ?? 0;
    // Every store leases with an expiry (the memory store too), so every store is renewed: a task
    // that runs longer than one lease is not handed out a second time while it runs.
    if (leaseMs > 0) {
      this.renewTimer = setInterval(() => this.renewAll(), Math.max(50, Math.floor(leaseMs / 3)));
      this.renewTimer.unref();
    }
    if (this.opts.pollMs > 0) {
      this.pollTimer = setInterval(() => {
        for (const pool of this.opts.instances.pools()) if (this.opts.instances.free(pool).length > 0) this.schedule(pool);
      }, this.opts.pollMs);
      this.pollTimer.unref();
    }
  }

  get phase(): DispatcherState {
    return this.state;
  }

  /** Tasks leased and running here. */
  get running(): number {
    return this.held.size;
  }

  /** Looks for work in `pool` soon (never in the caller's turn: stores call this inside their changes). */
  schedule(pool: string): void {
    if (this.state !== 'RUNNING') return;
    const p = this.pumps.get(pool);
    if (p) {
      this.pumps.set(pool, 'again');
      return;
    }
    this.pumps.set(pool, 'running');
    queueMicrotask(() => void this.pump(pool));
  }

  /** The instances of `pool` changed. */
  instancesChanged(pool: string, how: 'added' | 'removed'): void {
    if (how === 'added') {
      // Tasks waiting for an instance get another full wait if this one cannot run them.
      this.clearStranded(pool);
      this.schedule(pool);
    }
    this.watchStranded(pool);
  }

  /** A task was queued here: a task no instance can run starts its pool's stranded timer. */
  enqueued(pool: string, model: string, range: string | undefined): void {
    if (!this.opts.instances.runnable(pool, model, range)) this.watchStranded(pool);
  }

  /**
   * Stops taking tasks; waits up to `graceMs` for the running ones, then gives the rest back
   * to their queues (their requests go on elsewhere, or when a scheduler comes back).
   * Answers how many were given back.
   */
  async drain(graceMs: number): Promise<number> {
    if (this.state === 'RUNNING') this.state = 'DRAINING';
    if (this.held.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, graceMs);
        timer.unref();
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.idle.add(done);
      });
    }
    return this.handBack();
  }

  /** Gives every running task back to its queue (the instance is told to stop it); answers how many. */
  async handBack(): Promise<number> {
    const all = [...this.held];
    if (all.length === 0) return 0;
    const done = new Promise<void>((resolve) => this.idle.add(resolve));
    for (const h of all) {
      h.handedBack = true;
      h.cancel?.cancel(new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down; the task goes back to its queue'));
    }
    await Promise.race([done, new Promise((r) => setTimeout(r, 10_000).unref())]);
    return all.length;
  }

  /** Stops every timer and subscription; running tasks are left to their leases. */
  stop(): void {
    this.state = 'STOPPED';
    for (const u of this.unsubscribe.splice(0)) u();
    clearInterval(this.renewTimer);
    clearInterval(this.pollTimer);
    for (const pool of [...this.stranded.keys()]) this.clearStranded(pool);
    for (const t of this.preemptTimers.values()) clearTimeout(t);
    this.preemptTimers.clear();
  }

  // ---- filling free slots ----------------------------------------------------------------

  private async pump(pool: string): Promise<void> {
    try {
      for (;;) {
        await this.fill(pool);
        if (this.pumps.get(pool) !== 'again' || this.state !== 'RUNNING') break;
        this.pumps.set(pool, 'running');
      }
    } catch (err) {
      this.opts.log.warn({ pool, err }, 'dispatch: could not take work from the queue; trying again shortly');
      // Not unref'd: the tasks waiting in this pool are work in flight.
      setTimeout(() => this.schedule(pool), 500);
    } finally {
      this.pumps.delete(pool);
    }
  }

  /**
   * Leases tasks for the pool's free slots until there is no free slot or no task. On a
   * durable store, once a pass finds a second task waiting (a backlog), up to
   * `dispatchLanes` leases are in flight at once (each lane leases a task and starts it,
   * then the next), never more than the pool has free slots; a lone task costs the same
   * two lease calls as before.
   */
  private async fill(pool: string): Promise<void> {
    const lanes = Math.max(1, Math.floor(this.opts.dispatchLanes ?? (this.opts.store.durable ? DISPATCH_LANES : 1)));
    // Leases in flight: each will take one of the free slots.
    let claiming = 0;
    const running: Array<Promise<void>> = [];
    let failed: { err: unknown } | undefined;
    const lane = async (): Promise<void> => {
      const { instances, store } = this.opts;
      let taken = 0;
      while (this.state === 'RUNNING' && !failed) {
        const free = instances.free(pool);
        if (freeSlots(free) <= claiming) return;
        const fits = instances.fits(free, this.opts.queuesOf(pool));
        if (fits.length === 0) return;
        const tenants = this.opts.fairShare?.order(pool);
        claiming += 1;
        try {
          const lease = await store.lease({ pool, fits, owner: this.opts.owner, ...(tenants?.length ? { tenants } : {}) });
          if (!lease) return;
          // A second task in a row: more wait, so the other lanes start.
          if (++taken === 2 && lanes > 1) while (running.length < lanes) spawn();
          await this.take(lease);
        } finally {
          claiming -= 1;
        }
      }
    };
    // The memory store answers in the caller's turn: one lane, no extra turns.
    if (lanes === 1) return lane();
    const spawn = (): void => {
      running.push(
        lane().catch((err: unknown) => {
          failed ??= { err };
        }),
      );
    };
    spawn();
    for (let i = 0; i < running.length; i++) await running[i];
    if (failed) throw failed.err;
  }

  /** Sends a leased task to a free instance that can run it, or deals with it. */
  private async take(lease: Lease): Promise<void> {
    const { store, instances, lifecycle } = this.opts;
    const { item } = lease;
    this.waiters.get(item.pool)?.delete(item.id);
    this.waiterContexts.delete(item.id);
    // The memory store answers in this turn (dispatch is on every request's path); a shared
    // store hands over the record it wrote with the task when it has it (no read back).
    const rec = lease.record ?? (store.peek ? store.peek(item.reqId) : await store.read(item.reqId));
    if (!rec || !isCurrent(rec, lease)) {
      await lifecycle.repair(lease);
      return;
    }
    const deadline = deadlineOf(rec);
    if (deadline > 0 && Date.now() >= deadline) {
      await lifecycle.end(item.reqId, { type: 'failed', error: expiredError(rec) }, { ack: lease });
      return;
    }
    // A task that would end past its request's deadline (at the measured speed) fails now, not late.
    const left = this.estimateLeftMs(rec, item.stageIndex, 0, 0);
    if (rec.state.context.deadline && left && (await lifecycle.failIfLate(item.reqId, rec.state.context.deadline, left.ms, left.how))) {
      await store.apply({ ack: lease }).catch(() => undefined);
      return;
    }
    const fit = instances.free(item.pool).filter((s) => serves(s.instance, item.model) && versionMatches(s.instance, item.range));
    if (fit.length === 0) {
      // The slot went while the lease was taken (a lost instance, a racing pump).
      await store.apply({ release: { lease, delayMs: 0 } });
      return;
    }
    // Adapters: an instance that holds the request's adapters first (it was sent them before).
    const adapters = rec.state.context.params.adapters?.map((a) => a.name) ?? [];
    const slot = instances.choose(fit, rec.state.context.refs, adapters.length ? (id) => this.affinity.holds(id, adapters) : undefined);
    const adaptersHeld = adapters.length ? this.affinity.holds(slot.instance.id, adapters) : undefined;
    this.affinity.sent(slot.instance.id, adapters);
    instances.took(slot);
    // An item queued before costs existed is estimated now.
    const ctx = rec.state.context;
    const cost = item.cost ?? this.opts.costs.estimate(item.pool, ctx.model, ctx.executionPlan.stages[item.stageIndex].name, ctx.params);
    // Its tenant's share of the pool is used from now on, whatever the task's fate.
    this.opts.fairShare?.dispatched(item.pool, item.tenant, cost);
    const held: Held = {
      lease,
      slot,
      cost,
      ended: false,
      leaseLost: false,
      handedBack: false,
      progressAt: 0,
      progressBusy: false,
      ...(adaptersHeld !== undefined ? { adapters: { count: adapters.length, held: adaptersHeld } } : {}),
    };
    this.hold(held);
    let started: RequestRecord | undefined;
    try {
      started = await lifecycle.started(lease, slot.instance.pool, slot.instance.id, rec);
    } catch (err) {
      this.release(held);
      throw err;
    }
    if (!started) {
      this.release(held);
      await lifecycle.repair(lease);
      return;
    }
    this.run(held, started);
  }

  private run(held: Held, rec: RequestRecord): void {
    const { lease, slot } = held;
    const { item } = lease;
    const { instance } = slot;
    const ctx = rec.state.context;
    const stage = ctx.executionPlan.stages[item.stageIndex];
    const parent = extractTraceContext(ctx.traceContext);
    const timing = rec.state.timings.find((t) => t.stageIndex === item.stageIndex);
    // The queue wait, as one span from when the task was queued (perhaps by another scheduler).
    diffmeshTracer()
      .startSpan(
        SPAN.queueWait,
        {
          startTime: timing?.queuedAt || item.enqueuedAt,
          attributes: {
            [ATTR.requestId]: ctx.reqId,
            [ATTR.pool]: stage.pool,
            [ATTR.stage]: stage.name,
            [ATTR.stageIndex]: item.stageIndex,
            [ATTR.attempt]: rec.attempt,
            [ATTR.outcome]: 'ok',
          },
        },
        parent,
      )
      .end();
    const span = diffmeshTracer().startSpan(
      SPAN.dispatch,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR.requestId]: ctx.reqId,
          [ATTR.model]: ctx.model,
          [ATTR.pool]: instance.pool,
          [ATTR.stage]: stage.name,
          [ATTR.stageIndex]: item.stageIndex,
          [ATTR.attempt]: rec.attempt,
          [ATTR.instanceId]: instance.id,
          [ATTR.nodeId]: instance.nodeId,
          ...(held.adapters ? { [ATTR.adapters]: held.adapters.count, [ATTR.adaptersHeld]: held.adapters.held } : {}),
        },
      },
      parent,
    );
    const task: StageTask = {
      reqId: ctx.reqId,
      stageIndex: item.stageIndex,
      stage: stage.name,
      attempt: rec.attempt,
      model: ctx.model,
      params: ctx.params,
      // A later try also gets what earlier tries of the stage kept (a checkpoint to resume from).
      inputs: { ...ctx.refs, ...rec.checkpoint },
      deadline: deadlineOf(rec),
      // Its outputs are the request's result: tensor stores may keep them durably.
      ...(item.stageIndex === ctx.executionPlan.stages.length - 1 ? { lastStage: true } : {}),
      // The instance continues the trace from the dispatch span.
      traceContext: injectTraceContext(trace.setSpan(parent, span)),
      ...(ctx.tenant ? { tenant: ctx.tenant } : {}),
    };
    const cancel = new Cancellation(Math.min(MAX_TIMEOUT_MS, this.opts.limits.stageTimeoutMs));
    held.cancel = cancel;
    held.preempt = new AbortController();
    held.startedAt = performance.now();
    // A try that resumed from a checkpoint runs part of the stage: its time is no sample of the whole.
    const resumed = rec.checkpoint !== undefined && Object.keys(rec.checkpoint).length > 0;
    held.record = rec;
    const { cost } = held;
    this.opts.quotas.taskStarted(item.tenant, cost);
    const startedAt = performance.now();
    // The request may have ended while the task was being started.
    if (held.ended) cancel.cancel(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'request ended'));
    // How the try ended is decided in one place (`classifyTaskEnd`), from the answer and what this dispatch saw.
    const seen = (): TrySeen => ({
      stage: stage.name,
      leaseLost: held.leaseLost,
      handedBack: held.handedBack,
      requestEnded: held.ended,
      timedOut: cancel.timedOut(),
      instanceGone: () => instance.isGone?.() === true,
      ...(held.preempting
        ? {
            preempting: {
              pool: instance.pool,
              instanceId: instance.id,
              reason: held.preempting.reason,
              step: held.preempting.step ?? held.step ?? 0,
              totalSteps: held.preempting.totalSteps ?? held.totalSteps ?? 0,
              ...(held.preempting.checkpoint ? { checkpoint: held.preempting.checkpoint } : {}),
            },
          }
        : {}),
    });
    instance
      .execute(task, {
        cancel,
        preempt: held.preempt.signal,
        onProgress: (p) => {
          // Previews go to live watchers at once (never stored, so never throttled).
          for (const v of p.previews ?? [])
            if (!held.ended && !held.leaseLost) this.opts.lifecycle.preview(lease, stage.name, p.totalSteps, v);
          if (!held.progressed) held.firstStep = p.step;
          held.step = p.step;
          held.totalSteps = p.totalSteps;
          held.progressed = true;
          if (ctx.deadline && !held.ended) this.checkLate(held, rec, ctx.deadline);
          // Where a preempted task stopped rides with its requeue (one write, nothing lost).
          if (p.preempted && held.preempting)
            held.preempting = {
              ...held.preempting,
              step: p.step,
              totalSteps: p.totalSteps,
              ...(p.checkpoint ? { checkpoint: p.checkpoint } : {}),
            };
          else this.progress(held, p.step, p.totalSteps, p.checkpoint);
        },
      })
      .then(
        async (result) => {
          held.answered = true;
          span.setAttribute(ATTR.outcome, 'ok');
          span.end();
          if (!resumed) this.opts.costs.observe(item.pool, ctx.model, stage.name, ctx.params, performance.now() - startedAt);
          // On a shared store the last step rides with the stage's end (one write less); the
          // memory store has written every step already.
          const last = this.opts.progressIntervalMs > 0 ? held.lastProgress : undefined;
          await this.opts.lifecycle.taskEnded(lease, classifyTaskEnd({ result }, seen()), {
            ...(held.record && !held.progressBusy ? { hint: held.record } : {}),
            ...(last ? { lastProgress: last } : {}),
          });
        },
        async (err: unknown) => {
          held.answered = true;
          const end = classifyTaskEnd({ rejected: err }, seen());
          const timedOut = cancel.timedOut();
          if (end.kind === 'preempted') {
            span.setAttribute(ATTR.outcome, 'preempted');
            span.addEvent('diffmesh.preempted', {
              'diffmesh.preempt.reason': end.at.reason,
              [ATTR.step]: end.at.step,
              [ATTR.stepCount]: end.at.totalSteps,
            });
            span.end();
            await this.opts.lifecycle.taskEnded(lease, end);
            this.opts.log.info(
              { reqId: item.reqId, pool: item.pool, step: end.at.step, reason: end.at.reason },
              'preempted task queued again',
            );
            return;
          }
          span.setAttribute(ATTR.outcome, timedOut ? 'timeout' : held.ended ? 'cancelled' : 'failed');
          recordError(span, 'error' in end ? end.error : asDiffmeshError(err));
          span.end();
          await this.opts.lifecycle.taskEnded(lease, end);
        },
      )
      .catch((err: unknown) => this.opts.log.warn({ reqId: ctx.reqId, stage: stage.name, err }, 'could not record the outcome of a task'))
      .finally(() => {
        cancel.dispose();
        this.opts.quotas.taskEnded(item.tenant, cost);
        this.release(held);
        this.schedule(instance.pool);
        // A task that was waiting for a victim may find one now (or the freed slot takes it).
        if (this.waiters.get(instance.pool)?.size) this.considerPreemption(instance.pool);
      });
  }

  /** Persists a task's progress (throttled on shared backends: every write is a round trip). */
  private progress(held: Held, step: number, totalSteps: number, checkpoint?: Record<string, ObjectRef>): void {
    if (held.ended || held.leaseLost) return;
    const interval = this.opts.progressIntervalMs;
    if (interval === 0) {
      // Every step (the memory store writes in the caller's turn, in order).
      void this.opts.lifecycle
        .progress(held.lease, step, totalSteps, checkpoint ? { checkpoint } : {})
        .catch((err: unknown) => this.opts.log.debug({ err }, 'could not record progress'));
      return;
    }
    held.lastProgress = { step, totalSteps };
    // A checkpoint waiting for its write rides with the next one.
    if (held.progressNext?.checkpoint) checkpoint = { ...held.progressNext.checkpoint, ...checkpoint };
    // The last step is written with the stage's end (a checkpoint is not needed any more then).
    if (step >= totalSteps) {
      held.progressNext = undefined;
      return;
    }
    const now = performance.now();
    if (held.progressBusy || (interval > 0 && !checkpoint && now - held.progressAt < interval)) {
      held.progressNext = { step, totalSteps, ...(checkpoint ? { checkpoint } : {}) };
      if (!held.progressBusy && interval > 0) {
        setTimeout(() => this.flushProgress(held), interval - (now - held.progressAt)).unref();
      }
      return;
    }
    held.progressAt = now;
    held.progressBusy = true;
    void this.opts.lifecycle
      .progress(held.lease, step, totalSteps, { ...(held.record ? { hint: held.record } : {}), ...(checkpoint ? { checkpoint } : {}) })
      .then((rec) => {
        if (rec) held.record = rec;
      })
      .catch((err: unknown) => this.opts.log.debug({ err }, 'could not record progress'))
      .finally(() => {
        held.progressBusy = false;
        this.flushProgress(held);
      });
  }

  private flushProgress(held: Held): void {
    const next = held.progressNext;
    if (!next || held.progressBusy || !this.held.has(held)) return;
    held.progressNext = undefined;
    this.progress(held, next.step, next.totalSteps, next.checkpoint);
  }

  // ---- leases ----------------------------------------------------------------------------

  private hold(h: Held): void {
    this.held.add(h);
    let set = this.byReq.get(h.lease.item.reqId);
    if (!set) {
      set = new Set();
      this.byReq.set(h.lease.item.reqId, set);
    }
    set.add(h);
  }

  private release(h: Held): void {
    if (!this.held.delete(h)) return;
    this.opts.instances.done(h.slot);
    const set = this.byReq.get(h.lease.item.reqId);
    set?.delete(h);
    if (set?.size === 0) this.byReq.delete(h.lease.item.reqId);
    if (this.held.size === 0) {
      for (const done of [...this.idle]) done();
      this.idle.clear();
    }
  }

  private renewAll(): void {
    for (const h of this.held) {
      if (h.leaseLost) continue;
      void this.opts.store.renew(h.lease).then(
        (ok) => {
          // A task whose outcome is being recorded has given its lease up (acknowledged) itself.
          if (ok || h.leaseLost || h.answered || !this.held.has(h)) return;
          h.leaseLost = true;
          this.opts.log.warn(
            { reqId: h.lease.item.reqId, stageIndex: h.lease.item.stageIndex },
            'lease lost; stopping the task (it runs elsewhere)',
          );
          h.cancel?.cancel(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'the scheduler lost the task'));
        },
        (err: unknown) => this.opts.log.debug({ err }, 'could not renew a lease'),
      );
    }
  }

  /** A request running here ended (cancelled or failed, here or elsewhere): its task stops. */
  private changed(c: RecordChange): void {
    if (!c.terminal) return;
    this.forgetWaiter(c.reqId);
    const set = this.byReq.get(c.reqId);
    if (!set) return;
    for (const h of set) {
      if (h.ended) continue;
      // A completed request's last task is the one reporting; anything else stops.
      const status = c.record?.state.context.status;
      if (status === 'completed') continue;
      h.ended = true;
      const error = c.record?.state.context.error;
      h.cancel?.cancel(
        status === 'failed' && error
          ? new DiffmeshError(Code.CANCELLED, 'CANCELLED', `request failed: ${error.message}`)
          : new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'request cancelled'),
      );
    }
  }

  // ---- deadlines ----------------------------------------------------------------------------

  /**
   * The time a request needs from stage `stageIndex` on: that stage's rest (at `msPerStep` for
   * `stepsLeft` steps when measured in this try, else its estimate) and the later stages'
   * estimates; undefined when nothing is measured yet.
   */
  private estimateLeftMs(
    rec: RequestRecord,
    stageIndex: number,
    msPerStep: number,
    stepsLeft: number,
  ): { ms: number; how: string } | undefined {
    const ctx = rec.state.context;
    let ms = 0;
    const parts: string[] = [];
    ctx.executionPlan.stages.forEach((s, i) => {
      if (i < stageIndex) return;
      let est =
        i === stageIndex && msPerStep > 0 ? msPerStep * stepsLeft : this.opts.costs.estimateMs(s.pool, ctx.model, s.name, ctx.params);
      if (est === undefined) return;
      // A try that resumes from a checkpoint (a preempted one) has only the steps after it left.
      const { step, totalSteps } = rec.state;
      if (i === stageIndex && msPerStep === 0 && rec.checkpoint && totalSteps > 0 && step < totalSteps) {
        est = (est * (totalSteps - step)) / totalSteps;
      }
      ms += est;
      parts.push(
        i === stageIndex && msPerStep > 0
          ? `${stepsLeft} ${s.name} steps at ${Math.round(msPerStep)} ms`
          : `${s.name} ${Math.round(est)} ms`,
      );
    });
    return parts.length > 0 ? { ms, how: parts.join(' + ') } : undefined;
  }

  /** Fails a running request early when its measured speed says it ends past its deadline. */
  private checkLate(held: Held, rec: RequestRecord, deadline: number): void {
    const step = held.step ?? 0;
    const first = held.firstStep ?? step;
    const total = held.totalSteps ?? 0;
    if (held.lateCheck || step - first < 1 || step >= total || held.startedAt === undefined) return;
    // The try's first step carries its start-up (loading inputs): its speed is measured after it.
    const msPerStep = (performance.now() - held.startedAt) / (step - first + 1);
    const left = this.estimateLeftMs(rec, held.lease.item.stageIndex, msPerStep, total - step);
    if (!left) return;
    held.lateCheck = true;
    void this.opts.lifecycle
      .failIfLate(held.lease.item.reqId, deadline, left.ms, left.how)
      .catch((err: unknown) => this.opts.log.debug({ err }, 'could not check a deadline'))
      .finally(() => {
        held.lateCheck = false;
      });
  }

  // ---- preemption (see preemption.ts) -----------------------------------------------------

  /**
   * A task was queued here: when its pool has no free slot, a running task less urgent than it
   * may give up its slot at its next step boundary.
   */
  queuedItem(item: QueueItem): void {
    if (this.opts.limits.preemption === false) return;
    let m = this.waiters.get(item.pool);
    if (!m) {
      m = new Map();
      this.waiters.set(item.pool, m);
    }
    m.set(item.id, item);
    this.considerPreemption(item.pool);
  }

  private forgetWaiter(reqId: string): void {
    for (const m of this.waiters.values()) {
      for (const [id, w] of m) {
        if (w.reqId !== reqId) continue;
        m.delete(id);
        this.waiterContexts.delete(id);
      }
    }
  }

  /** Looks for victims in `pool` (one look at a time per pool). */
  private considerPreemption(pool: string): void {
    if (this.state !== 'RUNNING' || this.preempting.has(pool)) return;
    this.preempting.add(pool);
    void this.preemptFor(pool)
      .catch((err: unknown) => this.opts.log.warn({ pool, err }, 'preemption: could not look for a victim'))
      .finally(() => this.preempting.delete(pool));
  }

  private async preemptFor(pool: string): Promise<void> {
    const waiting = this.waiters.get(pool);
    if (!waiting || waiting.size === 0) return;
    const { instances, store } = this.opts;
    const minRunMs = this.opts.limits.preemptMinRunMs ?? DEFAULT_PREEMPT_MIN_RUN_MS;
    // Most urgent first: larger priority, then earlier deadline, then arrival.
    const order = [...waiting.values()].sort(
      (a, b) => b.priority - a.priority || (a.deadline || Infinity) - (b.deadline || Infinity) || a.enqueuedAt - b.enqueuedAt,
    );
    // Tasks already stopping for a waiter cover as many waiters (their slots go to the most urgent).
    let covered = [...this.held].filter((h) => h.slot.instance.pool === pool && h.preempting && !h.answered).length;
    let later = false;
    for (const w of order) {
      // A free slot that fits takes it without preemption.
      if (instances.free(pool).some((s) => serves(s.instance, w.model) && versionMatches(s.instance, w.range))) return;
      if (covered > 0) {
        covered -= 1;
        continue;
      }
      const now = Date.now();
      const running = [...this.held].filter((h) => h.slot.instance.pool === pool).map((h) => this.runningView(h, w));
      const soonest = Math.min(...running.map((r) => r.leftMs ?? Infinity));
      const runMs = w.deadline ? await this.estimateMs(w) : undefined;
      const atRisk = deadlineAtRisk(now, w.deadline ?? 0, runMs, Number.isFinite(soonest) ? soonest : undefined);
      const choice = chooseVictim({ priority: w.priority, deadline: w.deadline ?? 0, atRisk }, running, minRunMs);
      later ||= choice.later;
      if (!choice.victim) continue;
      // Still waiting (not taken elsewhere, not ended)?
      const rec = store.peek ? store.peek(w.reqId) : await store.read(w.reqId);
      const ctx = rec?.state.context;
      if (
        !rec ||
        !ctx ||
        ctx.status === 'completed' ||
        ctx.status === 'failed' ||
        ctx.status === 'cancelled' ||
        ctx.currentStageIndex !== w.stageIndex ||
        rec.gen !== w.gen ||
        rec.startedBy !== undefined
      ) {
        waiting.delete(w.id);
        this.waiterContexts.delete(w.id);
        continue;
      }
      const h = choice.victim.held;
      if (h.preempting || h.answered || !this.held.has(h)) continue;
      h.preempting = { reason: choice.reason! };
      this.opts.log.info(
        {
          reqId: h.lease.item.reqId,
          pool,
          instance: h.slot.instance.id,
          for: w.reqId,
          reason: choice.reason,
          step: h.step,
          totalSteps: h.totalSteps,
        },
        'preempting a task at its next step boundary',
      );
      h.preempt?.abort();
    }
    clearTimeout(this.preemptTimers.get(pool));
    this.preemptTimers.delete(pool);
    if (later && waiting.size > 0) {
      // A task that has not run its minimum yet (or not made a step) may qualify soon.
      const t = setTimeout(
        () => {
          this.preemptTimers.delete(pool);
          this.considerPreemption(pool);
        },
        Math.max(20, Math.min(250, minRunMs / 4)),
      );
      t.unref();
      this.preemptTimers.set(pool, t);
    }
  }

  /** A held task as the victim choice sees it, for waiting task `w`. */
  private runningView(h: Held, w: QueueItem): RunningTask & { held: Held; leftMs?: number } {
    const item = h.lease.item;
    const ctx = h.record?.state.context;
    const full = ctx
      ? this.opts.costs.estimateMs(item.pool, item.model, ctx.executionPlan.stages[item.stageIndex].name, ctx.params)
      : undefined;
    const total = h.totalSteps ?? 0;
    const step = h.step ?? 0;
    const leftMs = full === undefined ? undefined : total > 0 ? (full * (total - step)) / total : full;
    return {
      held: h,
      priority: item.priority,
      deadline: item.deadline ?? 0,
      step,
      totalSteps: total,
      ranMs: performance.now() - (h.startedAt ?? performance.now()),
      progressed: h.progressed === true,
      stopping: h.preempting !== undefined || h.ended || h.handedBack || h.leaseLost || h.answered === true,
      fits: serves(h.slot.instance, w.model) && versionMatches(h.slot.instance, w.range),
      ...(leftMs === undefined ? {} : { leftMs }),
    };
  }

  /** The waiting task's run time at the measured speed (its parameters read once from its record). */
  private async estimateMs(w: QueueItem): Promise<number | undefined> {
    let ctx = this.waiterContexts.get(w.id);
    if (!ctx) {
      const { store } = this.opts;
      ctx = (store.peek ? store.peek(w.reqId) : await store.read(w.reqId))?.state.context;
      if (!ctx) return undefined;
      if (this.waiters.get(w.pool)?.has(w.id)) this.waiterContexts.set(w.id, ctx);
    }
    return this.opts.costs.estimateMs(w.pool, w.model, ctx.executionPlan.stages[w.stageIndex].name, ctx.params);
  }

  /** A preempted task stopped: it goes back to its queue with its checkpoint (not a failed try). */
  // ---- stranded tasks --------------------------------------------------------------------

  /**
   * Starts the pool's stranded timer when some of its waiting tasks have no instance that can
   * run them: when it fires, those still without one fail (see `strandedTimeoutMs`).
   */
  private watchStranded(pool: string): void {
    const timeoutMs = Math.min(MAX_TIMEOUT_MS, this.opts.limits.strandedTimeoutMs ?? 10_000);
    if (timeoutMs <= 0 || this.stranded.has(pool) || this.state === 'STOPPED') return;
    // Claimed at once so that concurrent calls make one timer.
    const placeholder = setTimeout(() => undefined, 0);
    this.stranded.set(pool, placeholder);
    void this.strandedKinds(pool)
      .then((kinds) => {
        if (this.stranded.get(pool) !== placeholder) return;
        if (kinds.length === 0) {
          this.stranded.delete(pool);
          return;
        }
        const timer = setTimeout(() => {
          this.stranded.delete(pool);
          void this.failStranded(pool, timeoutMs).catch((err: unknown) =>
            this.opts.log.warn({ pool, err }, 'could not fail stranded tasks'),
          );
        }, timeoutMs);
        timer.unref();
        this.stranded.set(pool, timer);
      })
      .catch(() => {
        if (this.stranded.get(pool) === placeholder) this.stranded.delete(pool);
      });
  }

  private clearStranded(pool: string): void {
    clearTimeout(this.stranded.get(pool));
    this.stranded.delete(pool);
  }

  /** Queue keys and models of `pool` with waiting tasks no instance can run. */
  private async strandedKinds(pool: string): Promise<Array<{ queue: string; model: string; range?: string }>> {
    const ranges = new Map(this.opts.queuesOf(pool).map((q) => [q.key, q.range]));
    const kinds = await this.opts.store.queuedKinds(pool);
    return kinds
      .map((k) => ({ queue: k.queue, model: k.model, range: ranges.get(k.queue) ?? rangeOfKey(k.queue) }))
      .filter((k) => !this.opts.instances.runnable(pool, k.model, k.range));
  }

  private async failStranded(pool: string, timeoutMs: number): Promise<void> {
    for (const kind of await this.strandedKinds(pool)) {
      for (;;) {
        if (this.opts.instances.runnable(pool, kind.model, kind.range)) break;
        const lease = await this.opts.store.lease({ pool, fits: [{ queues: [kind.queue], models: [kind.model] }], owner: this.opts.owner });
        if (!lease) break;
        const rec = await this.opts.store.read(lease.item.reqId);
        if (!rec || !isCurrent(rec, lease)) {
          await this.opts.lifecycle.repair(lease);
          continue;
        }
        const stage = rec.state.context.executionPlan.stages[lease.item.stageIndex];
        await this.opts.lifecycle.end(
          lease.item.reqId,
          {
            type: 'failed',
            error: new DiffmeshError(
              Code.UNAVAILABLE,
              'POOL_UNAVAILABLE',
              `pool "${pool}" (stage ${stage.name}) has had no instance serving model "${kind.model}" for ${timeoutMs} ms`,
              { metadata: { pool, stage: stage.name, model: kind.model }, retryAfterMs: 1000 },
            ),
          },
          { ack: lease },
        );
      }
    }
  }
}

/** True when a task asked to stop for a preemption stopped for it (not a failure of the task). */
/** True when the leased task is the request's current one and the request has not ended. */
function isCurrent(rec: RequestRecord, lease: Lease): boolean {
  const ctx = rec.state.context;
  const s = ctx.status;
  return (
    s !== 'completed' &&
    s !== 'failed' &&
    s !== 'cancelled' &&
    ctx.currentStageIndex === lease.item.stageIndex &&
    rec.gen === lease.item.gen
  );
}

/** The range of a queue key `pool@range` (none for a plain pool). */
function rangeOfKey(key: string): string | undefined {
  const at = key.indexOf('@');
  return at === -1 ? undefined : key.slice(at + 1);
}

/** Tasks the slots can still take. */
function freeSlots(free: InstanceSlot[]): number {
  let n = 0;
  for (const s of free) n += s.instance.capacity - busy(s);
  return n;
}
