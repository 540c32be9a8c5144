/**
 * Admission: a request is validated and accepted all or nothing, or refused at once (see the
 * README's "Behaviour"): unknown model, bad parameter, a timeout or deadline out of range, a
 * pool with no instance serving the model (or none of the pinned version), too many requests
 * in flight, an unreachable deadline, the tenant over a limit, a full first queue. An accepted
 * request's record is stored with its first task, and its timer armed.
 */
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
  type OtelContext,
  type RequestContext,
  type Span,
} from '@diffmesh/core';
import { checkDeadline, endsIn, type Deadlines } from './deadlines.js';
import { type InstanceSlots, serves, versionMatches } from './instances.js';
import type { SchedulerLimits } from './limits.js';
import type { LocalRequests } from './local-requests.js';
import { resolveParams } from './plans/params.js';
import type { PlanEntry } from './plans/schema.js';
import type { PlanRegistry } from './plans/registry.js';
import type { ObserveEvents, Outcome } from './request-end.js';
import { INPUT_IMAGE, requestPlan } from './request-plan.js';
import type { RecentRequests } from './retention.js';
import type { QueueItem, RequestRecord, SchedulerStore } from './storage/types.js';
import type { TaskCosts } from './task-cost.js';
import type { TaskItems } from './task-items.js';
import type { TenantQuotas } from './tenant-quotas.js';
import { MAX_REQUEST_ID_CHARS, MAX_TIMEOUT_MS, type GenerateRequest, type RequestState } from './types.js';

export interface AdmissionOptions {
  store: SchedulerStore;
  registry: PlanRegistry;
  log: Logger;
  limits: SchedulerLimits;
  instances: InstanceSlots;
  recent: RecentRequests;
  costs: TaskCosts;
  quotas: TenantQuotas;
  local: LocalRequests;
  deadlines: Deadlines;
  items: TaskItems;
  observe: ObserveEvents;
  /** Ends a request (its timer). */
  end: (reqId: string, outcome: Outcome) => Promise<unknown>;
  /** A task was queued by this scheduler (stranded-task checks, preemption). */
  onEnqueued?: (item: QueueItem) => void;
  /** A request was refused at admission (metrics); must not throw. */
  onRefused?: (tenant: string, error: DiffmeshError) => void;
}

/** What a request asks for, checked: its plan, resolved parameters, timeout and deadline. */
interface Checked {
  entry: PlanEntry;
  plan: ExecutionPlan;
  params: RequestContext['params'];
  inputs: NonNullable<GenerateRequest['inputs']>;
  timeoutMs: number;
  deadline: number | undefined;
}

export class Admission {
  private stopped = false;

  constructor(private readonly opts: AdmissionOptions) {}

  /** Stops accepting requests (UNAVAILABLE / DRAINING). */
  stopIntake(): void {
    this.stopped = true;
  }

