import { randomUUID } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import {
  ATTR,
  Code,
  DEFAULT_TENANT,
  DiffmeshError,
  SPAN,
  SpanKind,
  asDiffmeshError,
  diffmeshTracer,
  extractTraceContext,
  injectTraceContext,
  invalidParameter,
  recordError,
  type ExecutionPlan,
  type Logger,
  type ObjectRef,
  type OtelContext,
  type RequestContext,
  type RequestEvent,
  type Span,
  type StageName,
  type StageResult,
  type StagePreview,
} from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import { type InstanceSlots, serves, versionMatches } from './instances.js';
import { resolveParams } from './plans/params.js';
import type { PlanRegistry } from './plans/registry.js';
import { INPUT_IMAGE, requestPlan } from './request-plan.js';
import type { RecentRequests } from './retention.js';
import type { PreemptedAt, TaskEnd } from './task-end.js';
import {
  isTerminalStatus,
  itemId,
  type Lease,
  type QueueEffects,
  type QueueItem,
  type RecordChange,
  type RequestRecord,
  type SchedulerStore,
} from './storage/types.js';
import { MAX_REQUEST_ID_CHARS, MAX_TIMEOUT_MS, type GenerateRequest, type RequestState, type StageTiming } from './types.js';
import type { SchedulerLimits } from './limits.js';
import type { TaskCosts } from './task-cost.js';
import type { TenantQuotas } from './tenant-quotas.js';

/** Follows a request's events: `item` for each (with the record it came from), then `close` after the last. */
export interface RequestListener {
  item(event: RequestEvent, sequence: number, record: RequestRecord): void;
  close(): void;
}

/** What the dispatcher adds to a try's end: the record it last wrote, and the last step it left for the end's write. */
export interface TaskEndOptions {
  /** The request's record as the dispatch last wrote it (a hint for the write). */
  hint?: RequestRecord;
  /** The last step, when the dispatcher left it for this write (shared stores). */
  lastProgress?: { step: number; totalSteps: number };
}

/** How a request ends. */
export type Outcome = { type: 'failed'; error: DiffmeshError } | { type: 'cancelled' };

/** Default bound on stage re-runs of one request caused by lost inputs. */
const MAX_RERUNS_PER_STAGE = 2;

/** How long a task may wait for its request's record before it is dropped (JetStream admits the task first). */
const ORPHAN_GRACE_MS = 30_000;

/** How long the probe of one input may take before the input counts as lost. */
const INPUT_PROBE_MS = 3000;

/** Tries of one stage lost with their instance or scheduler (not failures of the task) before the request fails. */
const MAX_LOST_TRIES = 10;

export interface LifecycleOptions {
  store: SchedulerStore;
  registry: PlanRegistry;
  tensors: TensorStore;
  log: Logger;
  limits: SchedulerLimits;
  instances: InstanceSlots;
  recent: RecentRequests;
  /** Sees every event this scheduler writes (metrics, audit); must not throw. */
  onEvent?: (event: RequestEvent, state: RequestState) => void;
  /** A task was queued by this scheduler (stranded-task checks). */
  onEnqueued?: (item: QueueItem) => void;
  /** A request was refused at admission (metrics); must not throw. */
  onRefused?: (tenant: string, error: DiffmeshError) => void;
  /** Task cost estimates (fair share and quotas). */
  costs: TaskCosts;
  /** Tenant limits at admission. */
  quotas: TenantQuotas;
}

/** A request this scheduler accepted: its span and timeout live here. */
interface Local {
  span: Span;
  timer?: NodeJS.Timeout;
}

interface Watcher {
  listener: RequestListener;
  /** Events delivered so far (the next one has this sequence + 1). */
  delivered: number;
  /** A read is in flight; `again` asks for another after it. */
  reading: boolean;
  again: boolean;
  closed: boolean;
  /** The record of the last delivery (previews are delivered with it). */
  record?: RequestRecord;
}

/** A preview event (ephemeral: never part of a record's events). */
type PreviewEvent = Extract<RequestEvent, { type: 'preview' }>;

/** Latest previews kept for watchers that attach mid-run, at most (the oldest go first). */
const MAX_KEPT_PREVIEWS = 256;

/**
 * A request's lifecycle over the storage port: admission, the transitions a dispatch
 * reports (started, finished, failed), retries, re-runs of stages whose outputs were lost,
 * cancellation, timeouts, and the end (objects deleted, events announced). Every change is
 * a compare-and-set on the request's record, so any scheduler sharing the store may make it,
 * and a transition that lost a race (a stage finished twice, a cancel during completion)
 * sees the winner's record and does nothing.
 */
