import { randomUUID } from 'node:crypto';
import { Code, DiffmeshError, TenantDirectory, type Logger, type RequestEvent, type StageName, type Tenant } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import { Dispatcher } from './dispatch.js';
import { InstanceSlots, busy, type ForeignInstance } from './instances.js';
import { RequestLifecycle } from './lifecycle.js';
import { notFound } from './request-end.js';
import type { RequestListener } from './request-watchers.js';
import type { PlanRegistry } from './plans/registry.js';
import { RecentRequests } from './retention.js';
import { MemoryStore } from './storage/memory.js';
import { isTerminalStatus, type RecordChange, type SchedulerStore } from './storage/types.js';
import type { GenerateRequest, RequestState, StageInstance } from './types.js';
import { DEFAULT_LEASE_MS, DEFAULT_MAX_RETAINED, type SchedulerLimits } from './limits.js';
import { DEFAULT_TENANT_POLICY, FairShare, type TenantPolicy } from './fair-share.js';
import { TaskCosts } from './task-cost.js';
import { TenantQuotas } from './tenant-quotas.js';
import { TransitionCounts, type TransitionCount } from './transition-counts.js';

export { DEFAULT_LEASE_MS, DEFAULT_MAX_RETAINED, DEFAULT_STRANDED_TIMEOUT_MS } from './limits.js';
export { checkRequestId } from './admission.js';
export type { SchedulerLimits } from './limits.js';

/** Default of {@link SchedulerOptions.recentRequests}. */
export const DEFAULT_RECENT_REQUESTS = 50;

export interface SchedulerOptions {
  registry: PlanRegistry;
  store: TensorStore;
  log: Logger;
  limits: SchedulerLimits;
  /**
   * Where requests and task queues live (see `storage/types.ts`); default an in-process
   * {@link MemoryStore}. A shared store must be started (`Scheduler.start`) before use.
   */
  requests?: SchedulerStore;
  /** This scheduler's id (owner of its leases); default `scheduler-<random>`. */
  id?: string;
  /** Sees every event this scheduler writes (metrics, audit); must not throw. */
  onEvent?: (event: RequestEvent, state: RequestState) => void;
  /** How many of the latest requests {@link Scheduler.recentRequests} keeps (default 50). */
  recentRequests?: number;
  /** Tenants' weights and limits (default: weight 1, no limits). See `fair-share.ts`. */
  tenants?: TenantPolicy;
  /**
   * Weighted fair queuing across tenants within each pool (default true); false = first come,
   * first served within a priority, whoever sent it. Tenant limits apply either way.
   */
  fairShare?: boolean;
  /** Sees every request refused at admission, with its tenant (metrics); must not throw. */
  onRefused?: (tenant: string, error: DiffmeshError) => void;
  /** Sees every task with LoRA adapters sent to an instance that held them all (`held`) or not (metrics); must not throw. */
  onAdapterDispatch?: (pool: string, held: boolean) => void;
}

/** A stage instance of a pool with its load, as {@link Scheduler.pools} reports it. */
export interface InstanceView {
  instance: StageInstance | ForeignInstance;
  active: number;
  /** Draining: gets no new work, removed once its running tasks finish. */
  retiring: boolean;
  /** Whether it may get work now (not retiring, breaker not open, connection up). */
  available: boolean;
  /** Its circuit breaker; undefined for an instance without one (in-process, or held elsewhere). */
  breaker?: 'open' | 'half-open' | 'closed';
  /** Held by another scheduler (its load and breaker are that scheduler's to know). */
  foreign?: boolean;
}

/** A pool as {@link Scheduler.pools} reports it. */
export interface PoolView {
  pool: string;
  /** The stage its instances serve (from the plans when it has none). */
  stage?: StageName;
  /** Tasks waiting (queues pinned to a version range of the pool included). */
  queued: number;
  instances: InstanceView[];
}