  /**
   * Validates and accepts a request, or rejects it at once. Nothing is half-accepted. A client
   * id seen before returns that request (`created: false`).
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
      this.refused(req, span, err);
      throw err;
    }
  }

  private refused(req: GenerateRequest, span: Span, err: unknown): void {
    recordError(span, err);
    span.setAttribute(ATTR.requestStatus, 'rejected');
    span.end();
    try {
      this.opts.onRefused?.(req.tenant || DEFAULT_TENANT, asDiffmeshError(err));
    } catch (e) {
      this.opts.log.warn({ err: e }, 'refusal observer failed');
    }
  }

  /** The checks in their order, then the record stored with its first task. */
  private async accept(
    req: GenerateRequest,
    reqId: string,
    span: Span,
    traceCtx: OtelContext,
  ): Promise<{ record: RequestRecord; created: boolean }> {
    if (this.stopped) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down', { retryAfterMs: 1000 });
    const checked = this.check(req);
    this.checkPools(checked.plan, req.model);
    this.checkAdapters(checked.plan, req.model, checked.params);
    const { limits } = this.opts;
    if (this.opts.local.count >= limits.maxInFlight) {
      throw new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'TOO_MANY_REQUESTS', `too many requests in flight (limit ${limits.maxInFlight})`, {
        retryAfterMs: 1000,
      });
    }
    if (checked.deadline) this.opts.deadlines.reachable(checked.deadline, req.model, checked.plan, checked.params);
    // Counted at once, like in-flight requests: a burst cannot pass a tenant's limits together.
    this.opts.quotas.admit(
      reqId,
      req.tenant || DEFAULT_TENANT,
      checked.plan.stages.map((s) => this.opts.costs.estimate(s.pool, req.model, s.name, checked.params)),
    );
    return this.store(req, reqId, span, traceCtx, checked);
  }

  /** The request's plan, parameters, timeout and deadline, or INVALID_ARGUMENT / NOT_FOUND. */
  private check(req: GenerateRequest): Checked {
    const entry = this.opts.registry.lookup(req.model);
    const inputs = req.inputs ?? {};
    // Stages that need an input the request lacks (an image) are left out of its plan.
    const plan = requestPlan(entry, req.model, Object.keys(inputs));
    const params = resolveParams(entry, { ...req.params }, { inputImage: INPUT_IMAGE in inputs });
    const timeout = req.timeoutMs ?? 0;
    if (!Number.isInteger(timeout) || timeout < 0 || timeout > MAX_TIMEOUT_MS) {
      throw invalidParameter(
        'timeout_ms',
        `must be a whole number of milliseconds from 0 to ${MAX_TIMEOUT_MS} (about 24 days), got ${timeout}`,
      );
    }
    const deadline = checkDeadline(req.deadline);
    // (Limits given in-process are not validated like the service's config: keep timers in range.)
    const timeoutMs = Math.min(MAX_TIMEOUT_MS, timeout > 0 ? timeout : this.opts.limits.defaultTimeoutMs);
    return { entry, plan, params, inputs, timeoutMs, deadline };
  }

  /** Every stage's pool has a healthy instance serving the model (of the stage's version range): else UNAVAILABLE. */
  private checkPools(plan: ExecutionPlan, model: string): void {
    for (const stage of plan.stages) {
      const healthy = this.opts.instances.healthy(stage.pool);
      // Only an instance serving the model may run its task (pools are shared by models).
      const serving = healthy.filter((s) => serves(s, model));
      if (serving.length === 0) {
        const which = healthy.length === 0 ? '' : ` serving model "${model}"`;
        throw new DiffmeshError(
          Code.UNAVAILABLE,
          'POOL_UNAVAILABLE',
          `pool "${stage.pool}" (stage ${stage.name}) has no healthy instance${which}`,
          {
            metadata: { pool: stage.pool, stage: stage.name, model },
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
  }

  /**
   * Every adapter the request names is in the adapter folder of some instance of its denoising
   * pool, when every instance there reports its folder (see {@link InstanceSlots.adapterReports});
   * else INVALID_ARGUMENT naming `adapters[i].name`. Where a report is missing the stage decides.
   */
  private checkAdapters(plan: ExecutionPlan, model: string, params: RequestContext['params']): void {
    const adapters = params.adapters ?? [];
    if (adapters.length === 0) return;
    for (const stage of plan.stages) {
      if (stage.name !== 'denoising') continue;
      const reports = this.opts.instances.adapterReports(stage.pool, model, stage.version);
      if (!reports) continue;
      const available = [...new Set(reports.flatMap((r) => r.available))].sort();
      adapters.forEach((a, i) => {
        if (available.includes(a.name)) return;
        const known = available.length === 0 ? 'it has none' : `it has ${listed(available)}`;
        throw invalidParameter(`adapters[${i}].name`, `no instance of pool "${stage.pool}" has an adapter named ${a.name} (${known})`);
      });
    }
  }

  /** Stores the record with its first task (QUEUE_FULL when the queue is), then arms the request's timer. */
  private async store(
    req: GenerateRequest,
    reqId: string,
    span: Span,
    traceCtx: OtelContext,
    checked: Checked,
  ): Promise<{ record: RequestRecord; created: boolean }> {
    const now = Date.now();
    const record = newRecord(req, reqId, traceCtx, checked, now);
    const item = this.opts.items.queued(record, 0, now);
    const accepting = this.opts.local.accepting(reqId, span);
    let result: { record: RequestRecord; created: boolean };
    try {
      result = await this.opts.store.admit(record, item, this.opts.limits.maxQueueLength);
    } catch (err) {
      accepting.forget();
      throw err;
    }
    if (!result.created) {
      accepting.forget();
      return result;
    }
    this.opts.recent.add(result.record);
    this.opts.observe(result.record, 0);
    this.opts.onEnqueued?.(item);
    const ends = endsIn(checked.timeoutMs, checked.deadline, now);
    if (ends) accepting.arm(ends.ms, () => void this.opts.end(reqId, { type: 'failed', error: ends.error }).catch(() => undefined));
    return result;
  }
}

/** Names for a message: the first 20, then how many more. */
function listed(names: readonly string[]): string {
  return names.length <= 20 ? names.join(', ') : `${names.slice(0, 20).join(', ')} and ${names.length - 20} more`;
}

/** A new request's record: `pending`, its first stage current, no try yet. */
function newRecord(req: GenerateRequest, reqId: string, traceCtx: OtelContext, checked: Checked, now: number): RequestRecord {
  const tenant = req.tenant || DEFAULT_TENANT;
  const { entry, plan, params, inputs, timeoutMs, deadline } = checked;
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
  return {
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