export class RequestLifecycle {
  private readonly local = new Map<string, Local>();
  private readonly watchers = new Map<string, Set<Watcher>>();
  /** The latest preview of each running request whose task this scheduler dispatched (see {@link preview}). */
  private readonly previews = new Map<string, PreviewEvent>();
  private inFlight = 0;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly opts: LifecycleOptions) {}

  start(): void {
    this.unsubscribe ??= this.opts.store.onChange((c) => this.changed(c));
  }

  /** Requests accepted here and not yet ended. */
  inFlightCount(): number {
    return this.inFlight;
  }

  /** Ids of the requests accepted here and not yet ended. */
  localRequests(): string[] {
    return [...this.local.keys()];
  }

  /** Stops accepting requests (UNAVAILABLE / DRAINING). */
  stopIntake(): void {
    this.stopped = true;
  }

  /** Stops following the store; ends the spans and timers of local requests. */
  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const [reqId, l] of this.local) {
      clearTimeout(l.timer);
      l.span.end();
      this.local.delete(reqId);
    }
    this.inFlight = 0;
  }

  // ---- admission -------------------------------------------------------------------------

  /**
   * Validates and accepts a request, or rejects it at once: unknown model, bad parameter,
   * a pool with no instance (UNAVAILABLE), too many requests or a full queue
   * (RESOURCE_EXHAUSTED). Nothing is half-accepted. A client id seen before returns that
   * request (`created: false`).
   */
  async submit(req: GenerateRequest): Promise<{ state: RequestState; created: boolean }> {
    // A path to a served model directory runs under the directory's model id.
    const model = typeof req.model === 'string' ? this.opts.registry.canonicalModel(req.model) : req.model;
    if (model !== req.model) req = { ...req, model };
    if (req.requestId) checkRequestId(req.requestId);
    if (!this.stopped && req.requestId) {
      const existing = await this.opts.store.read(req.requestId);
      if (existing) return { state: ownExisting(existing.state, req), created: false };
    }
    // One trace per request: the client's span (if it sent a traceparent) is the parent.
    const parent = extractTraceContext(req.traceContext);
    const reqId = req.requestId || randomUUID();
    const span = diffmeshTracer().startSpan(
      SPAN.request,
      {
        kind: SpanKind.SERVER,
        attributes: {
          [ATTR.requestId]: reqId,
          [ATTR.tenant]: req.tenant ?? DEFAULT_TENANT,
          [ATTR.model]: req.model,
          [ATTR.priority]: req.priority ?? 0,
        },
      },
      parent,
    );
    try {
      const { record, created } = await this.accept(req, reqId, span, trace.setSpan(parent, span));
      if (!created) {
        ownExisting(record.state, req);
        span.setAttribute(ATTR.requestStatus, 'existing');
        span.end();
      }
      return { state: record.state, created };
    } catch (err) {
      recordError(span, err);
      span.setAttribute(ATTR.requestStatus, 'rejected');
      span.end();
      try {
        this.opts.onRefused?.(req.tenant || DEFAULT_TENANT, asDiffmeshError(err));
      } catch (e) {
        this.opts.log.warn({ err: e }, 'refusal observer failed');
      }
      throw err;
    }
  }

  private async accept(
    req: GenerateRequest,
    reqId: string,
    span: Span,
    traceCtx: OtelContext,
  ): Promise<{ record: RequestRecord; created: boolean }> {
    if (this.stopped) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down', { retryAfterMs: 1000 });
    const { registry, limits, instances } = this.opts;
    const entry = registry.lookup(req.model);
    const inputs = req.inputs ?? {};
    // Stages that need an input the request lacks (an image) are left out of its plan.
    const plan: ExecutionPlan = requestPlan(entry, req.model, Object.keys(inputs));
    const params = resolveParams(entry, { ...req.params }, { inputImage: INPUT_IMAGE in inputs });
    const timeout = req.timeoutMs ?? 0;
    if (!Number.isInteger(timeout) || timeout < 0 || timeout > MAX_TIMEOUT_MS) {
      throw invalidParameter(
        'timeout_ms',
        `must be a whole number of milliseconds from 0 to ${MAX_TIMEOUT_MS} (about 24 days), got ${timeout}`,
      );
    }
    const deadline = checkDeadline(req.deadline);
    for (const stage of plan.stages) {
      const healthy = instances.healthy(stage.pool);
      // Only an instance serving the model may run its task (pools are shared by models).
      const serving = healthy.filter((s) => serves(s, req.model));
      if (serving.length === 0) {
        const which = healthy.length === 0 ? '' : ` serving model "${req.model}"`;
        throw new DiffmeshError(
          Code.UNAVAILABLE,
          'POOL_UNAVAILABLE',
          `pool "${stage.pool}" (stage ${stage.name}) has no healthy instance${which}`,
          {
            metadata: { pool: stage.pool, stage: stage.name, model: req.model },
            retryAfterMs: 1000,
          },
        );
      }
      if (stage.version && !serving.some((s) => versionMatches(s, stage.version))) {
        throw new DiffmeshError(
          Code.UNAVAILABLE,
          'NO_MATCHING_VERSION',
          `pool "${stage.pool}" has no healthy instance with a version in "${stage.version}" ` +
            `(running: ${[...new Set(serving.map((s) => s.version))].join(', ')})`,
          { metadata: { pool: stage.pool, stage: stage.name, version: stage.version }, retryAfterMs: 1000 },
        );
      }
    }
    if (this.inFlight >= limits.maxInFlight) {
      throw new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'TOO_MANY_REQUESTS', `too many requests in flight (limit ${limits.maxInFlight})`, {
        retryAfterMs: 1000,
      });
    }
    if (deadline) this.deadlineReachable(deadline, req.model, plan, params);
    const tenant = req.tenant || DEFAULT_TENANT;
    // Counted at once, like in-flight requests: a burst cannot pass a tenant's limits together.
    this.opts.quotas.admit(
      reqId,
      tenant,
      plan.stages.map((s) => this.opts.costs.estimate(s.pool, req.model, s.name, params)),
    );
    const now = Date.now();
    // (Limits given in-process are not validated like the service's config: keep timers in range.)
    const timeoutMs = Math.min(MAX_TIMEOUT_MS, timeout > 0 ? timeout : limits.defaultTimeoutMs);
    const context: RequestContext = {
      reqId,
      model: req.model,
      params,
      executionPlan: plan,
      currentStageIndex: 0,
      refs: { ...inputs },
      status: 'pending',
      createdAt: now,
      updatedAt: now,
      priority: req.priority ?? 0,
      timeoutMs,
      retryCount: 0,
      // The request span's context: every hop of the request continues from it.
      traceContext: injectTraceContext(traceCtx),
      ...(tenant !== DEFAULT_TENANT ? { tenant } : {}),
      ...(deadline ? { deadline } : {}),
    };
    const record: RequestRecord = {
      state: { context, planName: entry.model ?? entry.pattern ?? req.model, step: 0, totalSteps: 0, timings: [], result: {} },
      events: [],
      revision: 0,
      gen: 1,
      attempt: 1,
      failures: 0,
      producers: {},
      reruns: 0,
      expiresAt: 0,
    };
    const item = this.queued(record, 0, now);
    // Counted before the await, so a burst of submissions cannot pass the bound together, and
    // known as local before it is stored, so its end is seen however soon it comes.
    const local: Local = { span };
    this.local.set(reqId, local);
    this.inFlight += 1;
    const forget = (): void => {
      if (this.local.get(reqId) !== local) return;
      this.local.delete(reqId);
      this.inFlight -= 1;
      this.opts.quotas.withdraw(reqId);
    };
    let result: { record: RequestRecord; created: boolean };
    try {
      result = await this.opts.store.admit(record, item, limits.maxQueueLength);
    } catch (err) {
      forget();
      throw err;
    }
    if (!result.created) {
      forget();
      return result;
    }
    this.opts.recent.add(result.record);
    this.observe(result.record, 0);
    this.opts.onEnqueued?.(item);
    // The timeout, or the deadline when it comes first.
    const untilDeadline = deadline ? Math.max(0, deadline - now) : Infinity;
    const endIn = Math.min(timeoutMs > 0 ? timeoutMs : Infinity, untilDeadline);
    if (Number.isFinite(endIn) && this.local.get(reqId) === local) {
      const error = endIn === untilDeadline ? deadlineError(deadline!) : timeoutError(timeoutMs);
      local.timer = setTimeout(() => {
        void this.end(reqId, { type: 'failed', error }).catch(() => undefined);
      }, endIn);
      local.timer.unref();
    }
    return result;
  }

  /**
   * Under the `refuse` deadline policy: refuses a request whose plan cannot finish by
   * `deadline` at the run times this scheduler measured (the sum of its stages' estimates;
   * stages not measured yet count nothing). The queue ahead is not counted: a request with a
   * deadline passes tasks of its priority with later or no deadlines, and may preempt.
   */
  private deadlineReachable(deadline: number, model: string, plan: ExecutionPlan, params: RequestContext['params']): void {
    if ((this.opts.limits.deadlinePolicy ?? 'refuse') !== 'refuse') return;
    let estimate = 0;
    const parts: string[] = [];
    for (const s of plan.stages) {
      const ms = this.opts.costs.estimateMs(s.pool, model, s.name, params);
      if (ms === undefined) continue;
      estimate += ms;
      parts.push(`${s.name} ${Math.round(ms)} ms`);
    }
    const left = deadline - Date.now();
    if (estimate > left) throw unreachable(estimate, left, parts.join(' + '));
  }

  /**
   * Under the `refuse` deadline policy, fails a running request whose estimated finish
   * (`leftMs` from now) passes its deadline, without waiting for it; true when it did.
   */
  async failIfLate(reqId: string, deadline: number, leftMs: number, how: string): Promise<boolean> {
    if ((this.opts.limits.deadlinePolicy ?? 'refuse') !== 'refuse' || !deadline) return false;
    const left = deadline - Date.now();
    if (leftMs <= left) return false;
    await this.end(reqId, { type: 'failed', error: unreachable(leftMs, left, how, 'running') });
    return true;
  }

  // ---- reading ---------------------------------------------------------------------------

  /** The record of a request; NOT_FOUND when unknown or forgotten. A request past its deadline is failed first. */
  async record(reqId: string): Promise<RequestRecord> {
    let rec = await this.opts.store.read(reqId);
    if (!rec) throw notFound(reqId);
    if (!isTerminalStatus(rec.state.context.status) && pastDeadline(rec)) {
      rec = (await this.end(reqId, { type: 'failed', error: expiredError(rec) }).catch(() => rec)) ?? rec;
    }
    return rec;
  }

  /**
   * Follows a request's events after sequence `after` (0 = from the first): those so far,
   * then live ones, then `close` after the last. NOT_FOUND when unknown or forgotten.
   * Resolves with a function that stops following.
   */
  async listen(reqId: string, after: number, listener: RequestListener): Promise<() => void> {
    const w: Watcher = { listener, delivered: Math.max(0, after), reading: false, again: false, closed: false };
    let set = this.watchers.get(reqId);
    if (!set) {
      set = new Set();
      this.watchers.set(reqId, set);
    }
    set.add(w);
    const stop = (): void => {
      w.closed = true;
      const s = this.watchers.get(reqId);
      s?.delete(w);
      if (s?.size === 0) this.watchers.delete(reqId);
    };
    // A store in this process answers at once (every Generate and Session request follows its events).
    let rec = this.opts.store.peek?.(reqId);
    if (!rec || (!isTerminalStatus(rec.state.context.status) && pastDeadline(rec))) {
      try {
        rec = await this.record(reqId);
      } catch (err) {
        stop();
        throw err;
      }
    }
    this.deliver(reqId, w, rec);
    const latest = this.previews.get(reqId);
    if (latest) deliverPreview(w, latest);
    return stop;
  }

  private deliver(reqId: string, w: Watcher, rec: RequestRecord): void {
    if (w.closed) return;
    w.record = rec;
    const events = rec.events;
    while (w.delivered < events.length && !w.closed) {
      w.delivered += 1;
      w.listener.item(events[w.delivered - 1], w.delivered, rec);
    }
    if (!w.closed && isTerminalStatus(rec.state.context.status) && w.delivered >= events.length) {
      w.closed = true;
      this.watchers.get(reqId)?.delete(w);
      if (this.watchers.get(reqId)?.size === 0) this.watchers.delete(reqId);
      w.listener.close();
    }
  }

  /** Re-reads a record for a watcher that heard of a change made elsewhere (one read at a time). */
  private refresh(reqId: string, w: Watcher): void {
    if (w.reading) {
      w.again = true;
      return;
    }
    w.reading = true;
    void this.opts.store
      .read(reqId)
      .then((rec) => {
        if (rec) this.deliver(reqId, w, rec);
      })
      .catch(() => undefined)
      .finally(() => {
        w.reading = false;
        if (w.again && !w.closed) {
          w.again = false;
          this.refresh(reqId, w);
        }
      });
  }

  private changed(c: RecordChange): void {
    if (c.terminal) this.previews.delete(c.reqId);
    const set = this.watchers.get(c.reqId);
    if (set) {
      for (const w of [...set]) {
        if (c.record) this.deliver(c.reqId, w, c.record);
        else this.refresh(c.reqId, w);
      }
    }
    if (c.record) {
      this.opts.recent.update(c.record);
      this.opts.quotas.moved(c.reqId, c.record.state.context.currentStageIndex);
    }
    if (c.terminal) this.ended(c.reqId, c.record);
  }

  /** A request accepted here has ended (here or elsewhere): its span and timer end. */
  private ended(reqId: string, record: RequestRecord | undefined): void {
    const l = this.local.get(reqId);
    if (!l) return;
    this.local.delete(reqId);
    this.inFlight -= 1;
    this.opts.quotas.ended(reqId);
    clearTimeout(l.timer);
    const close = (rec: RequestRecord | undefined): void => {
      const ctx = rec?.state.context;
      if (ctx?.error) recordError(l.span, new DiffmeshError(parseCodeName(ctx.error.code), 'INTERNAL', ctx.error.message));
      if (ctx) l.span.setAttributes({ [ATTR.requestStatus]: ctx.status, [ATTR.retryCount]: ctx.retryCount });
      if (rec) this.opts.recent.update(rec);
      l.span.end();
    };
    if (record) close(record);
    else void this.opts.store.read(reqId).then(close, () => close(undefined));
  }

  // ---- transitions a dispatch reports ------------------------------------------------------

  /**
   * A leased task is about to go to `instanceId`. Returns the record with the
   * `stage_started` event, or undefined when the task is stale (its request ended or moved
   * on); the caller then calls {@link repair}.
   */
  async started(lease: Lease, pool: string, instanceId: string, hint?: RequestRecord): Promise<RequestRecord | undefined> {
    const { item } = lease;
    let before = 0;
    const rec = await this.opts.store.update(
      item.reqId,
      (r) => {
        if (!current(r, item)) return false;
        before = r.events.length;
        const ctx = r.state.context;
        // A try whose lease ran out (its scheduler died) was lost: this is the next one.
        if (r.startedBy !== undefined && r.startedBy !== lease.token) {
          r.attempt += 1;
          r.lostTries = (r.lostTries ?? 0) + 1;
          ctx.retryCount += 1;
        }
        r.startedBy = lease.token;
        const now = Date.now();
        const timing = timingOf(r, item.stageIndex);
        timing.instanceId = instanceId;
        timing.attempts = r.attempt;
        timing.startedAt = now;
        ctx.status = 'running';
        ctx.updatedAt = now;
        r.state.step = 0;
        r.state.totalSteps = 0;
        r.events.push({
          type: 'stage_started',
          reqId: ctx.reqId,
          stageIndex: item.stageIndex,
          stage: stageOf(r, item.stageIndex),
          pool,
          instanceId,
          attempt: r.attempt,
          at: now,
        });
        return {};
      },
      hint,
    );
    if (rec) this.observe(rec, before);
    return rec;
  }

  /** Progress of a running task (a shared store gets it throttled: see the dispatcher's `progressIntervalMs`). */
  async progress(
    lease: Lease,
    step: number,
    totalSteps: number,
    opts: { hint?: RequestRecord; checkpoint?: Record<string, ObjectRef> } = {},
  ): Promise<RequestRecord | undefined> {
    const { item } = lease;
    let before = 0;
    let replaced: ObjectRef[] = [];
    const rec = await this.opts.store.update(
      item.reqId,
      (r) => {
        if (!current(r, item) || r.startedBy !== lease.token) return false;
        before = r.events.length;
        pushProgress(r, item.stageIndex, step, totalSteps);
        replaced = opts.checkpoint ? keepCheckpoint(r, opts.checkpoint) : [];
        return {};
      },
      opts.hint,
    );
    if (rec) {
      this.observe(rec, before);
      if (replaced.length > 0) void this.deleteObjects(item.reqId, replaced, false);
    } else if (opts.checkpoint) {
      // Too late (the request ended or moved on): the checkpoint is not needed.
      void this.deleteObjects(item.reqId, Object.values(opts.checkpoint), false);
    }
    return rec;
  }

  /**
   * A try of a leased task ended, as the dispatcher classified it (`classifyTaskEnd` in
   * `task-end.ts`, which lists the kinds): one case per kind. A new kind gets its case here.
   */
  async taskEnded(lease: Lease, end: TaskEnd, opts: TaskEndOptions = {}): Promise<void> {
    switch (end.kind) {
      case 'completed':
        return this.completed(lease, end.result, opts);
      case 'superseded':
        // Someone else runs it now: what this try left behind is reaped by TTL.
        return;
      case 'refused':
        return this.requeue(lease, false);
      case 'handed-back':
        return this.requeue(lease, true);
      case 'preempted':
        return this.preempted(lease, end.at);
      case 'request-ended':
        return this.abandon(lease);
      case 'lost':
        return this.retry(lease, end.error, 'lost');
      case 'failed': {
        if (end.inputsMayBeLost && (await this.rerunLostInputs(lease))) return;
        if (end.retryable) return this.retry(lease, end.error, 'failed');
        return this.fail(lease, end.error);
      }
      default: {
        const unhandled: never = end;
        throw new Error(`unhandled task end ${JSON.stringify(unhandled)}`);
      }
    }
  }

  /**
   * A preview from a running task (params `preview`). Previews are ephemeral: one goes at
   * once to the request's watchers on this scheduler (the one dispatching the task), and the
   * latest is kept in memory until the request ends for watchers that attach meanwhile. None
   * is written to the store, so they cost the durable backends (sqlite, redis, JetStream)
   * nothing; the price is that a watcher on another scheduler sharing the store sees none.
   */
  preview(lease: Lease, stage: StageName, totalSteps: number, preview: StagePreview): void {
    const { reqId, stageIndex } = lease.item;
    const event: PreviewEvent = { type: 'preview', reqId, stageIndex, stage, totalSteps, ...preview, at: Date.now() };
    // Map order is recency: the least recently previewed request goes first when full.
    this.previews.delete(reqId);
    if (this.previews.size >= MAX_KEPT_PREVIEWS) this.previews.delete(this.previews.keys().next().value as string);
    this.previews.set(reqId, event);
    for (const w of this.watchers.get(reqId) ?? []) deliverPreview(w, event);
  }

  /** A task finished: the request moves on to its next stage, or completes. */
  private async completed(lease: Lease, result: StageResult, opts: TaskEndOptions): Promise<void> {
    const { item } = lease;
    const { outputs } = result;
    const warnings = result.warnings;
    let before = 0;
    let next: QueueItem | undefined;
    let checkpoints: ObjectRef[] = [];
    const rec = await this.opts.store.update(
      item.reqId,
      (r) => {
        if (!current(r, item)) return false;
        before = r.events.length;
        next = undefined;
        // The last step, when the dispatcher left it for this write (shared stores).
        const last = opts.lastProgress;
        if (last && (r.state.step < last.step || r.state.totalSteps !== last.totalSteps))
          pushProgress(r, item.stageIndex, last.step, last.totalSteps);
        const ctx = r.state.context;
        const now = Date.now();
        Object.assign(ctx.refs, outputs);
        for (const name of Object.keys(outputs)) r.producers[name] = item.stageIndex;
        // The stage is done: its checkpoints go.
        checkpoints = Object.values(r.checkpoint ?? {});
        delete r.checkpoint;
        const timing = timingOf(r, item.stageIndex);
        timing.finishedAt = now;
        ctx.updatedAt = now;
        r.startedBy = undefined;
        r.events.push({
          type: 'stage_finished',
          reqId: ctx.reqId,
          stageIndex: item.stageIndex,
          stage: stageOf(r, item.stageIndex),
          queueMs: timing.startedAt - timing.queuedAt,
          runMs: now - timing.startedAt,
          outputs,
          ...(warnings?.length ? { warnings } : {}),
          at: now,
        });
        const n = item.stageIndex + 1;
        if (n < ctx.executionPlan.stages.length) {
          r.gen += 1;
          newTask(r);
          next = this.queued(r, n, now);
          return { ack: lease, enqueue: next };
        }
        ctx.status = 'completed';
        r.state.result = { ...outputs };
        r.expiresAt = now + this.opts.limits.retentionMs;
        r.events.push({ type: 'completed', reqId: ctx.reqId, outputs, at: now });
        return { ack: lease };
      },
      opts.hint,
    );
    if (!rec) {
      // Someone else moved the request on (or it ended): what this try made is not needed.
      void this.deleteObjects(item.reqId, Object.values(outputs), false);
      await this.repair(lease);
      return;
    }
    this.observe(rec, before);
    if (checkpoints.length > 0) void this.deleteObjects(item.reqId, checkpoints, false);
    if (next) {
      this.opts.onEnqueued?.(next);
      return;
    }
    // Completed: the intermediates go; the outputs stay for the client (their TTL reaps them).
    const keep = new Set(Object.values(outputs).map((r) => r.objectId));
    void this.deleteObjects(
      item.reqId,
      Object.values(rec.state.context.refs).filter((r) => !keep.has(r.objectId)),
      false,
    );
  }

  /**
   * A try that did not count as one goes back in its place at once. A refused one (never ran)
   * is the same try again; a handed-back one ran (and may have left a checkpoint), so the next
   * is another try, and the request's history shows it waits in the queue again. Neither uses
   * up a try of any budget.
   */
  private async requeue(lease: Lease, ran: boolean): Promise<void> {
    const { item } = lease;
    let before = 0;
    const rec = await this.opts.store.update(item.reqId, (r) => {
      if (!current(r, item) || r.startedBy !== lease.token) return false;
      r.startedBy = undefined;
      before = r.events.length;
      if (ran) {
        r.attempt += 1;
        this.queued(r, item.stageIndex, Date.now());
      }
      return { release: { lease, delayMs: 0 } };
    });
    if (rec) this.observe(rec, before);
    else await this.repair(lease);
  }

  /**
   * Re-runs the stage that made an input of the task that is gone (and the stages after it);
   * false when none is gone, or it cannot (an input of the request itself, or too many re-runs).
   */
  private async rerunLostInputs(lease: Lease): Promise<boolean> {
    const { item } = lease;
    const lost = await this.lostInputs(lease);
    if (lost.length === 0) return false;
    let before = 0;
    let rerun: QueueItem | undefined;
    const rec = await this.opts.store.update(item.reqId, (r) => {
      if (!current(r, item)) return false;
      const producer = Math.min(...lost.map((n) => r.producers[n] ?? Infinity));
      if (!Number.isFinite(producer) || r.reruns >= MAX_RERUNS_PER_STAGE * r.state.context.executionPlan.stages.length) return false;
      before = r.events.length;
      const ctx = r.state.context;
      const now = Date.now();
      // Everything made from the producer on is made again.
      for (const [name, stage] of Object.entries(r.producers)) {
        if (stage >= producer) {
          delete ctx.refs[name];
          delete r.producers[name];
        }
      }
      r.reruns += 1;
      delete r.checkpoint;
      r.gen += 1;
      newTask(r);
      r.startedBy = undefined;
      ctx.retryCount += 1;
      rerun = this.queued(r, producer, now);
      return { ack: lease, enqueue: rerun };
    });
    if (!rec || !rerun) return false;
    this.opts.log.warn(
      { reqId: item.reqId, stage: stageOf(rec, item.stageIndex), lost, rerun: rerun.stageIndex },
      'inputs lost; re-running the stage that made them',
    );
    this.observe(rec, before);
    this.opts.onEnqueued?.(rerun);
    return true;
  }

  /**
   * Tries the task again. A `failed` try counts against `maxAttempts` and waits a back-off; a
   * `lost` one (lost with its instance: not the task's failure) is tried again at once, up to
   * `MAX_LOST_TRIES` (in case the task is what kills its instances). Past its bound the request
   * fails.
   */
  private async retry(lease: Lease, error: DiffmeshError, how: 'failed' | 'lost'): Promise<void> {
    const { item } = lease;
    const { store, limits, log } = this.opts;
    let before = 0;
    let delay = 0;
    const rec = await store.update(item.reqId, (r) => {
      if (!current(r, item)) return false;
      const failures = r.failures + (how === 'failed' ? 1 : 0);
      const lostTries = (r.lostTries ?? 0) + (how === 'lost' ? 1 : 0);
      if (how === 'failed' ? failures >= limits.maxAttempts : lostTries > MAX_LOST_TRIES) return false;
      before = r.events.length;
      delay = how === 'lost' ? 0 : Math.min(MAX_TIMEOUT_MS, limits.retryBackoffMs * 2 ** Math.max(0, failures - 1));
      r.failures = failures;
      r.lostTries = lostTries;
      r.attempt += 1;
      r.startedBy = undefined;
      r.state.context.retryCount += 1;
      return { release: { lease, delayMs: delay } };
    });
    if (rec) {
      log.warn(
        { reqId: item.reqId, stage: stageOf(rec, item.stageIndex), attempt: rec.attempt - 1, reason: error.reason, delay },
        'stage failed; retrying',
      );
      this.observe(rec, before);
      return;
    }
    await this.fail(lease, error);
  }

  /** The task failed for good: its request fails (unless it ended or moved on meanwhile). */
  private async fail(lease: Lease, error: DiffmeshError): Promise<void> {
    const { item } = lease;
    const now = await this.opts.store.read(item.reqId);
    if (!now || !current(now, item)) {
      await this.abandon(lease, now);
      return;
    }
    if (error.code === Code.INTERNAL && error.reason === 'INTERNAL') this.opts.log.error({ reqId: item.reqId, err: error }, 'stage failed');
    await this.end(item.reqId, { type: 'failed', error }, { ack: lease });
  }

  /**
   * The task's request ended or moved on while it ran: the task's leftovers go with the
   * request's (when it ended), and its item is dealt with by {@link repair}.
   */
  private async abandon(lease: Lease, seen?: RequestRecord): Promise<void> {
    const now = seen ?? (await this.opts.store.read(lease.item.reqId));
    if (now && isTerminalStatus(now.state.context.status)) void this.deleteObjects(lease.item.reqId, [], true);
    await this.repair(lease);
  }

  /**
   * A running task gave its slot to a more urgent one at a step boundary (see `preemption.ts`):
   * the `preempted` event; the checkpoint where it stopped becomes the stage's (the next try
   * resumes from it); the task goes back to its place in its queue at once as the next try,
   * which counts neither as a failure nor as a lost try.
   */
  private async preempted(lease: Lease, how: PreemptedAt): Promise<void> {
    const { item } = lease;
    let before = 0;
    let replaced: ObjectRef[] = [];
    const rec = await this.opts.store.update(item.reqId, (r) => {
      if (!current(r, item) || r.startedBy !== lease.token) return false;
      before = r.events.length;
      replaced = how.checkpoint ? keepCheckpoint(r, how.checkpoint) : [];
      if (how.step > 0) pushProgress(r, item.stageIndex, how.step, how.totalSteps);
      const now = Date.now();
      r.events.push({
        type: 'preempted',
        reqId: r.state.context.reqId,
        stageIndex: item.stageIndex,
        stage: stageOf(r, item.stageIndex),
        pool: how.pool,
        instanceId: how.instanceId,
        attempt: r.attempt,
        step: how.step,
        totalSteps: how.totalSteps,
        reason: how.reason,
        at: now,
      });
      r.startedBy = undefined;
      r.attempt += 1;
      this.queued(r, item.stageIndex, now);
      return { release: { lease, delayMs: 0 } };
    });
    if (rec) {
      this.observe(rec, before);
      if (replaced.length > 0) void this.deleteObjects(item.reqId, replaced, false);
      return;
    }
    // Ended or moved on meanwhile: the checkpoint is not needed.
    if (how.checkpoint) void this.deleteObjects(item.reqId, Object.values(how.checkpoint), false);
    await this.repair(lease);
  }

  /**
   * Deals with a leased task that is not the request's current one (the request ended or
   * moved on, perhaps half-way on a backend that applies effects one by one): makes sure the
   * current task is queued (an enqueue of a stored id is a no-op) and drops the stale one.
   */
  async repair(lease: Lease): Promise<void> {
    const { item } = lease;
    const rec = await this.opts.store.read(item.reqId);
    if (!rec) {
      // JetStream queues a request's first task before it stores the record: give it time.
      if (Date.now() - item.enqueuedAt < ORPHAN_GRACE_MS) await this.opts.store.apply({ release: { lease, delayMs: 1000 } });
      else await this.opts.store.apply({ ack: lease });
      return;
    }
    if (isTerminalStatus(rec.state.context.status) || current(rec, item)) {
      if (current(rec, item) && rec.startedBy === undefined) {
        await this.opts.store.apply({ release: { lease, delayMs: 0 } });
        return;
      }
      await this.opts.store.apply({ ack: lease });
      return;
    }
    const stage = rec.state.context.currentStageIndex;
    await this.opts.store.apply({
      ack: lease,
      enqueue: this.itemFor(rec, stage, rec.state.timings.find((t) => t.stageIndex === stage)?.queuedAt || Date.now()),
    });
  }

  /**
   * Inputs of a failed task that are gone: their owner lost them (a tensor-svc restarted, a
   * node died) or cannot be reached. Asked only for failures that may come from a lost input
   * (`inputsMayBeLost`, see `classifyTaskEnd`).
   */
  async lostInputs(lease: Lease): Promise<string[]> {
    const rec = await this.opts.store.read(lease.item.reqId);
    if (!rec || !current(rec, lease.item)) return [];
    const refs = Object.entries(rec.state.context.refs).filter(([, r]) => !r.inlineData);
    const probes = await Promise.all(
      refs.map(async ([name, ref]) => {
        try {
          await withTimeout(this.opts.tensors.stat(ref), INPUT_PROBE_MS);
          return undefined;
        } catch (err) {
          const e = asDiffmeshError(err);
          return e.code === Code.INVALID_ARGUMENT ? undefined : name;
        }
      }),
    );
    return probes.filter((n): n is string => n !== undefined);
  }

  // ---- ending ------------------------------------------------------------------------------

  /** Cancels a request: its queued task goes, its running stage stops, its objects are deleted. */
  async cancel(reqId: string): Promise<RequestState> {
    const rec = await this.end(reqId, { type: 'cancelled' });
    if (!rec) throw notFound(reqId);
    return rec.state;
  }

  /**
   * Ends a request that has not ended: deletes its objects (a cancelled or failed request's
   * objects are gone before its end is announced), then writes the end. Returns the record
   * as it ended (by this call or an earlier one); undefined when unknown.
   */
  async end(reqId: string, outcome: Outcome, effects: QueueEffects = {}): Promise<RequestRecord | undefined> {
    const { store } = this.opts;
    for (let tries = 0; ; tries += 1) {
      const seen = await store.read(reqId);
      if (!seen) return undefined;
      if (isTerminalStatus(seen.state.context.status)) {
        if (effects.ack) await store.apply({ ack: effects.ack });
        return seen;
      }
      await this.deleteObjects(reqId, [...Object.values(seen.state.context.refs), ...Object.values(seen.checkpoint ?? {})], true);
      let before = 0;
      const rec = await store.update(reqId, (r) => {
        if (isTerminalStatus(r.state.context.status)) return false;
        // New objects since the deletion (a stage finished meanwhile): delete those first.
        if (r.revision !== seen.revision && tries < 5 && sameRefs(r, seen) === false) return false;
        before = r.events.length;
        const ctx = r.state.context;
        const now = Date.now();
        ctx.updatedAt = now;
        r.expiresAt = now + this.opts.limits.retentionMs;
        r.startedBy = undefined;
        if (outcome.type === 'cancelled') {
          ctx.status = 'cancelled';
          r.events.push({ type: 'cancelled', reqId, at: now });
        } else {
          const e = outcome.error;
          const error = { code: e.code, reason: e.reason, message: e.message, ...(e.field ? { field: e.field } : {}) };
          ctx.status = 'failed';
          ctx.error = { ...error, code: Code[e.code] ?? String(e.code) };
          r.events.push({ type: 'failed', reqId, error, at: now });
        }
        return { ...effects, remove: { pool: poolOf(r, ctx.currentStageIndex), id: itemId(reqId, ctx.currentStageIndex) } };
      });
      if (rec) {
        this.observe(rec, before);
        return rec;
      }
    }
  }

  // ---- helpers -----------------------------------------------------------------------------

  /** Queues stage `stageIndex` of a record being changed: the `queued` event, timing and state. */
  private queued(r: RequestRecord, stageIndex: number, now: number): QueueItem {
    const ctx = r.state.context;
    const stage = ctx.executionPlan.stages[stageIndex];
    const item = this.itemFor(r, stageIndex, now);
    ctx.currentStageIndex = stageIndex;
    ctx.updatedAt = now;
    const timing = timingOf(r, stageIndex);
    timing.queuedAt = timing.queuedAt || now;
    r.events.push({
      type: 'queued',
      reqId: ctx.reqId,
      stageIndex,
      stage: stage.name,
      pool: stage.pool,
      position: this.opts.store.waiting(item.queue),
      at: now,
    });
    return item;
  }

  private itemFor(r: RequestRecord, stageIndex: number, enqueuedAt: number): QueueItem {
    const ctx = r.state.context;
    const stage = ctx.executionPlan.stages[stageIndex];
    return {
      id: itemId(ctx.reqId, stageIndex),
      reqId: ctx.reqId,
      stageIndex,
      gen: r.gen,
      createdAt: ctx.createdAt,
      pool: stage.pool,
      queue: stage.version ? `${stage.pool}@${stage.version}` : stage.pool,
      ...(stage.version ? { range: stage.version } : {}),
      model: ctx.model,
      priority: ctx.priority,
      enqueuedAt,
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      cost: this.opts.costs.estimate(stage.pool, ctx.model, stage.name, ctx.params),
      ...(ctx.deadline ? { deadline: ctx.deadline } : {}),
    };
  }

  /** Hands the events this scheduler wrote to the observer. */
  private observe(rec: RequestRecord, from: number): void {
    const onEvent = this.opts.onEvent;
    if (!onEvent) return;
    for (let i = from; i < rec.events.length; i += 1) {
      try {
        onEvent(rec.events[i], rec.state);
      } catch (err) {
        this.opts.log.warn({ err }, 'event observer failed');
      }
    }
  }

  /**
   * Deletes a request's objects where they live (each ref names its owner). `wholeRequest`
   * also asks the store to drop anything else it holds for the request (objects a stage
   * stored before it was stopped); TTLs reap what no one knows about.
   */
  async deleteObjects(reqId: string, refs: ObjectRef[], wholeRequest: boolean): Promise<void> {
    const { tensors } = this.opts;
    const results = await Promise.allSettled([
      ...refs.map((r) => tensors.delete(r)),
      ...(wholeRequest ? [tensors.deleteRequest(reqId)] : []),
    ]);
    const failed = results.filter((r) => r.status === 'rejected');
    if (failed.length > 0) {
      this.opts.log.warn({ reqId, failed: failed.length, err: failed[0].reason }, 'could not delete some request objects');
    }
  }
}

