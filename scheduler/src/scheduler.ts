import { randomUUID } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import semver from 'semver';
import {
  ATTR,
  Code,
  DiffmeshError,
  SPAN,
  SpanKind,
  asDiffmeshError,
  diffmeshTracer,
  extractTraceContext,
  injectTraceContext,
  invalidParameter,
  isRetryableCode,
  Cancellation,
  recordError,
  resolveParams,
  spanLogFields,
  toExecutionPlan,
  type ExecutionPlan,
  type ObjectRef,
  type OtelContext,
  type PlanStage,
  type Span,
  type Logger,
  type PlanRegistry,
  type RequestContext,
  type StageName,
  type StageTask,
  type TaskQueue,
  type TensorStore,
} from '@diffmesh/runtime';
import { EventLog, type EventLogListener } from './event-log.js';
import { WaitingOrder, type WaitingTask } from './waiting.js';
import {
  MAX_REQUEST_ID_CHARS,
  MAX_TIMEOUT_MS,
  TaskRefused,
  type GenerateRequest,
  type RequestEvent,
  type RequestState,
  type StageInstance,
  type StageTiming,
} from './types.js';

/** Limits and policies of a scheduler; every field has a documented default in config.ts. */
export interface SchedulerLimits {
  /** Most tasks waiting in one pool's queue. */
  maxQueueLength: number;
  /** Most requests accepted and not yet finished, across all pools. */
  maxInFlight: number;
  /** Tries per stage task before the request fails (1 = no retry). */
  maxAttempts: number;
  /** First retry back-off; doubles per attempt. */
  retryBackoffMs: number;
  /** Request timeout when the request gives none; 0 = none. */
  defaultTimeoutMs: number;
  /** Deadline of one stage dispatch; 0 = none. */
  stageTimeoutMs: number;
  /** How long a finished request stays visible to Get/Watch. */
  retentionMs: number;
  /**
   * Most finished requests kept for Get/Watch; past it the oldest are forgotten before their
   * retention ends (bounds the scheduler's memory under sustained load). Default 10000.
   */
  maxRetained?: number;
  /**
   * How long a queued task waits when its pool has no instance that can run it (none
   * registered, serving its model in its version range, and not draining) before its
   * request fails with UNAVAILABLE / POOL_UNAVAILABLE; an instance that arrives in time
   * takes it. 0 = it waits for the request timeout. Default 10000.
   */
  strandedTimeoutMs?: number;
}

/** Default of {@link SchedulerLimits.maxRetained}. */
export const DEFAULT_MAX_RETAINED = 10_000;

/** Default of {@link SchedulerLimits.strandedTimeoutMs}. */
export const DEFAULT_STRANDED_TIMEOUT_MS = 10_000;

export interface SchedulerOptions {
  registry: PlanRegistry;
  store: TensorStore;
  log: Logger;
  limits: SchedulerLimits;
  /** Makes the queue for one pool (memory by default; durable backends later). */
  createQueue(pool: string, maxLength: number): TaskQueue<QueuedTask>;
  /** Sees every event of every request (metrics, audit); must not throw. */
  onEvent?: (event: RequestEvent, state: RequestState) => void;
  /** How many of the latest requests {@link Scheduler.recentRequests} keeps (default 50). */
  recentRequests?: number;
}

