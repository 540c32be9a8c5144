/**
 * Dispatch: whenever an instance this scheduler holds has a free slot, it leases the best
 * task that instance can run from the pool's queue in the store (the pull model: whichever
 * scheduler dispatches, a task leaves its queue only for a free slot), starts a
 * {@link TaskTry} of it on the instance ({@link TryRunner}), renews the lease while it runs,
 * and stops it when its request ends. Preemption ({@link Preemptor}) and stranded tasks
 * ({@link StrandedTasks}) are its parts; where a task goes is `instance-choice.ts`.
 */
import { Code, DiffmeshError, type Logger } from '@diffmesh/core';
import { AdapterAffinity } from './adapter-affinity.js';
import { deadlineOf, expiredError } from './deadlines.js';
import type { FairShare } from './fair-share.js';
import { chooseInstance } from './instance-choice.js';
import { busy, type InstanceSlot, type InstanceSlots } from './instances.js';
import type { RequestLifecycle } from './lifecycle.js';
import type { SchedulerLimits } from './limits.js';
import { Preemptor } from './preemptor.js';
import { current } from './record-edits.js';
import { RunningTries } from './running-tries.js';
import type { Lease, QueueItem, RecordChange, RequestRecord, SchedulerStore } from './storage/types.js';
import { StrandedTasks, type PoolQueues } from './stranded-tasks.js';
import type { TaskCosts } from './task-cost.js';
import { TaskTry } from './task-try.js';
import type { TenantQuotas } from './tenant-quotas.js';
import type { TransitionCounts } from './transition-counts.js';
import { TryRunner } from './try-runner.js';

export type { PoolQueues } from './stranded-tasks.js';

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
  /** Where the tries' moves are counted. */
  counts: TransitionCounts;
  /**
   * How many of a pool's free slots are filled at once (lease → read → start, each a round
   * trip to a shared store). Default {@link DISPATCH_LANES} on a durable store, 1 on memory
   * (it answers in the caller's turn).
   */
  dispatchLanes?: number;
  /** A task with LoRA adapters went to an instance that held them all (`held`) or not (metrics); must not throw. */
  onAdapterDispatch?: (pool: string, held: boolean) => void;
}

/** Free slots of a pool filled concurrently on a durable store (see {@link DispatcherOptions.dispatchLanes}). */
export const DISPATCH_LANES = 4;

/** Named states of the dispatcher. */
export type DispatcherState = 'RUNNING' | 'DRAINING' | 'STOPPED';

export class Dispatcher {
  private state: DispatcherState = 'RUNNING';
  private readonly tries = new RunningTries();
  /** Which instances hold which LoRA adapters (see {@link AdapterAffinity}). */
  private readonly affinity = new AdapterAffinity();
  /** Pools being filled; `again` when asked to fill once more after the current run. */
  private readonly pumps = new Map<string, 'running' | 'again'>();
  private readonly unsubscribe: Array<() => void> = [];
  private renewTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private readonly preemptor: Preemptor;
  private readonly stranded: StrandedTasks;
  private readonly runner: TryRunner;