/** Hands a preview to a watcher, numbered as the last event it has (previews take no sequence of their own). */
function deliverPreview(w: Watcher, e: PreviewEvent): void {
  if (w.closed || !w.record || isTerminalStatus(w.record.state.context.status)) return;
  w.listener.item(e, w.delivered, w.record);
}

/** True when `item` is the request's current task and the request has not ended. */
function current(r: RequestRecord, item: QueueItem): boolean {
  return !isTerminalStatus(r.state.context.status) && r.state.context.currentStageIndex === item.stageIndex && r.gen === item.gen;
}

function sameRefs(a: RequestRecord, b: RequestRecord): boolean {
  const ka = Object.values(a.state.context.refs)
    .map((r) => r.objectId)
    .sort();
  const kb = Object.values(b.state.context.refs)
    .map((r) => r.objectId)
    .sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i]);
}

/** Records a progress event of stage `stageIndex` in a record being changed. */
/**
 * Keeps a try's checkpoint objects on the record: the latest of each name is kept, and the
 * older ones it replaces are returned (to be deleted once the change is written).
 */
function keepCheckpoint(r: RequestRecord, checkpoint: Record<string, ObjectRef>): ObjectRef[] {
  const replaced: ObjectRef[] = [];
  for (const [name, ref] of Object.entries(checkpoint)) {
    const old = r.checkpoint?.[name];
    if (old && old.objectId !== ref.objectId) replaced.push(old);
  }
  r.checkpoint = { ...r.checkpoint, ...checkpoint };
  return replaced;
}