/** A stage instance of a pool with its load, as {@link Scheduler.pools} reports it. */
export interface InstanceView {
  instance: StageInstance;
  active: number;
  /** Draining: gets no new work, removed once its running tasks finish. */
  retiring: boolean;
  /** Whether it may get work now (not retiring, breaker not open, connection up). */
  available: boolean;
  /** Its circuit breaker; undefined for an instance without one (in-process). */
  breaker?: 'open' | 'half-open' | 'closed';
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

/** Default of {@link SchedulerOptions.recentRequests}. */
export const DEFAULT_RECENT_REQUESTS = 50;

/** A stage task waiting in a pool queue. */
export interface QueuedTask {
  task: StageTask;
  queuedAt: number;
}

interface InstanceSlot {
  instance: StageInstance;
  /** Tasks dispatched on this slot and not yet finished. */
  active: number;
  /**
   * Slots this one replaced (the instance came back under the same id) while they still ran
   * tasks: those tasks run on the same worker, so they count against this slot's capacity.
   */
  replaced: InstanceSlot[];
  /** Dispatch counter value of the last task sent here (spreads ties round-robin). */
  lastUsed: number;
  /** Leaving: gets no new work, removed once its running tasks finish. */
  retiring: boolean;
  /** Stops the instance's availability calls (see {@link StageInstance.onAvailable}). */
  unwatch?: () => void;
}

/** Tasks running on a slot's worker: its own and those of the slots it replaced. */
function busy(slot: InstanceSlot): number {
  let n = slot.active;
  for (const r of slot.replaced) n += r.active;
  return n;
}

/** One queue: a pool, optionally narrowed to instances whose version satisfies a range. */
interface PoolQueue {
  pool: string;
  range: string | undefined;
  queue: TaskQueue<QueuedTask>;
}

interface Running {
  state: RequestState;
  /** The `diffmesh.request` span, ended when the request ends. */
  span: Span;
  /** Context holding {@link span}: the parent of the request's queue-wait and dispatch spans. */
  traceCtx: OtelContext;
  /** The `diffmesh.queue_wait` span while a task of the request waits in a queue. */
  queueSpan?: Span;
  events: EventLog<RequestEvent>;
  /** Cancels the stage dispatch in flight, if any (a request runs one stage at a time). */
  dispatch?: Cancellation;
  timer?: NodeJS.Timeout;
  /** Its task while one waits in a queue. */
  queuedIn?: WaitingTask;
  done: boolean;
}

/**
 * The scheduler owns every request's RequestContext and walks it through its model's
 * ExecutionPlan: one queue per pool (larger priority first, FIFO within a priority), and a
 * task leaves its queue only when an instance of the pool has a free slot. It retries
 * retryable failures with back-off, enforces timeouts, cancels in-flight work, and deletes
 * a request's intermediate objects when it ends.
 */
export class Scheduler {
  private readonly requests = new Map<string, Running>();
  private readonly queues = new Map<string, PoolQueue>();
  /** Per pool, the tasks waiting in its queues in dispatch order. */
  private readonly waiting = new Map<string, WaitingOrder>();
  /** Tasks queued so far (their arrival order across queues). */
  private arrivals = 0;
  /** Per pool, the timer that fails its stranded tasks (see `strandedTimeoutMs`). */
  private readonly stranded = new Map<string, NodeJS.Timeout>();
  private readonly slots = new Map<string, Map<string, InstanceSlot>>();
  /** The latest accepted requests, newest first (bounded; kept past their retention). */
  private readonly recent: RequestState[] = [];
  /** Finished requests in the order they finished, with when; forgotten from the front. */
  private readonly finished: Array<{ run: Running; at: number }> = [];
  private finishedHead = 0;
  private sweeper: NodeJS.Timeout | undefined;
  private inFlight = 0;
  private dispatches = 0;
  private stopped = false;

  constructor(private readonly opts: SchedulerOptions) {}

  // ---- instances -------------------------------------------------------------------------

  /**
   * Makes an instance available for dispatch in its pool. An instance added again under the
   * id of one that still runs tasks (it left discovery and came back) takes its place: the
   * old one gets no new work and is closed once its tasks finish, and those tasks count
   * against the new one's capacity until then.
   */
  addInstance(instance: StageInstance): void {
    const pool = this.poolSlots(instance.pool);
    const old = pool.get(instance.id);
    const replaced = old ? [old, ...old.replaced].filter((r) => r.active > 0) : [];
    const slot: InstanceSlot = { instance, active: 0, replaced, lastUsed: 0, retiring: false };
    // Nothing else dispatches when a breaker lets work through again, and tasks may be
    // waiting for it (dispatched after the breaker has finished changing state).
    slot.unwatch = instance.onAvailable?.(() => queueMicrotask(() => this.pump(instance.pool)));
    pool.set(instance.id, slot);
    if (old) {
      old.unwatch?.();
      old.retiring = true;
      if (old.active === 0) this.release(old);
    }
    // Tasks waiting for an instance get another full wait if this one cannot run them.
    this.clearStranded(instance.pool);
    this.pump(instance.pool);
    this.watchStranded(instance.pool);
  }

  /** Stops dispatching to an instance (tasks running on it fail and are retried). */
  removeInstance(id: string): void {
    for (const pool of this.slots.values()) {
      const slot = pool.get(id);
      if (!slot) continue;
      this.release(slot);
      this.watchStranded(slot.instance.pool);
    }
  }

  /**
   * Graceful removal (the instance is draining): no new work, and it is removed once the
   * tasks it runs have finished. A broken connection still fails them at once.
   */
  retireInstance(id: string): void {
    for (const pool of this.slots.values()) {
      const slot = pool.get(id);
      if (!slot) continue;
      slot.retiring = true;
      if (slot.active === 0) this.release(slot);
      this.watchStranded(slot.instance.pool);
    }
  }

  /**
   * Forgets a slot and closes its instance. A slot that was replaced is no longer in its
   * pool, so this never touches the one that took its place, nor closes an instance that
   * was added again and is still in use.
   */
  private release(slot: InstanceSlot): void {
    const { id, pool } = slot.instance;
    const slots = this.slots.get(pool);
    const current = slots?.get(id);
    slot.unwatch?.();
    if (current === slot) slots?.delete(id);
    else if (current?.instance === slot.instance) return;
    slot.instance.close?.();
  }

  /** Instances of a pool with their current load. */
  instances(pool?: string): Array<{ instance: StageInstance; active: number }> {
    const pools = pool ? [this.slots.get(pool)].filter((p) => p !== undefined) : [...this.slots.values()];
    return pools.flatMap((p) => [...p.values()].map((s) => ({ instance: s.instance, active: busy(s) })));
  }

  /** Queue length per pool (queues pinned to a version range of a pool are added to it). */
  queueSizes(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const q of this.queues.values()) out[q.pool] = (out[q.pool] ?? 0) + q.queue.size;
    return out;
  }