/** Named states of a scheduler. */
export type SchedulerPhase = 'INITIALIZED' | 'RUNNING' | 'DRAINING' | 'STOPPED';

/**
 * The scheduler walks every request through its model's ExecutionPlan. It is three parts
 * over one storage port (`storage/`): the {@link InstanceSlots} it dispatches to (capacity,
 * placement), the {@link RequestLifecycle} (admission, transitions, retries, cancellation,
 * timeouts, the end of a request), and the {@link Dispatcher} (free slots lease the best
 * task they can run; leases renewed while tasks run). With a shared store any number of
 * schedulers serve one mesh: each holds the Work streams of some instances and dispatches
 * to those only, and any of them answers for any request.
 */
export class Scheduler {
  readonly id: string;
  readonly requests: SchedulerStore;
  private readonly slots: InstanceSlots;
  private readonly lifecycle: RequestLifecycle;
  private readonly dispatcher: Dispatcher;
  private readonly recent: RecentRequests;
  private readonly quotas: TenantQuotas;
  private readonly counts = new TransitionCounts();
  private readonly queues = new Map<string, Array<{ key: string; range?: string }>>();
  private phase: SchedulerPhase = 'INITIALIZED';
  private starting: Promise<void> | undefined;

  constructor(private readonly opts: SchedulerOptions) {
    this.id = opts.id ?? `scheduler-${randomUUID().slice(0, 8)}`;
    const limits = { leaseMs: DEFAULT_LEASE_MS, ...opts.limits };
    this.requests =
      opts.requests ??
      new MemoryStore({
        retentionMs: limits.retentionMs,
        maxRetained: limits.maxRetained ?? DEFAULT_MAX_RETAINED,
        leaseMs: limits.leaseMs,
      });
    for (const entry of opts.registry.entries) {
      for (const s of entry.stages) {
        const key = s.version ? `${s.pool}@${s.version}` : s.pool;
        const list = this.queues.get(s.pool) ?? [];
        if (!list.some((q) => q.key === key)) list.push({ key, ...(s.version ? { range: s.version } : {}) });
        this.queues.set(s.pool, list);
      }
    }
    this.recent = new RecentRequests(Math.max(0, opts.recentRequests ?? DEFAULT_RECENT_REQUESTS));
    this.slots = new InstanceSlots((pool, how) => this.dispatcher.instancesChanged(pool, how));
    const tenants = opts.tenants ?? DEFAULT_TENANT_POLICY;
    const costs = new TaskCosts();
    this.quotas = new TenantQuotas(tenants);
    this.lifecycle = new RequestLifecycle({
      costs,
      quotas: this.quotas,
      ...(opts.onRefused ? { onRefused: opts.onRefused } : {}),
      store: this.requests,
      registry: opts.registry,
      tensors: opts.store,
      log: opts.log,
      limits,
      instances: this.slots,
      recent: this.recent,
      counts: this.counts,
      ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
      onEnqueued: (item) => this.dispatcher.enqueued(item),
    });
    const durable = this.requests.durable;
    this.dispatcher = new Dispatcher({
      store: this.requests,
      instances: this.slots,
      lifecycle: this.lifecycle,
      log: opts.log,
      limits,
      owner: this.id,
      queuesOf: (pool) => this.queues.get(pool) ?? [{ key: pool }],
      progressIntervalMs: durable ? 250 : 0,
      pollMs: durable ? 1000 : 0,
      costs,
      quotas: this.quotas,
      counts: this.counts,
      ...(opts.fairShare === false ? {} : { fairShare: new FairShare(tenants) }),
      ...(opts.onAdapterDispatch ? { onAdapterDispatch: opts.onAdapterDispatch } : {}),
    });
    // An in-process store needs no start: the scheduler works at once.
    if (!durable) this.run();
  }

  /** The plan registry, tensor store and logger the scheduler runs with. */
  get registry(): PlanRegistry {
    return this.opts.registry;
  }
  get store(): TensorStore {
    return this.opts.store;
  }
  get log(): Logger {
    return this.opts.log;
  }