function pushProgress(r: RequestRecord, stageIndex: number, step: number, totalSteps: number): void {
  r.state.step = step;
  r.state.totalSteps = totalSteps;
  r.events.push({
    type: 'progress',
    reqId: r.state.context.reqId,
    stageIndex,
    stage: stageOf(r, stageIndex),
    step,
    totalSteps,
    at: Date.now(),
  });
}

function stageOf(r: RequestRecord, stageIndex: number): StageName {
  return r.state.context.executionPlan.stages[stageIndex].name;
}

function poolOf(r: RequestRecord, stageIndex: number): string {
  return r.state.context.executionPlan.stages[stageIndex]?.pool ?? '';
}

function timingOf(r: RequestRecord, stageIndex: number): StageTiming {
  let t = r.state.timings.find((x) => x.stageIndex === stageIndex);
  if (!t) {
    const stage = r.state.context.executionPlan.stages[stageIndex];
    t = { stageIndex, stage: stage.name, pool: stage.pool, instanceId: '', attempts: 0, queuedAt: 0, startedAt: 0, finishedAt: 0 };
    r.state.timings.push(t);
  }
  return t;
}

/** The request's deadline (ms since the epoch): its timeout's end or its own deadline, whichever comes first; 0 = none. */
export function deadlineOf(r: RequestRecord): number {
  const ctx = r.state.context;
  const timeout = ctx.timeoutMs > 0 ? ctx.createdAt + ctx.timeoutMs : 0;
  const own = ctx.deadline ?? 0;
  return timeout && own ? Math.min(timeout, own) : timeout || own;
}