  /**
   * Every pool the scheduler has had an instance, a queue or a request for, sorted by name:
   * its stage, queue depth, and instances (sorted by id) with load, breaker and availability.
   */
  pools(): PoolView[] {
    const sizes = this.queueSizes();
    const names = new Set([...this.slots.keys(), ...Object.keys(sizes)]);
    return [...names].sort().map((pool) => {
      const slots = [...(this.slots.get(pool)?.values() ?? [])].sort((a, b) => (a.instance.id < b.instance.id ? -1 : a.instance.id > b.instance.id ? 1 : 0));
      const stage = slots[0]?.instance.stage ?? this.planStageOf(pool);
      return {
        pool,
        ...(stage ? { stage } : {}),
        queued: sizes[pool] ?? 0,
        instances: slots.map((s) => {
          const breaker = s.instance.breakerState?.();
          return {
            instance: s.instance,
            active: busy(s),
            retiring: s.retiring,
            available: !s.retiring && s.instance.available?.() !== false,
            ...(breaker ? { breaker } : {}),
          };
        }),
      };
    });
  }

  /**
   * The latest accepted requests, newest first: up to `recentRequests` of them, running ones
   * included. The states are live (they change as the requests move on); a request stays
   * here after its retention ends, until newer ones push it out, as a summary (no object
   * refs, prompts cut to 200 characters).
   */
  recentRequests(): RequestState[] {
    return [...this.recent];
  }

  // ---- requests --------------------------------------------------------------------------

  /**
   * Validates and accepts a request, or rejects it at once: unknown model, bad parameter,
   * a pool with no instance (UNAVAILABLE), too many requests or a full queue
   * (RESOURCE_EXHAUSTED). Nothing is half-accepted.
   */
  submit(req: GenerateRequest): RequestState {
    if (req.requestId) checkRequestId(req.requestId);
    if (!this.stopped && req.requestId) {
      const existing = this.requests.get(req.requestId);
      if (existing) return existing.state;
    }
    // One trace per request: the client's span (if it sent a traceparent) is the parent.
    const parent = extractTraceContext(req.traceContext);
    const reqId = req.requestId || randomUUID();
    const span = diffmeshTracer().startSpan(
      SPAN.request,
      {
        kind: SpanKind.SERVER,
        attributes: { [ATTR.requestId]: reqId, [ATTR.model]: req.model, [ATTR.priority]: req.priority ?? 0 },
      },
      parent,
    );
    try {
      return this.accept(req, reqId, span, trace.setSpan(parent, span));
    } catch (err) {
      recordError(span, err);
      span.setAttribute(ATTR.requestStatus, 'rejected');
      span.end();
      throw err;
    }
  }