  /** Starts the store (connects, creates what it needs); a memory store needs no call. Idempotent. */
  start(): Promise<void> {
    this.starting ??= (async () => {
      if (this.phase !== 'INITIALIZED') return;
      await this.requests.start();
      this.run();
    })();
    return this.starting;
  }

  private run(): void {
    if (this.phase !== 'INITIALIZED') return;
    this.phase = 'RUNNING';
    this.lifecycle.start();
    this.dispatcher.start();
  }

  /** `INITIALIZED` until started, `RUNNING`, `DRAINING`, `STOPPED`. */
  get state(): SchedulerPhase {
    return this.phase;
  }

  // ---- instances -------------------------------------------------------------------------

  /**
   * Makes an instance available for dispatch in its pool. An instance added again under the
   * id of one that still runs tasks (it left discovery and came back) takes its place: the
   * old one gets no new work and is closed once its tasks finish, and those tasks count
   * against the new one's capacity until then.
   */
  addInstance(instance: StageInstance): void {
    this.slots.add(instance);
  }

  /** Stops dispatching to an instance (tasks running on it fail and are retried). */
  removeInstance(id: string): void {
    this.slots.remove(id);
  }

  /**
   * Graceful removal (the instance is draining): no new work, and it is removed once the
   * tasks it runs have finished. A broken connection still fails them at once.
   */
  retireInstance(id: string): void {
    this.slots.retire(id);
  }

  /** An instance another scheduler dispatches to: its pool counts as served here. */
  addForeignInstance(instance: ForeignInstance): void {
    this.slots.addForeign(instance);
  }

  removeForeignInstance(id: string): void {
    this.slots.removeForeign(id);
  }

  /**
   * Instances of a pool that serve it, here or held by another scheduler (what model
   * availability looks at: a pool whose instances another scheduler holds is served).
   */
  servingInstances(pool?: string): Array<{ instance: Pick<StageInstance, 'version' | 'models' | 'available'> }> {
    const pools = pool ? [pool] : this.slots.pools();
    return pools.flatMap((p) => [
      ...this.slots.of(p).map((s) => ({ instance: s.instance })),
      ...this.slots.foreignOf(p).map((f) => ({ instance: f })),
    ]);
  }

  /** Instances of a pool this scheduler dispatches to, with their current load. */
  instances(pool?: string): Array<{ instance: StageInstance; active: number }> {
    const pools = pool ? [pool] : this.slots.pools();
    return pools.flatMap((p) => this.slots.of(p).map((s) => ({ instance: s.instance, active: busy(s) })));
  }

  /** Tasks waiting per pool (queues pinned to a version range of a pool are added to it). */
  queueSizes(): Promise<Record<string, number>> {
    return this.requests.queueSizes();
  }

  /**
   * Every pool the scheduler has had an instance, a queue or a request for, sorted by name:
   * its stage, queue depth, and instances (sorted by id) with load, breaker and availability.
   */
  async pools(): Promise<PoolView[]> {
    const sizes = await this.queueSizes();
    const names = new Set([...this.slots.pools(), ...Object.keys(sizes)]);
    const byId = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    return [...names].sort().map((pool) => {
      const slots = this.slots.of(pool);
      const foreign = this.slots.foreignOf(pool);
      const views: InstanceView[] = [
        ...slots.map((s) => {
          const breaker = s.instance.breakerState?.();
          return {
            instance: s.instance,
            active: busy(s),
            retiring: s.retiring,
            available: !s.retiring && s.instance.available?.() !== false,
            ...(breaker ? { breaker } : {}),
          };
        }),
        ...foreign.map((f) => ({ instance: f, active: 0, retiring: false, available: true, foreign: true })),
      ].sort((a, b) => byId(a.instance, b.instance));
      const stage = slots[0]?.instance.stage ?? foreign[0]?.stage ?? this.planStageOf(pool);
      return { pool, ...(stage ? { stage } : {}), queued: sizes[pool] ?? 0, instances: views };
    });
  }