/** The error of a request whose own deadline passed. */
export function deadlineError(deadline: number): DiffmeshError {
  return new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `request deadline ${new Date(deadline).toISOString()} passed`);
}

/** DEADLINE_EXCEEDED / DEADLINE_UNREACHABLE: the estimate (and what it is made of) against the time left. */
function unreachable(estimateMs: number, leftMs: number, parts: string, when: 'admission' | 'running' = 'admission'): DiffmeshError {
  const what = when === 'admission' ? 'cannot finish by its deadline' : 'will not finish by its deadline';
  return new DiffmeshError(
    Code.DEADLINE_EXCEEDED,
    'DEADLINE_UNREACHABLE',
    `request ${what}: estimated ${Math.round(estimateMs)} ms (${parts || 'measured run times'}) with ${Math.max(0, Math.round(leftMs))} ms left`,
    { metadata: { field: 'deadline', estimate_ms: String(Math.round(estimateMs)), left_ms: String(Math.max(0, Math.round(leftMs))) } },
  );
}

/** A request's deadline as given: a whole number of ms since the epoch, in the future, within the longest timeout. */
function checkDeadline(deadline: number | undefined): number | undefined {
  if (deadline === undefined || deadline === 0) return undefined;
  const now = Date.now();
  if (!Number.isFinite(deadline) || deadline < 0) {
    throw invalidParameter('deadline', `must be a time (ms since the epoch), got ${deadline}`);
  }
  if (deadline <= now) {
    throw invalidParameter('deadline', `is in the past (${new Date(deadline).toISOString()}, now ${new Date(now).toISOString()})`);
  }
  if (deadline - now > MAX_TIMEOUT_MS) {
    throw invalidParameter(
      'deadline',
      `must be within ${MAX_TIMEOUT_MS} ms (about 24 days) from now, got ${new Date(deadline).toISOString()}`,
    );
  }
  return Math.round(deadline);
}