  private accept(req: GenerateRequest, reqId: string, span: Span, traceCtx: OtelContext): RequestState {
    if (this.stopped) {
      throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down', { retryAfterMs: 1000 });
    }
    const entry = this.opts.registry.lookup(req.model);
    const params = resolveParams(entry, { ...req.params });
    const plan: ExecutionPlan = toExecutionPlan(entry, req.model);
    const timeout = req.timeoutMs ?? 0;
    if (!Number.isInteger(timeout) || timeout < 0 || timeout > MAX_TIMEOUT_MS) {
      throw invalidParameter('timeout_ms', `must be a whole number of milliseconds from 0 to ${MAX_TIMEOUT_MS} (about 24 days), got ${timeout}`);
    }
    for (const stage of plan.stages) {
      const healthy = [...this.poolSlots(stage.pool).values()].filter((s) => !s.retiring && s.instance.available?.() !== false);
      // Only an instance serving the model may run its task (pools are shared by models).
      const serving = healthy.filter((s) => serves(s.instance, req.model));
      if (serving.length === 0) {
        const which = healthy.length === 0 ? '' : ` serving model "${req.model}"`;
        throw new DiffmeshError(
          Code.UNAVAILABLE,
          'POOL_UNAVAILABLE',
          `pool "${stage.pool}" (stage ${stage.name}) has no healthy instance${which}`,
          { metadata: { pool: stage.pool, stage: stage.name, model: req.model }, retryAfterMs: 1000 },
        );
      }
      if (stage.version && !serving.some((s) => versionMatches(s.instance, stage.version))) {
        throw new DiffmeshError(
          Code.UNAVAILABLE,
          'NO_MATCHING_VERSION',
          `pool "${stage.pool}" has no healthy instance with a version in "${stage.version}" ` +
            `(running: ${[...new Set(serving.map((s) => s.instance.version))].join(', ')})`,
          { metadata: { pool: stage.pool, stage: stage.name, version: stage.version }, retryAfterMs: 1000 },
        );
      }
    }
    if (this.inFlight >= this.opts.limits.maxInFlight) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'TOO_MANY_REQUESTS',
        `too many requests in flight (limit ${this.opts.limits.maxInFlight})`,
        { retryAfterMs: 1000 },
      );
    }
    const now = Date.now();
    // (Limits given in-process are not validated like the service's config: keep timers in range.)
    const timeoutMs = Math.min(MAX_TIMEOUT_MS, timeout > 0 ? timeout : this.opts.limits.defaultTimeoutMs);
    const context: RequestContext = {
      reqId,
      model: req.model,
      params,
      executionPlan: plan,
      currentStageIndex: 0,
      refs: {},
      status: 'pending',
      createdAt: now,
      updatedAt: now,
      priority: req.priority ?? 0,
      timeoutMs,
      retryCount: 0,
      // The request span's context: every hop of the request continues from it.
      traceContext: injectTraceContext(traceCtx),
    };
    const run: Running = {
      state: { context, planName: entry.model ?? entry.pattern ?? req.model, step: 0, totalSteps: 0, timings: [], result: {} },
      events: new EventLog<RequestEvent>(),
      done: false,
      span,
      traceCtx,
    };
    // Enqueue first: a full queue throws before anything is recorded.
    this.enqueue(run, 0, 1);
    this.requests.set(reqId, run);
    this.recent.unshift(run.state);
    if (this.recent.length > Math.max(0, this.opts.recentRequests ?? DEFAULT_RECENT_REQUESTS)) this.recent.pop();
    this.inFlight += 1;
    if (timeoutMs > 0) {
      run.timer = setTimeout(() => {
        this.finish(run, {
          type: 'failed',
          error: new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `request timed out after ${timeoutMs} ms`),
        });
      }, timeoutMs);
      run.timer.unref();
    }
    this.pump(plan.stages[0].pool);
    return run.state;
  }

  /** The current state of a request; NOT_FOUND when unknown or expired. */
  get(reqId: string): RequestState {
    return this.running(reqId).state;
  }

  /**
   * Events of a request: everything so far, then live events until the terminal one.
   * Ends when `signal` aborts.
   */
  watch(reqId: string, signal?: AbortSignal): AsyncIterable<RequestEvent> {
    return this.running(reqId).events.subscribe(signal);
  }

  /**
   * Follows a request's events synchronously: everything so far, then live events, then
   * `close` after the terminal one (see {@link EventLog.listen}). Returns the request's live
   * state and a function that stops listening; NOT_FOUND when unknown or expired.
   */
  listen(reqId: string, listener: EventLogListener<RequestEvent>): { state: RequestState; stop(): void } {
    const run = this.running(reqId);
    return { state: run.state, stop: run.events.listen(listener) };
  }

  /** Cancels a request: removes its queued task, aborts its running stage, deletes its objects. */
  cancel(reqId: string): RequestState {
    const run = this.running(reqId);
    this.finish(run, { type: 'cancelled' });
    return run.state;
  }

  /** Requests accepted and not yet finished. */
  inFlightCount(): number {
    return this.inFlight;
  }

  /**
   * Graceful shutdown: stops accepting requests (UNAVAILABLE / DRAINING), lets the accepted
   * ones finish for up to `graceMs`, then cancels the rest.
   */
  async drain(graceMs: number): Promise<void> {
    this.stopped = true;
    const deadline = Date.now() + graceMs;
    while (this.inFlight > 0 && Date.now() < deadline) {
      const pending = [...this.requests.values()].filter((r) => !r.done);
      await Promise.race([
        Promise.all(pending.map((r) => drainEvents(r.events))),
        new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())).unref()),
      ]);
    }
    await this.stop();
  }

  /** Stops accepting requests and cancels what is still running. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const run of this.requests.values()) {
      if (!run.done) this.finish(run, { type: 'cancelled' });
    }
    for (const q of this.queues.values()) q.queue.close();
    for (const pool of [...this.stranded.keys()]) this.clearStranded(pool);
  }

  // ---- internals -------------------------------------------------------------------------

  private running(reqId: string): Running {
    const run = this.requests.get(reqId);
    if (!run) {
      throw new DiffmeshError(Code.NOT_FOUND, 'REQUEST_NOT_FOUND', `request "${reqId}" not found`, {
        metadata: { field: 'req_id' },
      });
    }
    return run;
  }

  private emit(run: Running, event: RequestEvent): void {
    run.events.push(event);
    try {
      this.opts.onEvent?.(event, run.state);
    } catch (err) {
      this.opts.log.warn({ err }, 'event observer failed');
    }
  }

  /** The stage a pool serves according to the plans (for a pool without instances). */
  private planStageOf(pool: string): StageName | undefined {
    for (const entry of this.opts.registry.entries) {
      const stage = entry.stages.find((s) => s.pool === pool);
      if (stage) return stage.name;
    }
    return undefined;
  }

  private poolSlots(pool: string): Map<string, InstanceSlot> {
    let p = this.slots.get(pool);
    if (!p) {
      p = new Map();
      this.slots.set(pool, p);
    }
    return p;
  }

  private waitingIn(pool: string): WaitingOrder {
    let w = this.waiting.get(pool);
    if (!w) {
      w = new WaitingOrder();
      this.waiting.set(pool, w);
    }
    return w;
  }

  private queueFor(stage: PlanStage): { key: string; queue: TaskQueue<QueuedTask> } {
    const key = stage.version ? `${stage.pool}@${stage.version}` : stage.pool;
    let q = this.queues.get(key);
    if (!q) {
      q = { pool: stage.pool, range: stage.version, queue: this.opts.createQueue(key, this.opts.limits.maxQueueLength) };
      this.queues.set(key, q);
    }
    return { key, queue: q.queue };
  }

  private enqueue(run: Running, stageIndex: number, attempt: number): void {
    const ctx = run.state.context;
    const stage = ctx.executionPlan.stages[stageIndex];
    const taskId = `${ctx.reqId}#${stageIndex}`;
    const task: StageTask = {
      reqId: ctx.reqId,
      stageIndex,
      stage: stage.name,
      attempt,
      model: ctx.model,
      params: ctx.params,
      inputs: { ...ctx.refs },
      deadline: ctx.timeoutMs > 0 ? ctx.createdAt + ctx.timeoutMs : 0,
      traceContext: ctx.traceContext,
    };
    const now = Date.now();
    const { key, queue } = this.queueFor(stage);
    // Only admission (stage 0, first try) is bounded; an accepted request always moves on.
    const admitted = stageIndex > 0 || attempt > 1;
    queue.enqueue({ task, queuedAt: now }, { priority: ctx.priority, id: taskId, admitted });
    const waiting: WaitingTask = {
      id: taskId,
      reqId: ctx.reqId,
      queue: key,
      range: stage.version,
      model: ctx.model,
      priority: ctx.priority,
      seq: this.arrivals++,
    };
    this.waitingIn(stage.pool).add(waiting);
    run.queuedIn = waiting;
    if (!this.runnable(stage.pool, waiting)) this.watchStranded(stage.pool);
    run.queueSpan?.end();
    run.queueSpan = diffmeshTracer().startSpan(
      SPAN.queueWait,
      {
        attributes: {
          [ATTR.requestId]: ctx.reqId,
          [ATTR.pool]: stage.pool,
          [ATTR.stage]: stage.name,
          [ATTR.stageIndex]: stageIndex,
          [ATTR.attempt]: attempt,
          [ATTR.queuePosition]: queue.size - 1,
        },
      },
      run.traceCtx,
    );
    ctx.currentStageIndex = stageIndex;
    ctx.updatedAt = now;
    const timing = this.timing(run, stageIndex);
    timing.queuedAt = timing.queuedAt || now;
    this.emit(run, {
      type: 'queued',
      reqId: ctx.reqId,
      stageIndex,
      stage: stage.name,
      pool: stage.pool,
      position: queue.size - 1,
      at: now,
    });
  }

  private timing(run: Running, stageIndex: number): StageTiming {
    const ctx = run.state.context;
    let t = run.state.timings.find((x) => x.stageIndex === stageIndex);
    if (!t) {
      const stage = ctx.executionPlan.stages[stageIndex];
      t = { stageIndex, stage: stage.name, pool: stage.pool, instanceId: '', attempts: 0, queuedAt: 0, startedAt: 0, finishedAt: 0 };
      run.state.timings.push(t);
    }
    return t;
  }

  /**
   * Dispatches waiting tasks of `pool` while it has free slots: each goes, best first
   * (priority, then arrival, across the pool's queues), to a free instance that can run it;
   * a task no free instance can run keeps its place and the next one is tried.
   */
  private pump(pool: string): void {
    const waiting = this.waiting.get(pool);
    if (!waiting) return;
    let free = this.freeSlots(pool);
    for (let i = 0; i < waiting.size && free.length > 0; ) {
      const next = waiting.at(i) as WaitingTask;
      const fit = free.filter((s) => serves(s.instance, next.model) && versionMatches(s.instance, next.range));
      if (fit.length === 0) {
        i += 1;
        continue;
      }
      waiting.removeAt(i);
      const item = this.queues.get(next.queue)?.queue.remove(next.id);
      const run = this.requests.get(next.reqId);
      if (!item || !run || run.done) continue;
      run.queuedIn = undefined;
      endQueueWait(run, 'ok');
      this.dispatch(run, item, this.choose(fit, item.task));
      free = this.freeSlots(pool);
    }
  }

  /** True when an instance of `pool` that is not leaving can run the task (now or later). */
  private runnable(pool: string, task: WaitingTask): boolean {
    for (const s of this.poolSlots(pool).values()) {
      if (!s.retiring && serves(s.instance, task.model) && versionMatches(s.instance, task.range)) return true;
    }
    return false;
  }

  /**
   * Starts the pool's stranded timer when some of its waiting tasks have no instance that can
   * run them: when it fires, those still without one fail (see `strandedTimeoutMs`).
   */
  private watchStranded(pool: string): void {
    const timeoutMs = Math.min(MAX_TIMEOUT_MS, this.opts.limits.strandedTimeoutMs ?? DEFAULT_STRANDED_TIMEOUT_MS);
    if (timeoutMs <= 0 || this.stranded.has(pool) || !this.strandedTasks(pool).length) return;
    const timer = setTimeout(() => {
      this.stranded.delete(pool);
      for (const task of this.strandedTasks(pool)) {
        const run = this.requests.get(task.reqId);
        if (!run || run.done) continue;
        const stage = run.state.context.executionPlan.stages[run.state.context.currentStageIndex];
        this.finish(run, {
          type: 'failed',
          error: new DiffmeshError(
            Code.UNAVAILABLE,
            'POOL_UNAVAILABLE',
            `pool "${pool}" (stage ${stage.name}) has had no instance serving model "${task.model}" for ${timeoutMs} ms`,
            { metadata: { pool, stage: stage.name, model: task.model }, retryAfterMs: 1000 },
          ),
        });
      }
    }, timeoutMs);
    timer.unref();
    this.stranded.set(pool, timer);
  }

  private clearStranded(pool: string): void {
    clearTimeout(this.stranded.get(pool));
    this.stranded.delete(pool);
  }

  /** Waiting tasks of `pool` that no instance of it can run. */
  private strandedTasks(pool: string): WaitingTask[] {
    return (this.waiting.get(pool)?.values() ?? []).filter((t) => !this.runnable(pool, t));
  }

  /** Instances of a pool that may get a task now. */
  private freeSlots(pool: string): InstanceSlot[] {
    return [...this.poolSlots(pool).values()].filter(
      (s) =>
        !s.retiring && busy(s) < s.instance.capacity && s.instance.available?.() !== false && s.instance.probing?.() !== true,
    );
  }

  /**
   * Prefers an instance on the node that owns the task's inputs, then the least loaded,
   * then the one that waited longest since its last task.
   */
  private choose(free: InstanceSlot[], task: StageTask): InstanceSlot {
    const owners = new Set(Object.values(task.inputs).map((r) => r.ownerNodeId));
    return free.reduce((best, s) => {
      const local = owners.has(s.instance.nodeId) ? 1 : 0;
      const bestLocal = owners.has(best.instance.nodeId) ? 1 : 0;
      if (local !== bestLocal) return local > bestLocal ? s : best;
      const load = busy(s) / s.instance.capacity;
      const bestLoad = busy(best) / best.instance.capacity;
      if (load !== bestLoad) return load < bestLoad ? s : best;
      return s.lastUsed < best.lastUsed ? s : best;
    });
  }

  private dispatch(run: Running, item: QueuedTask, slot: InstanceSlot): void {
    const { task } = item;
    const ctx = run.state.context;
    const { instance } = slot;
    slot.active += 1;
    this.dispatches += 1;
    slot.lastUsed = this.dispatches;
    const started = Date.now();
    const timing = this.timing(run, task.stageIndex);
    timing.instanceId = instance.id;
    timing.attempts = task.attempt;
    timing.startedAt = started;
    ctx.status = 'running';
    ctx.updatedAt = started;
    run.state.step = 0;
    run.state.totalSteps = 0;
    this.emit(run, {
      type: 'stage_started',
      reqId: ctx.reqId,
      stageIndex: task.stageIndex,
      stage: task.stage,
      pool: instance.pool,
      instanceId: instance.id,
      attempt: task.attempt,
      at: started,
    });
    const span = diffmeshTracer().startSpan(
      SPAN.dispatch,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR.requestId]: ctx.reqId,
          [ATTR.model]: ctx.model,
          [ATTR.pool]: instance.pool,
          [ATTR.stage]: task.stage,
          [ATTR.stageIndex]: task.stageIndex,
          [ATTR.attempt]: task.attempt,
          [ATTR.instanceId]: instance.id,
          [ATTR.nodeId]: instance.nodeId,
        },
      },
      run.traceCtx,
    );
    // The instance continues the trace from the dispatch span.
    const sent: StageTask = { ...task, traceContext: injectTraceContext(trace.setSpan(run.traceCtx, span)) };
    const cancel = new Cancellation(Math.min(MAX_TIMEOUT_MS, this.opts.limits.stageTimeoutMs));
    run.dispatch = cancel;
    instance
      .execute(sent, {
        cancel,
        onProgress: (p) => {
          if (run.done) return;
          run.state.step = p.step;
          run.state.totalSteps = p.totalSteps;
          this.emit(run, {
            type: 'progress',
            reqId: ctx.reqId,
            stageIndex: task.stageIndex,
            stage: task.stage,
            step: p.step,
            totalSteps: p.totalSteps,
            at: Date.now(),
          });
        },
      })
      .then(
        (result) => {
          span.setAttribute(ATTR.outcome, 'ok');
          span.end();
          this.stageDone(run, item, result.outputs);
        },
        (err: unknown) => {
          const timedOut = cancel.timedOut();
          span.setAttribute(ATTR.outcome, timedOut ? 'timeout' : run.done ? 'cancelled' : 'failed');
          recordError(span, timedOut ? new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `stage ${task.stage} exceeded its deadline`) : err);
          span.end();
          this.stageFailed(run, item, timedOut, err);
        },
      )
      .finally(() => {
        cancel.dispose();
        if (run.dispatch === cancel) run.dispatch = undefined;
        slot.active -= 1;
        if (slot.retiring && slot.active === 0) this.release(slot);
        this.pump(instance.pool);
      });
  }

  private stageDone(run: Running, item: QueuedTask, outputs: Record<string, ObjectRef>): void {
    const { task } = item;
    if (run.done) {
      // Cancelled or timed out while running: drop what the stage produced.
      void this.deleteObjects(task.reqId, Object.values(outputs), true);
      return;
    }
    const ctx = run.state.context;
    const now = Date.now();
    Object.assign(ctx.refs, outputs);
    const timing = this.timing(run, task.stageIndex);
    timing.finishedAt = now;
    this.emit(run, {
      type: 'stage_finished',
      reqId: ctx.reqId,
      stageIndex: task.stageIndex,
      stage: task.stage,
      queueMs: timing.startedAt - timing.queuedAt,
      runMs: now - timing.startedAt,
      outputs,
      at: now,
    });
    const next = task.stageIndex + 1;
    if (next < ctx.executionPlan.stages.length) {
      try {
        this.enqueue(run, next, 1);
      } catch (err) {
        this.finish(run, { type: 'failed', error: asDiffmeshError(err) });
        return;
      }
      this.pump(ctx.executionPlan.stages[next].pool);
      return;
    }
    run.state.result = { ...outputs };
    this.finish(run, { type: 'completed', outputs });
  }

  private stageFailed(run: Running, item: QueuedTask, timedOut: boolean, err: unknown): void {
    if (run.done) {
      // The stage may have stored objects before it stopped.
      void this.deleteObjects(item.task.reqId, [], true);
      return;
    }
    const { task } = item;
    const error = timedOut
      ? new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `stage ${task.stage} exceeded its deadline`)
      : asDiffmeshError(err);
    const ctx = run.state.context;
    // A task the instance refused without running it goes back to its queue as the same try
    // (on the next turn: the refusing instance no longer looks free by then).
    const refused = err instanceof TaskRefused;
    if (refused || (isRetryableCode(error.code) && task.attempt < this.opts.limits.maxAttempts)) {
      const attempt = refused ? task.attempt : task.attempt + 1;
      const delay = refused ? 0 : Math.min(MAX_TIMEOUT_MS, this.opts.limits.retryBackoffMs * 2 ** (task.attempt - 1));
      if (!refused) {
        ctx.retryCount += 1;
        this.opts.log.warn(
          { reqId: ctx.reqId, stage: task.stage, attempt: task.attempt, reason: error.reason, delay, ...spanLogFields(run.span) },
          'stage failed; retrying',
        );
      }
      const t = setTimeout(() => {
        if (run.done) return;
        try {
          this.enqueue(run, task.stageIndex, attempt);
          this.pump(ctx.executionPlan.stages[task.stageIndex].pool);
        } catch (e) {
          this.finish(run, { type: 'failed', error: asDiffmeshError(e) });
        }
      }, delay);
      t.unref();
      return;
    }
    if (!(err instanceof DiffmeshError)) this.opts.log.error({ reqId: ctx.reqId, err, ...spanLogFields(run.span) }, 'stage failed');
    this.finish(run, { type: 'failed', error });
  }

  private finish(
    run: Running,
    outcome: { type: 'completed'; outputs: Record<string, ObjectRef> } | { type: 'failed'; error: DiffmeshError } | { type: 'cancelled' },
  ): void {
    if (run.done) return;
    run.done = true;
    this.inFlight -= 1;
    if (run.timer) clearTimeout(run.timer);
    const ctx = run.state.context;
    const now = Date.now();
    ctx.updatedAt = now;
    if (run.queuedIn) {
      const q = this.queues.get(run.queuedIn.queue);
      q?.queue.remove(run.queuedIn.id);
      this.waiting.get(q?.pool ?? '')?.remove(run.queuedIn);
      run.queuedIn = undefined;
    }
    endQueueWait(run, outcome.type === 'cancelled' ? 'cancelled' : 'failed');
    if (outcome.type !== 'completed') {
      run.dispatch?.cancel(
        outcome.type === 'failed' ? outcome.error : new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'request cancelled'),
      );
    }
    let event: RequestEvent;
    if (outcome.type === 'completed') {
      ctx.status = 'completed';
      event = { type: 'completed', reqId: ctx.reqId, outputs: outcome.outputs, at: now };
    } else if (outcome.type === 'cancelled') {
      ctx.status = 'cancelled';
      event = { type: 'cancelled', reqId: ctx.reqId, at: now };
    } else {
      ctx.status = 'failed';
      const e = outcome.error;
      const error = { code: e.code, reason: e.reason, message: e.message, ...(e.field ? { field: e.field } : {}) };
      ctx.error = { ...error, code: Code[e.code] ?? String(e.code) };
      event = { type: 'failed', reqId: ctx.reqId, error, at: now };
      recordError(run.span, e);
    }
    run.span.setAttributes({ [ATTR.requestStatus]: ctx.status, [ATTR.retryCount]: ctx.retryCount });
    run.span.end();
    // A cancelled or failed request's objects are deleted before the end is announced, so a
    // client that sees the end sees a clean store. A completed one is announced at once; its
    // intermediates go right after, and its outputs stay for the client (their TTL reaps them).
    const keep = new Set(outcome.type === 'completed' ? Object.values(outcome.outputs).map((r) => r.objectId) : []);
    const doomed = Object.values(ctx.refs).filter((r) => !keep.has(r.objectId));
    const announce = (): void => {
      this.emit(run, event);
      run.events.close();
    };
    if (outcome.type === 'completed') {
      announce();
      void this.deleteObjects(ctx.reqId, doomed, false);
    } else {
      void this.deleteObjects(ctx.reqId, doomed, true).then(announce);
    }
    this.finished.push({ run, at: now });
    this.forget(now);
    // One timer for all finished requests (not one each), and only while some are kept.
    this.sweeper ??= setInterval(() => this.forget(Date.now()), Math.min(1000, Math.max(10, this.opts.limits.retentionMs / 2)));
    this.sweeper.unref();
  }

  /** Forgets finished requests past their retention, and the oldest beyond `maxRetained`. */
  private forget(now: number): void {
    const { retentionMs, maxRetained = DEFAULT_MAX_RETAINED } = this.opts.limits;
    const list = this.finished;
    while (this.finishedHead < list.length) {
      const { run, at } = list[this.finishedHead];
      if (now - at < retentionMs && list.length - this.finishedHead <= maxRetained) break;
      list[this.finishedHead] = undefined as never;
      this.finishedHead += 1;
      const reqId = run.state.context.reqId;
      if (this.requests.get(reqId) === run) this.requests.delete(reqId);
      // Past its retention a request may stay in the recent list: without its objects' refs
      // (inline ones carry bytes) and with its prompts cut to what status reports show.
      const i = this.recent.indexOf(run.state);
      if (i !== -1) this.recent[i] = slimmed(run.state);
    }
    // Compact the list once its forgotten front is the larger part.
    if (this.finishedHead > 1024 && this.finishedHead * 2 > list.length) {
      list.splice(0, this.finishedHead);
      this.finishedHead = 0;
    }
    if (this.finishedHead === list.length && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  /**
   * Deletes a request's objects where they live (each ref names its owner). `wholeRequest`
   * also asks the store to drop anything else it holds for the request (objects a stage
   * stored before it was stopped); TTLs reap what no one knows about.
   */
  private async deleteObjects(reqId: string, refs: ObjectRef[], wholeRequest: boolean): Promise<void> {
    const results = await Promise.allSettled([
      ...refs.map((r) => this.opts.store.delete(r)),
      ...(wholeRequest ? [this.opts.store.deleteRequest(reqId)] : []),
    ]);
    const failed = results.filter((r) => r.status === 'rejected');
    if (failed.length > 0) {
      this.opts.log.warn({ reqId, failed: failed.length, err: (failed[0] as PromiseRejectedResult).reason }, 'could not delete some request objects');
    }
  }
}

/** Characters of each prompt a request keeps in the recent list after its retention. */
const RECENT_PROMPT_CHARS = 200;

/** A finished request's state as the recent list keeps it once it is past its retention. */
function slimmed(state: RequestState): RequestState {
  const cut = (s: string): string => [...s].slice(0, RECENT_PROMPT_CHARS).join('');
  const ctx = state.context;
  return {
    ...state,
    context: {
      ...ctx,
      params: { ...ctx.params, prompt: cut(ctx.params.prompt), negativePrompt: cut(ctx.params.negativePrompt) },
      refs: {},
      traceContext: {},
    },
    timings: state.timings.map((t) => ({ ...t })),
    result: {},
  };
}

/** Ends the queue-wait span of a request, if it has one. */
function endQueueWait(run: Running, outcome: 'ok' | 'failed' | 'cancelled'): void {
  if (!run.queueSpan) return;
  run.queueSpan.setAttribute(ATTR.outcome, outcome);
  run.queueSpan.end();
  run.queueSpan = undefined;
}

/**
 * A client's request id must do as the first part of the request's object ids
 * (`{request_id}:{name}:{unique}`): the tensor store refuses an empty one or one with `:`.
 */
function checkRequestId(id: string): void {
  if (id.includes(':') || [...id].length > MAX_REQUEST_ID_CHARS) {
    const shown = id.length > 80 ? `${JSON.stringify(id.slice(0, 80))}… (${id.length} characters)` : JSON.stringify(id);
    throw invalidParameter('request_id', `must be at most ${MAX_REQUEST_ID_CHARS} characters without ":", got ${shown}`);
  }
}

/** True when the instance serves `model` (an instance with no models listed serves any). */
function serves(instance: StageInstance, model: string): boolean {
  return instance.models.length === 0 || instance.models.includes(model);
}

/** True when no range is given or the instance's version satisfies it. */
function versionMatches(instance: StageInstance, range: string | undefined): boolean {
  return !range || semver.satisfies(instance.version, range, { includePrerelease: true });
}

async function drainEvents<T>(log: EventLog<T>): Promise<void> {
  for await (const _ of log.subscribe()) {
    // wait for the log to close
  }
}