  /**
   * The latest requests accepted here, newest first: up to `recentRequests` of them, running
   * ones included. A request stays here after its retention ends, until newer ones push it
   * out, as a summary (no object refs, prompts cut to 200 characters). With `scope`, only
   * the requests that tenant may see.
   */
  recentRequests(scope?: Tenant): RequestState[] {
    const states = this.recent.states();
    return scope && !scope.admin ? states.filter((s) => TenantDirectory.mayAccess(scope, s.context.tenant)) : states;
  }

  // ---- requests --------------------------------------------------------------------------

  /**
   * Validates and accepts a request, or rejects it at once: unknown model, bad parameter,
   * a pool with no instance (UNAVAILABLE), too many requests or a full queue
   * (RESOURCE_EXHAUSTED). Nothing is half-accepted. A client `requestId` seen before
   * returns that request.
   */
  async submit(req: GenerateRequest): Promise<RequestState> {
    return (await this.admit(req)).state;
  }

  /** {@link submit}, saying whether the request is new (`created`) or was seen before. */
  async admit(req: GenerateRequest): Promise<{ state: RequestState; created: boolean }> {
    if (this.phase === 'INITIALIZED') await this.start();
    return this.lifecycle.admission.submit(req);
  }

  /**
   * The current state of a request; NOT_FOUND when unknown or expired, or when `scope` (the
   * caller's tenant) may not see it: another tenant's request is answered exactly as an
   * unknown one.
   */
  async get(reqId: string, scope?: Tenant): Promise<RequestState> {
    if (this.phase === 'INITIALIZED') await this.start();
    const state = (await this.lifecycle.record(reqId)).state;
    if (scope && !TenantDirectory.mayAccess(scope, state.context.tenant)) throw notFound(reqId);
    return state;
  }

  /**
   * Follows a request's events after sequence `after` (0 = from the first): everything so
   * far, then live events, then `close` after the terminal one; each with the request's
   * latest state. Resolves with a function that stops listening; NOT_FOUND when unknown or
   * expired, or not `scope`'s (see {@link get}).
   */
  async listen(
    reqId: string,
    after: number,
    listener: { item(event: RequestEvent, sequence: number, state: RequestState): void; close(): void },
    scope?: Tenant,
  ): Promise<() => void> {
    if (scope) await this.get(reqId, scope);
    else if (this.phase === 'INITIALIZED') await this.start();
    const l: RequestListener = { item: (e, seq, rec) => listener.item(e, seq, rec.state), close: () => listener.close() };
    return this.lifecycle.watchers.listen(reqId, after, l);
  }

  /**
   * Events of a request: everything so far, then live events until the terminal one.
   * Ends when `signal` aborts. NOT_FOUND (on the first read) when unknown.
   */
  async *watch(reqId: string, signal?: AbortSignal, scope?: Tenant): AsyncGenerator<RequestEvent> {
    const queue: RequestEvent[] = [];
    let closed = false;
    let wake: (() => void) | undefined;
    const stop = await this.listen(
      reqId,
      0,
      {
        item: (e) => {
          queue.push(e);
          wake?.();
        },
        close: () => {
          closed = true;
          wake?.();
        },
      },
      scope,
    );
    const onAbort = (): void => wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      for (;;) {
        while (queue.length > 0) yield queue.shift() as RequestEvent;
        if (closed || signal?.aborted) return;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      stop();
    }
  }

  /**
   * Cancels a request: removes its queued task, aborts its running stage, deletes its
   * objects. NOT_FOUND when `scope` may not see it (see {@link get}).
   */
  async cancel(reqId: string, scope?: Tenant): Promise<RequestState> {
    if (scope) await this.get(reqId, scope);
    else if (this.phase === 'INITIALIZED') await this.start();
    return this.lifecycle.ending.cancel(reqId);
  }

