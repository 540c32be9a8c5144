import {
  SpanKind,
  SpanStatusCode,
  context as api,
  isSpanContextValid,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { Code, DiffmeshError } from '../errors/index.js';
import type { StageTask } from '../stage-task.js';
import { DEFAULT_TENANT } from '../tenants/tenants.js';

export { SpanKind };
export type { Attributes, Context, Span, Tracer };

/** Instrumentation scope of every diffmesh span. */
export const TRACER_NAME = 'diffmesh';

/**
 * The diffmesh tracer. It delegates to whatever provider {@link startTelemetry} registered,
 * and is a no-op (near-zero cost) when tracing is off or not started.
 */
export function diffmeshTracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/** Span names: one place, so dashboards and tests agree with the code. */
export const SPAN = {
  /** Scheduler: a request from acceptance to its end (child of the client's span, if any). */
  request: 'diffmesh.request',
  /** Scheduler: a stage task waiting in its pool queue (one per enqueue). */
  queueWait: 'diffmesh.queue_wait',
  /** Scheduler: one attempt of a stage task on an instance. */
  dispatch: 'diffmesh.dispatch',
  /** Stage service: running a task (child of the dispatch span). */
  stageExecute: 'diffmesh.stage.execute',
  /** Stage service: one model run (a denoiser step, an encoder or VAE run). */
  modelRun: 'diffmesh.model.run',
  /** Tensor client: storing an object. */
  tensorPut: 'diffmesh.tensor.put',
  /** Tensor client: reading an object (shared memory or a Get stream). */
  tensorGet: 'diffmesh.tensor.get',
  /** tensor-svc: the server side of a Put stream. */
  tensorServerPut: 'diffmesh.tensor.Put',
  /** tensor-svc: the server side of a Get stream. */
  tensorServerGet: 'diffmesh.tensor.Get',
} as const;

/** Attribute keys of diffmesh spans. */
export const ATTR = {
  requestId: 'diffmesh.request_id',
  /** The request's tenant (`default` when the mesh has no tenants). */
  tenant: 'diffmesh.tenant',
  model: 'diffmesh.model',
  priority: 'diffmesh.priority',
  /** Final request status: completed | failed | cancelled. */
  requestStatus: 'diffmesh.request.status',
  retryCount: 'diffmesh.request.retry_count',
  pool: 'diffmesh.pool',
  stage: 'diffmesh.stage',
  stageIndex: 'diffmesh.stage_index',
  attempt: 'diffmesh.attempt',
  instanceId: 'diffmesh.instance_id',
  nodeId: 'diffmesh.node_id',
  /**
   * LoRA adapters a task names; whether the instance it went to held all of them already
   * (true | false); whether that came from the instance's own report (else the scheduler's
   * memory of what it sent there).
   */
  adapters: 'diffmesh.adapters',
  adaptersHeld: 'diffmesh.adapters.held',
  adaptersReported: 'diffmesh.adapters.reported',
  /** How a queue wait, dispatch or task ended: ok | failed | cancelled | timeout | refused. */
  outcome: 'diffmesh.outcome',
  queuePosition: 'diffmesh.queue.position',
  /** Steps of a stage task (denoising steps; 1 for other stages). */
  stepCount: 'diffmesh.step_count',
  /** Steps done when the task ended. */
  stepsDone: 'diffmesh.steps_done',
  /** 1-based step of a denoiser model run. */
  step: 'diffmesh.step',
  /** Items in one model run (a CFG request contributes two latents to a denoiser batch). */
  batchSize: 'diffmesh.batch_size',
  /** Model runs a denoiser step needed (2 when its guided halves landed in different batches). */
  modelRuns: 'diffmesh.model_runs',
  /** A denoising step that reused the last model output (step caching): its model runs are 0. */
  stepCached: 'diffmesh.step_cache.hit',
  tensorBytes: 'diffmesh.tensor.bytes',
  tensorObjectId: 'diffmesh.tensor.object_id',
  tensorName: 'diffmesh.tensor.name',
  tensorOwnerAddress: 'diffmesh.tensor.owner_address',
  tensorOwnerNode: 'diffmesh.tensor.owner_node_id',
  /** How a tensor read travelled: `shm` (same-node shared memory) or `grpc` (a Get stream). */
  tensorPath: 'diffmesh.tensor.path',
  /** Whether the object's owner runs on this node. */
  tensorSameNode: 'diffmesh.tensor.same_node',
  tensorRetries: 'diffmesh.tensor.retries',
  errorReason: 'diffmesh.error.reason',
} as const;

/**
 * Marks a span as failed by `err`: status ERROR with the message, `error.type` (the gRPC code
 * name) and `diffmesh.error.reason`. A cancellation is not an error of the span's own work:
 * it gets the attributes but keeps status UNSET. No stack traces are recorded.
 */
export function recordError(span: Span, err: unknown): void {
  if (!span.isRecording()) return;
  const e = err instanceof DiffmeshError ? err : undefined;
  const message = err instanceof Error ? err.message : String(err);
  span.setAttribute('error.type', e ? (Code[e.code] ?? String(e.code)) : err instanceof Error ? err.name : 'Error');
  if (e) span.setAttribute(ATTR.errorReason, e.reason);
  if (e?.code === Code.CANCELLED) return;
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  if (!e || e.code === Code.INTERNAL) {
    span.addEvent('exception', { 'exception.type': err instanceof Error ? err.name : 'Error', 'exception.message': message });
  }
}

/** Options of {@link withSpan}. */
export interface WithSpanOptions {
  kind?: SpanKind;
  /** Parent context; default the active one. */
  parent?: Context;
  /** Tracer; default {@link diffmeshTracer}. */
  tracer?: Tracer;
}

/**
 * Runs `fn` inside a new span (active for everything `fn` awaits), ends the span when `fn`
 * settles and records a failure with {@link recordError}. Rethrows what `fn` throws.
 */
export async function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T> | T,
  opts: WithSpanOptions = {},
): Promise<T> {
  const parent = opts.parent ?? api.active();
  const span = (opts.tracer ?? diffmeshTracer()).startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes }, parent);
  try {
    return await api.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    recordError(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** `traceId`/`spanId` of a span, for log lines; empty when it has no valid ids. */
export function spanLogFields(span: Span | undefined): { traceId?: string; spanId?: string } {
  const sc = span?.spanContext();
  if (!sc || !isSpanContextValid(sc)) return {};
  return { traceId: sc.traceId, spanId: sc.spanId };
}

/**
 * Logger mixin: the active span's `traceId`/`spanId` on every log line
 * (`createLogger({ …, mixin: traceLogFields })`). Nothing when no span is active.
 */
export function traceLogFields(): { traceId?: string; spanId?: string } {
  return spanLogFields(trace.getSpan(api.active()));
}

/**
 * Attributes of the `diffmesh.stage.execute` span of a task on an instance: the same for a
 * stage service and an in-process instance, so embedded traces have the mesh's shape.
 */
export function stageExecuteAttributes(
  task: Pick<StageTask, 'reqId' | 'model' | 'stage' | 'stageIndex' | 'attempt' | 'tenant'>,
  instance: { pool: string; instanceId: string; nodeId: string },
): Record<string, string | number> {
  return {
    [ATTR.requestId]: task.reqId,
    [ATTR.tenant]: task.tenant ?? DEFAULT_TENANT,
    [ATTR.model]: task.model,
    [ATTR.stage]: task.stage,
    [ATTR.stageIndex]: task.stageIndex,
    [ATTR.attempt]: task.attempt,
    [ATTR.pool]: instance.pool,
    [ATTR.instanceId]: instance.instanceId,
    [ATTR.nodeId]: instance.nodeId,
  };
}