function pastDeadline(r: RequestRecord): boolean {
  const d = deadlineOf(r);
  return d > 0 && Date.now() >= d;
}

/** The error of a request past {@link deadlineOf}: its own deadline's, or its timeout's. */
export function expiredError(r: RequestRecord): DiffmeshError {
  const ctx = r.state.context;
  return ctx.deadline && deadlineOf(r) === ctx.deadline ? deadlineError(ctx.deadline) : timeoutError(ctx.timeoutMs);
}

export function timeoutError(timeoutMs: number): DiffmeshError {
  return new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `request timed out after ${timeoutMs} ms`);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function parseCodeName(name: string): Code {
  const code = (Code as unknown as Record<string, number>)[name];
  return typeof code === 'number' ? code : Code.UNKNOWN;
}

/** A new task of the request (its next stage, or a stage re-run): its tries are counted from none. */
function newTask(r: RequestRecord): void {
  r.attempt = 1;
  r.failures = 0;
  r.lostTries = 0;
}

/**
 * The request a repeated client id names, when the same tenant sent it. Another tenant's
 * id is refused without telling anything of that request (a client id is a name in the
 * mesh's one namespace: the client picks another).
 */
function ownExisting(state: RequestState, req: GenerateRequest): RequestState {
  if ((state.context.tenant ?? DEFAULT_TENANT) === (req.tenant ?? DEFAULT_TENANT)) return state;
  throw new DiffmeshError(Code.ALREADY_EXISTS, 'INVALID_PARAMETER', 'request_id: is in use; choose another id', {
    metadata: { field: 'request_id' },
  });
}

export function notFound(reqId: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'REQUEST_NOT_FOUND', `request "${reqId}" not found`, { metadata: { field: 'req_id' } });
}

/**
 * A client's request id must do as the first part of the request's object ids
 * (`{request_id}:{name}:{unique}`): the tensor store refuses an empty one or one with `:`.
 */
export function checkRequestId(id: string): void {
  if (id.includes(':') || [...id].length > MAX_REQUEST_ID_CHARS) {
    const shown = id.length > 80 ? `${JSON.stringify(id.slice(0, 80))}… (${id.length} characters)` : JSON.stringify(id);
    throw invalidParameter('request_id', `must be at most ${MAX_REQUEST_ID_CHARS} characters without ":", got ${shown}`);
  }
}