  /** Requests accepted here and not yet finished. */
  inFlightCount(): number {
    return this.lifecycle.local.count;
  }

  /** What a tenant uses now as this scheduler sees it: cost of its tasks running here, and of its accepted work waiting. */
  tenantUsage(tenant: string): { running: number; queued: number } {
    return this.quotas.usage(tenant);
  }

  /**
   * How often each move of a task (`TaskState`, the README's lifecycle table) and of a try on
   * this scheduler (`TryState`) was made here (`diffmesh_scheduler_transitions_total`).
   */
  transitionCounts(): TransitionCount[] {
    return this.counts.all();
  }

  /** Tasks this scheduler is running on its instances. */
  runningTasks(): number {
    return this.dispatcher.running;
  }

  /** Calls `listener` after every change of any request (see {@link SchedulerStore.onChange}). */
  onChange(listener: (change: RecordChange) => void): () => void {
    return this.requests.onChange(listener);
  }

  /**
   * Graceful shutdown: stops accepting requests (UNAVAILABLE / DRAINING). With a shared or
   * durable store, the tasks running here get up to `graceMs` to finish and the rest go back
   * to their queues (their requests go on with another scheduler, or this one's successor);
   * with the memory store, accepted requests get up to `graceMs` to finish and the rest fail
   * with UNAVAILABLE/DRAINING. Logs `drained` with what it handed back or left unfinished.
   */
  async drain(graceMs: number): Promise<void> {
    if (this.phase === 'STOPPED') return;
    const started = Date.now();
    this.lifecycle.admission.stopIntake();
    if (this.phase === 'RUNNING') this.phase = 'DRAINING';
    let handedBack = 0;
    let unfinished = 0;
    if (this.requests.durable) {
      handedBack = await this.dispatcher.drain(graceMs);
    } else {
      const deadline = Date.now() + graceMs;
      while (this.lifecycle.local.count > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, Math.min(50, Math.max(1, deadline - Date.now()))).unref());
      }
      unfinished = this.lifecycle.local.count;
    }
    await this.stop();
    this.opts.log.info({ graceMs, handedBack, unfinished, ms: Date.now() - started }, 'drained');
  }

  /**
   * Stops accepting requests and stops dispatching. With the memory store, what is still
   * running fails with UNAVAILABLE/DRAINING (nothing else could finish it; the client may
   * send it again); a shared store keeps it for others.
   */
  async stop(): Promise<void> {
    if (this.phase === 'STOPPED') return;
    this.lifecycle.admission.stopIntake();
    if (!this.requests.durable) {
      const store = this.requests as MemoryStore;
      await Promise.all(
        this.lifecycle.local.ids().map(async (reqId) => {
          const rec = store.peek(reqId);
          if (!rec || isTerminalStatus(rec.state.context.status)) return;
          await this.lifecycle.end(reqId, { type: 'failed', error: stoppedError() }).catch(() => undefined);
        }),
      );
    } else {
      await this.dispatcher.handBack();
    }
    this.phase = 'STOPPED';
    this.dispatcher.stop();
    this.lifecycle.stop();
    await this.requests.stop();
  }

  /** The stage a pool serves according to the plans (for a pool without instances). */
  private planStageOf(pool: string): StageName | undefined {
    for (const entry of this.opts.registry.entries) {
      const stage = entry.stages.find((s) => s.pool === pool);
      if (stage) return stage.name;
    }
    return undefined;
  }
}

/** How a request ends that a scheduler with an in-process queue could not finish before it stopped. */
function stoppedError(): DiffmeshError {
  return new DiffmeshError(
    Code.UNAVAILABLE,
    'DRAINING',
    'the scheduler shut down before the request finished (its queue was in its memory); send the request again',
    { retryAfterMs: 1000 },
  );
}