  constructor(private readonly opts: DispatcherOptions) {
    const { store, instances, lifecycle, log, limits, costs } = opts;
    this.preemptor = new Preemptor({ store, instances, tries: this.tries, costs, limits, log, active: () => this.state === 'RUNNING' });
    this.stranded = new StrandedTasks({
      store,
      instances,
      transitions: lifecycle.transitions,
      ending: lifecycle.ending,
      limits,
      log,
      owner: opts.owner,
      queuesOf: opts.queuesOf,
    });
    this.runner = new TryRunner({
      transitions: lifecycle.transitions,
      watchers: lifecycle.watchers,
      deadlines: lifecycle.deadlines,
      costs,
      quotas: opts.quotas,
      limits,
      log,
      progressIntervalMs: opts.progressIntervalMs,
      onDone: (t) => this.done(t),
    });
  }

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
    return this.tries.size;
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
      this.stranded.clear(pool);
      this.schedule(pool);
    }
    this.stranded.watch(pool);
  }

  /** A task was queued here: a task no instance can run starts its pool's stranded timer; an urgent one may preempt. */
  enqueued(item: QueueItem): void {
    if (!this.opts.instances.runnable(item.pool, item.model, item.range)) this.stranded.watch(item.pool);
    this.preemptor.queued(item);
  }

  /**
   * Stops taking tasks; waits up to `graceMs` for the running ones, then gives the rest back
   * to their queues (their requests go on elsewhere, or when a scheduler comes back).
   * Answers how many were given back.
   */
  async drain(graceMs: number): Promise<number> {
    if (this.state === 'RUNNING') this.state = 'DRAINING';
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        stopWaiting();
        resolve();
      }, graceMs);
      timer.unref();
      const stopWaiting = this.tries.whenIdle(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return this.handBack();
  }

  /** Gives every running task back to its queue (the instance is told to stop it); answers how many. */
  async handBack(): Promise<number> {
    const all = [...this.tries];
    if (all.length === 0) return 0;
    const done = new Promise<void>((resolve) => this.tries.whenIdle(resolve));
    const error = new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down; the task goes back to its queue');
    for (const t of all) t.stop('handed-back', error);
    await Promise.race([done, new Promise((r) => setTimeout(r, 10_000).unref())]);
    return all.length;
  }

  /** Stops every timer and subscription; running tasks are left to their leases. */
  stop(): void {
    this.state = 'STOPPED';
    for (const u of this.unsubscribe.splice(0)) u();
    clearInterval(this.renewTimer);
    clearInterval(this.pollTimer);
    this.stranded.stop();
    this.preemptor.stop();
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
    const { store, lifecycle } = this.opts;
    const { item } = lease;
    this.preemptor.taken(item);
    // The memory store answers in this turn (dispatch is on every request's path); a shared
    // store hands over the record it wrote with the task when it has it (no read back).
    const rec = lease.record ?? (store.peek ? store.peek(item.reqId) : await store.read(item.reqId));
    if (!rec || !current(rec, item)) return lifecycle.transitions.repair(lease);
    if (await this.late(rec, lease)) return;
    // Adapters: an instance that has the request's adapters, and of those one that holds them
    // loaded first (by its report, or it was sent them before).
    const adapters = rec.state.context.params.adapters?.map((a) => a.name) ?? [];
    const prefer = adapters.length ? (s: InstanceSlot) => this.affinity.score(s.instance, adapters) : undefined;
    const slot = chooseInstance(this.opts.instances.free(item.pool), item, rec.state.context.refs, prefer);
    if (!slot) {
      // The slot went while the lease was taken (a lost instance, a racing pump).
      await store.apply({ release: { lease, delayMs: 0 } });
      return;
    }
    const t = this.hold(lease, slot, rec);
    if (adapters.length) {
      const { held, reported } = this.affinity.holds(slot.instance, adapters);
      t.adapters = { names: adapters, held, reported };
      this.affinity.started(slot.instance.id, adapters);
      this.opts.onAdapterDispatch?.(item.pool, t.adapters.held === adapters.length);
    }
    let started: RequestRecord | undefined;
    try {
      started = await lifecycle.transitions.started(lease, slot.instance.pool, slot.instance.id, rec);
    } catch (err) {
      this.done(t);
      throw err;
    }
    if (!started) {
      this.done(t);
      await lifecycle.transitions.repair(lease);
      return;
    }
    this.runner.run(t, started);
  }

  /** A task whose request is past its deadline, or would end past it at the measured speed, fails now, not late. */
  private async late(rec: RequestRecord, lease: Lease): Promise<boolean> {
    const { lifecycle, store } = this.opts;
    const deadline = deadlineOf(rec);
    if (deadline > 0 && Date.now() >= deadline) {
      await lifecycle.ending.end(lease.item.reqId, { type: 'failed', error: expiredError(rec) }, { ack: lease });
      return true;
    }
    if (!(await lifecycle.deadlines.lateAtStart(rec, lease.item.stageIndex))) return false;
    await store.apply({ ack: lease }).catch(() => undefined);
    return true;
  }

  /** The slot is taken for the task: a try starts (its tenant's share of the pool is used from now on, whatever its fate). */
  private hold(lease: Lease, slot: InstanceSlot, rec: RequestRecord): TaskTry {
    const { item } = lease;
    this.opts.instances.took(slot);
    // An item queued before costs existed is estimated now.
    const ctx = rec.state.context;
    const cost = item.cost ?? this.opts.costs.estimate(item.pool, ctx.model, ctx.executionPlan.stages[item.stageIndex].name, ctx.params);
    this.opts.fairShare?.dispatched(item.pool, item.tenant, cost);
    const t = new TaskTry(lease, slot, cost, this.opts.log, this.opts.counts);
    this.tries.add(t);
    return t;
  }

  /** A try is over (answered and recorded, or never sent): its slot is free. */
  private done(t: TaskTry): void {
    const ran = t.state === 'answered';
    if (!t.transition('done') || !this.tries.delete(t)) return;
    this.opts.instances.done(t.slot);
    if (t.adapters) this.affinity.ended(t.slot.instance.id, t.adapters.names);
    if (!ran) return;
    const pool = t.slot.instance.pool;
    this.schedule(pool);
    // A task that was waiting for a victim may find one now (or the freed slot takes it).
    this.preemptor.slotFreed(pool);
  }

  // ---- leases and ends -------------------------------------------------------------------

  private renewAll(): void {
    for (const t of this.tries) {
      if (t.why === 'lease-lost') continue;
      void this.opts.store.renew(t.lease).then(
        (ok) => {
          // A task whose outcome is being recorded has given its lease up (acknowledged) itself.
          if (ok || t.state === 'answered' || t.state === 'done') return;
          const error = new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'the scheduler lost the task');
          if (!t.stop('lease-lost', error)) return;
          this.opts.log.warn(
            { reqId: t.lease.item.reqId, stageIndex: t.lease.item.stageIndex },
            'lease lost; stopping the task (it runs elsewhere)',
          );
        },
        (err: unknown) => this.opts.log.debug({ err }, 'could not renew a lease'),
      );
    }
  }

  /** A request running here ended (cancelled or failed, here or elsewhere): its task stops. */
  private changed(c: RecordChange): void {
    if (!c.terminal) return;
    this.preemptor.forget(c.reqId);
    // A completed request's last task is the one reporting; anything else stops.
    const status = c.record?.state.context.status;
    if (status === 'completed') return;
    for (const t of this.tries.ofRequest(c.reqId)) {
      const error = c.record?.state.context.error;
      t.stop(
        'request-ended',
        status === 'failed' && error
          ? new DiffmeshError(Code.CANCELLED, 'CANCELLED', `request failed: ${error.message}`)
          : new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'request cancelled'),
      );
    }
  }
}

/** Tasks the slots can still take. */
function freeSlots(free: InstanceSlot[]): number {
  let n = 0;
  for (const s of free) n += s.instance.capacity - busy(s);
  return n;
}
