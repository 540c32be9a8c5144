import type * as grpc from '@grpc/grpc-js';
import {
  loadDiffmeshProtos,
  messageCodec,
  preEncoded,
  type CancelRequest__Output,
  type CancelResponse,
  type GenerateRequest__Output,
  type GenerateResponse,
  type GetResultRequest__Output,
  type GetResultResponse,
  type GetStatusResponse,
  type SchedulerGetRequest__Output,
  type ListModelsResponse,
  type RequestEvent as WireRequestEvent,
  type SchedulerGetResponse,
  type StageTiming as WireStageTiming,
  type SessionAnswer,
  type SessionRequest__Output,
  type SessionResponse,
  type SubmitRequest__Output,
  type SubmitResponse,
  type WatchRequest__Output,
  type WatchResponse,
  type ErrorDetail as WireErrorDetail,
  type PoolStatus,
  type RecentRequest,
} from '@diffmesh/protos';
import {
  callCredentials,
  Code,
  DEFAULT_STRENGTH,
  DEFAULT_TENANT,
  DiffmeshError,
  TenantDirectory,
  errorDetailToWire,
  inputImageFromWire,
  objectRefsToWire,
  objectRefToWire,
  paramsInputFromWire,
  paramsToWire,
  parseCode,
  planToWire,
  requestStatusToWire,
  stageNameToWire,
  timestampFromWire,
  timestampToWire,
  toWire,
  traceContextFromMetadata,
  type Reason,
  type ServiceBinding,
  type RequestEvent,
  type Tenant,
} from '@diffmesh/core';
import { submitWithInputImage } from './input-image.js';
import { type PlanRegistry } from './plans/registry.js';
import { IMAGE_MODALITIES, type Modality } from './plans/schema.js';
import type { PoolView, Scheduler } from './scheduler.js';
import type { GenerateRequest, RequestState, StageTiming } from './types.js';
import { getResultHandler, type ResultServiceDeps } from './result-service.js';
import { modelAvailability } from './model-availability.js';

const MODALITY: Record<
  Modality,
  'MODALITY_TEXT_TO_IMAGE' | 'MODALITY_TEXT_TO_VIDEO' | 'MODALITY_IMAGE_TO_VIDEO' | 'MODALITY_IMAGE_TO_IMAGE'
> = {
  'text-to-image': 'MODALITY_TEXT_TO_IMAGE',
  'text-to-video': 'MODALITY_TEXT_TO_VIDEO',
  'image-to-video': 'MODALITY_IMAGE_TO_VIDEO',
  'image-to-image': 'MODALITY_IMAGE_TO_IMAGE',
};

const eventMessages = messageCodec<GenerateResponse>('diffmesh.scheduler.v1.GenerateResponse');
const sessionMessages = messageCodec<SessionResponse>('diffmesh.scheduler.v1.SessionResponse');

/** Who is answering, for GetStatus. */
export interface SchedulerIdentity {
  instanceId: string;
  version: string;
}

/** Prompts in GetStatus are cut to this many characters. */
const STATUS_PROMPT_CHARS = 200;

const BREAKER = {
  closed: 'BREAKER_STATE_CLOSED',
  'half-open': 'BREAKER_STATE_HALF_OPEN',
  open: 'BREAKER_STATE_OPEN',
} as const;

/** How the scheduler's API streams events. */
export interface StreamOptions {
  /**
   * Least time between two messages of a Generate or Watch stream; the events of the
   * meantime go together in the next one, and the request's end is sent at once. Keeps a
   * client from waking for every event of a fast request. 0 = every turn of the event loop.
   */
  eventIntervalMs?: number;
  /** Where GetResult reads results from and how it encodes videos; absent = UNIMPLEMENTED. */
  results?: Omit<ResultServiceDeps, 'get'>;
  /**
   * Who may call: each call's bearer key or client certificate names its tenant, and every
   * read or action on a request is scoped to it (another tenant's request is NOT_FOUND).
   * Absent or without a tenants file: tenancy off, every caller is `default`.
   */
  tenants?: TenantDirectory;
}

/** Default of {@link StreamOptions.eventIntervalMs}. */
export const DEFAULT_EVENT_INTERVAL_MS = 20;

/** The SchedulerService binding, with the hook a draining server calls. */
export interface SchedulerServiceBinding extends ServiceBinding {
  /**
   * Makes every open Session end once its requests have ended, as if its client had closed
   * its side (new requests on it are refused by the draining scheduler anyway).
   */
  endSessions(): void;
  /**
   * Ends every open Generate, Watch and Session stream that is still following an unfinished
   * request, after the events already written, with `error` (a draining scheduler that has
   * handed its work back: the client follows the request on another scheduler).
   */
  endStreams(error: DiffmeshError): void;
  /** Open Session streams. */
  openSessions(): number;
}

/** `diffmesh.scheduler.v1.SchedulerService` over a Scheduler. */
export function schedulerServiceBinding(
  scheduler: Scheduler,
  registry: PlanRegistry,
  identity: SchedulerIdentity = { instanceId: '', version: '' },
  streams: StreamOptions = {},
): SchedulerServiceBinding {
  const interval = streams.eventIntervalMs ?? DEFAULT_EVENT_INTERVAL_MS;
  const tenants = streams.tenants ?? TenantDirectory.open();
  /** The caller's tenant (UNAUTHENTICATED when tenancy is on and its credentials name none). */
  const tenantOf = (call: CallWithCredentials): Tenant => tenants.resolve(callCredentials(call));
  /** Runs a streaming handler as the caller's tenant; a refusal ends the call. */
  const asTenant = (call: CallWithCredentials & { emit(event: 'error', err: unknown): boolean }, run: (tenant: Tenant) => void): void => {
    try {
      run(tenantOf(call));
    } catch (err) {
      call.emit('error', toWire(err));
    }
  };
  const proto = loadDiffmeshProtos();
  /** Open sessions, each by the function that half-closes it. */
  const sessions = new Set<() => void>();
  /** Open streams (Generate, Watch, Session), each by the function that ends it with an error. */
  const open = new Set<(error: DiffmeshError) => void>();
  return {
    endSessions() {
      for (const end of [...sessions]) end();
    },
    endStreams(error) {
      for (const end of [...open]) end(error);
    },
    openSessions: () => sessions.size,
    name: 'diffmesh.scheduler.v1.SchedulerService',
    definition: proto.diffmesh.scheduler.v1.SchedulerService.service,
    implementation: {
      Submit: unary<SubmitRequest__Output, SubmitResponse>(async (req, call) => {
        const tenant = tenantOf(call);
        const existing = req.requestId !== '' && (await hasRequest(scheduler, req.requestId, tenant));
        const state = await submit(scheduler, req, traceContextFromMetadata(call.metadata), tenant);
        return { reqId: state.context.reqId, status: requestStatusToWire(state.context.status), existing };
      }),
      Get: unary<SchedulerGetRequest__Output, SchedulerGetResponse>(async (req, call) =>
        getResponse(await scheduler.get(requireId(req.reqId), tenantOf(call))),
      ),
      Cancel: unary<CancelRequest__Output, CancelResponse>(async (req, call) => ({
        status: requestStatusToWire((await scheduler.cancel(requireId(req.reqId), tenantOf(call))).context.status),
      })),
      ListModels: unary<unknown, ListModelsResponse>((_req, call) => {
        tenantOf(call);
        return listModels();
      }),
      GetStatus: unary<unknown, GetStatusResponse>((_req, call) => statusResponse(scheduler, identity, tenantOf(call))),
      GetResult: (call: grpc.ServerWritableStream<GetResultRequest__Output, GetResultResponse>) =>
        asTenant(call, (tenant) => {
          if (!streams.results) throw new DiffmeshError(Code.UNIMPLEMENTED, 'INTERNAL', 'this scheduler serves no results');
          getResultHandler({ ...streams.results, get: (reqId) => scheduler.get(reqId, tenant) })(call);
        }),
      Generate: async (call: grpc.ServerWritableStream<GenerateRequest__Output, GenerateResponse>) => {
        let reqId: string;
        try {
          reqId = (await submit(scheduler, call.request, traceContextFromMetadata(call.metadata), tenantOf(call))).context.reqId;
        } catch (err) {
          call.emit('error', toWire(err));
          return;
        }
        // A client that goes away cancels its request (not a scheduler that is shutting down:
        // with a shared store the request goes on elsewhere).
        const cancel = (): void => cancelQuietly(scheduler, reqId);
        // A client that went away while its input image was being stored takes its request along.
        if (call.cancelled) {
          cancel();
          return;
        }
        // A client that goes away before the end cancels its request.
        stream(scheduler, reqId, 0, call, interval, open, undefined, cancel);
      },
      Session: (call: grpc.ServerDuplexStream<SessionRequest__Output, SessionResponse>) =>
        asTenant(call, (tenant) => session(scheduler, call, interval, sessions, open, tenant)),
      Watch: (call: grpc.ServerWritableStream<WatchRequest__Output, WatchResponse>) =>
        asTenant(call, (tenant) => stream(scheduler, call.request.reqId, call.request.afterSequence ?? 0, call, interval, open, tenant)),
    },
  };

  function listModels(): ListModelsResponse {
    return {
      models: registry.entries.map((e) => ({
        ...modelAvailability({ instances: (pool) => scheduler.servingInstances(pool) }, e),
        name: e.model ?? e.pattern ?? '',
        pattern: e.model === undefined,
        modalities: e.modalities.map((m) => MODALITY[m]),
        plan: planToWire({ model: e.model ?? e.pattern ?? '', stages: e.stages.map((s) => ({ ...s })) }),
        defaults: paramsToWire({
          width: e.defaults.width,
          height: e.defaults.height,
          numFrames: e.defaults.numFrames,
          numInferenceSteps: e.defaults.steps,
          guidanceScale: e.defaults.guidanceScale,
          fps: e.defaults.fps,
          // A model that takes an input image: the strength a request with one gets by default.
          ...(e.modalities.some((m) => IMAGE_MODALITIES.includes(m)) ? { strength: e.defaults.strength ?? DEFAULT_STRENGTH } : {}),
          // Step caching the plan turns on for the model's requests (absent: off).
          ...(e.defaults.stepCache && e.defaults.stepCache.threshold > 0 ? { stepCache: e.defaults.stepCache } : {}),
        }),
      })),
    };
  }
}

/**
 * Writes a server stream's messages in batches: what was added since the last message goes
 * together, at most one message per `intervalMs` (see {@link StreamOptions.eventIntervalMs}),
 * and never in the turn of the event loop that added it, so the stage dispatch an event
 * announces goes out first. An `urgent` item (an answer, a request's end) goes out on the
 * next turn. A client that reads slowly gets what piled up in one message after `drain`.
 */
class BatchWriter<T> {
  private pending: T[] = [];
  private urgent = false;
  private ending = false;
  /** The call ends with this error instead of OK. */
  private failure: DiffmeshError | undefined;
  private done = false;
  private draining = false;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private lastWrite = -Infinity;

  constructor(
    private readonly call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>,
    private readonly intervalMs: number,
    private readonly encode: (items: T[]) => Buffer,
  ) {}

  add(item: T, urgent = false): void {
    if (this.done) return;
    this.pending.push(item);
    if (urgent) this.urgent = true;
    this.schedule();
  }

  /** Ends the call once everything added so far is written. */
  end(): void {
    if (this.done) return;
    this.ending = true;
    this.urgent = true;
    this.schedule();
  }

  /** Ends the call with `error` once everything added so far is written (unless it is ending already). */
  fail(error: DiffmeshError): void {
    if (this.done || this.ending) return;
    this.failure = error;
    this.end();
  }

  /** Writes nothing more (the client is gone). */
  stop(): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
  }

  get ended(): boolean {
    return this.done;
  }

  private schedule(): void {
    if (this.immediate || this.draining) return;
    const wait = this.urgent ? 0 : this.lastWrite + this.intervalMs - performance.now();
    if (wait > 0) {
      this.timer ??= setTimeout(this.flush, wait);
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.immediate = setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.timer = undefined;
    this.immediate = undefined;
    if (this.done || this.draining) return;
    this.urgent = false;
    if (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      this.lastWrite = performance.now();
      if (!this.call.write(preEncoded(this.encode(batch)))) {
        this.draining = true;
        this.call.once('drain', () => {
          this.draining = false;
          if (this.ending) this.urgent = true;
          if (this.pending.length > 0 || this.ending) this.schedule();
        });
        return;
      }
    }
    if (this.ending) {
      this.done = true;
      if (this.failure) this.call.emit('error', toWire(this.failure));
      else this.call.end();
    }
  };
}

/**
 * Streams a request's events on a call (Generate, Watch): those after sequence `after`, then
 * live ones, then the end; the request's end is written at once. `onGone` runs when the
 * client leaves before the end.
 */
function stream(
  scheduler: Scheduler,
  reqId: string,
  after: number,
  call: grpc.ServerWritableStream<unknown, { events: WireRequestEvent[] }>,
  intervalMs: number,
  open: Set<(error: DiffmeshError) => void>,
  scope?: Tenant,
  onGone?: () => void,
): void {
  const writer = new BatchWriter<WireRequestEvent>(call, intervalMs, (events) => eventMessages.encodeReady({ events }));
  let stop: (() => void) | undefined;
  let gone = false;
  const end = (error: DiffmeshError): void => {
    open.delete(end);
    stop?.();
    writer.fail(error);
  };
  open.add(end);
  // grpc-js also reports a call it ended normally as cancelled: only one cut short counts.
  call.on('cancelled', () => {
    open.delete(end);
    if (writer.ended) return;
    gone = true;
    writer.stop();
    stop?.();
    onGone?.();
  });
  let id: string;
  try {
    id = requireId(reqId);
  } catch (err) {
    call.emit('error', toWire(err));
    return;
  }
  follow(
    scheduler,
    id,
    after,
    (event, last) => writer.add(event, last),
    () => {
      open.delete(end);
      writer.end();
    },
    scope,
  ).then(
    (s) => {
      stop = s;
      if (gone) s();
    },
    (err: unknown) => call.emit('error', toWire(err)),
  );
}

/**
 * Follows a request's events as wire events (those after sequence `after`, then live ones);
 * `end` marks the last. Resolves with a function that stops following.
 */
function follow(
  scheduler: Scheduler,
  reqId: string,
  after: number,
  item: (event: WireRequestEvent, end: boolean) => void,
  close: () => void,
  scope?: Tenant,
): Promise<() => void> {
  return scheduler.listen(
    reqId,
    after,
    {
      item: (e, sequence, state) => {
        const end = e.type === 'completed' || e.type === 'failed' || e.type === 'cancelled';
        item(eventToWire(e, sequence, e.type === 'completed' || e.type === 'stage_finished' ? state : undefined), end);
      },
      close,
    },
    scope,
  );
}

/** Cancels a request whose client went away, unless this scheduler is shutting down. */
function cancelQuietly(scheduler: Scheduler, reqId: string): void {
  if (scheduler.requests.durable && scheduler.state !== 'RUNNING') return;
  scheduler.cancel(reqId).catch(() => {
    // already finished and gone
  });
}

type SessionItem = { answer: SessionAnswer; event?: undefined } | { event: WireRequestEvent; answer?: undefined };

function encodeSession(items: SessionItem[]): Buffer {
  const answers: SessionAnswer[] = [];
  const events: WireRequestEvent[] = [];
  for (const i of items) {
    if (i.answer) answers.push(i.answer);
    else if (i.event) events.push(i.event);
  }
  return sessionMessages.encodeReady({ answers, events });
}

/**
 * The Session RPC: many requests on one stream. Each `generate` is submitted and answered
 * with its request id (or its error), then its events follow; each `cancel` is answered with
 * the request's status. Ends after the client's half-close once every followed request has
 * ended; a client that goes away cancels its unfinished requests.
 */
function session(
  scheduler: Scheduler,
  call: grpc.ServerDuplexStream<SessionRequest__Output, SessionResponse>,
  intervalMs: number,
  sessions: Set<() => void>,
  streams: Set<(error: DiffmeshError) => void>,
  tenant: Tenant,
): void {
  const writer = new BatchWriter<SessionItem>(call, intervalMs, encodeSession);
  const open = new Map<string, () => void>();
  let halfClosed = false;
  const halfClose = (): void => {
    halfClosed = true;
    endIfIdle();
  };
  sessions.add(halfClose);
  // The scheduler drained with requests of this session unfinished (they go on elsewhere).
  const fail = (error: DiffmeshError): void => {
    streams.delete(fail);
    sessions.delete(halfClose);
    halfClosed = true;
    for (const stop of open.values()) stop();
    open.clear();
    writer.fail(error);
  };
  streams.add(fail);
  // An acceptance rides with the request's next events (at once on a quiet stream, else
  // with the next batch); a refusal is the end of its request and goes out at once.
  const answer = (a: SessionAnswer): void => writer.add({ answer: a }, a.error !== undefined);
  /** Requests being admitted (an input image checked and stored, the request stored): answered before the session ends. */
  let admitting = 0;
  const endIfIdle = (): void => {
    if (halfClosed && open.size === 0 && admitting === 0) {
      sessions.delete(halfClose);
      streams.delete(fail);
      writer.end();
    }
  };
  call.on('data', async (msg: SessionRequest__Output) => {
    const tag = msg.tag;
    // Counted until answered: the session does not end before its requests are answered.
    admitting += 1;
    try {
      if (msg.generate) {
        // A session told to end (endSessions: the scheduler drains) may end before it could
        // answer or follow another request: refuse it rather than run it unseen.
        if (halfClosed) {
          throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down; this session takes no new requests', {
            retryAfterMs: 1000,
          });
        }
        const traceContext = Object.keys(msg.traceContext).length > 0 ? msg.traceContext : traceContextFromMetadata(call.metadata);
        const reqId = (await submit(scheduler, msg.generate, traceContext, tenant)).context.reqId;
        // The client went away while the request was being stored: its request goes too.
        if (writer.ended) {
          cancelQuietly(scheduler, reqId);
          return;
        }
        answer({ tag, reqId });
        // A request id sent twice in one session is followed once.
        if (open.has(reqId)) return;
        let closed = false;
        open.set(reqId, () => undefined);
        const stop = await follow(
          scheduler,
          reqId,
          0,
          (event, end) => writer.add({ event }, end),
          () => {
            closed = true;
            open.delete(reqId);
            endIfIdle();
          },
        );
        if (!closed && open.has(reqId)) open.set(reqId, stop);
        else if (!closed) stop();
      } else if (msg.cancel) {
        const reqId = requireId(msg.cancel.reqId);
        answer({ tag, reqId, status: requestStatusToWire((await scheduler.cancel(reqId, tenant)).context.status) });
      } else {
        throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'action: a session message needs generate or cancel', {
          metadata: { field: 'action' },
        });
      }
    } catch (err) {
      answer({ tag, error: errorDetailToWire(err) });
    } finally {
      admitting -= 1;
      endIfIdle();
    }
  });
  call.on('end', halfClose);
  call.on('error', () => {
    // The client's side broke; 'cancelled' follows and cleans up.
  });
  call.on('cancelled', () => {
    sessions.delete(halfClose);
    streams.delete(fail);
    if (writer.ended) return;
    writer.stop();
    for (const [reqId, stop] of open) {
      stop();
      cancelQuietly(scheduler, reqId);
    }
    open.clear();
  });
}

async function hasRequest(scheduler: Scheduler, id: string, scope: Tenant): Promise<boolean> {
  try {
    await scheduler.get(id, scope);
    return true;
  } catch {
    return false;
  }
}

function requireId(id: string): string {
  if (!id) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'req_id: is required', { metadata: { field: 'req_id' } });
  }
  return id;
}

/** The parts of a call that carry the caller's credentials. */
type CallWithCredentials = Pick<grpc.ServerUnaryCall<unknown, unknown>, 'metadata' | 'getAuthContext'>;

function unary<Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Res | Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, cb) => {
    try {
      const res = fn(call.request, call);
      if (res instanceof Promise)
        res.then(
          (r) => cb(null, r),
          (err: unknown) => cb(toWire(err)),
        );
      else cb(null, res);
    } catch (err) {
      cb(toWire(err));
    }
  };
}

/** Submits a client's request, storing its input image first when it has one. */
function submit(
  scheduler: Scheduler,
  req: SubmitRequest__Output | GenerateRequest__Output,
  traceContext: Record<string, string>,
  tenant: Tenant,
): Promise<RequestState> {
  const request = fromWireRequest(req, traceContext);
  if (tenant.name !== DEFAULT_TENANT) request.tenant = tenant.name;
  return submitWithInputImage(scheduler, request, inputImageFromWire(req.params));
}

/** A client's request; its W3C trace context (`traceparent`/`tracestate` metadata) makes the request's trace a child of the client's span. */
function fromWireRequest(req: SubmitRequest__Output | GenerateRequest__Output, traceContext: Record<string, string>): GenerateRequest {
  if (!req.model) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'model: is required', { metadata: { field: 'model' } });
  }
  const params = paramsInputFromWire(req.params);
  return {
    model: req.model,
    params: { ...params, prompt: params.prompt ?? '' },
    priority: req.priority,
    ...(req.timeoutMs > 0 ? { timeoutMs: req.timeoutMs } : {}),
    ...(req.requestId ? { requestId: req.requestId } : {}),
    // Checked at admission (a time in the past, or past the longest timeout, is refused naming the field).
    ...(req.deadline ? { deadline: timestampFromWire(req.deadline) } : {}),
    traceContext,
  };
}

function timingToWire(t: StageTiming): WireStageTiming {
  return {
    stageIndex: t.stageIndex,
    stage: stageNameToWire(t.stage),
    pool: t.pool,
    instanceId: t.instanceId,
    attempt: t.attempts,
    ...(t.queuedAt ? { enqueuedAt: timestampToWire(t.queuedAt) } : {}),
    ...(t.startedAt ? { startedAt: timestampToWire(t.startedAt) } : {}),
    ...(t.finishedAt ? { finishedAt: timestampToWire(t.finishedAt) } : {}),
  };
}

/** Media type of a result: raw RGB frames until the encoders move into the stages. */
function mediaType(state: RequestState): string {
  const px = state.result.pixels;
  return px ? `application/x-diffmesh-rgb24; frames=${px.shape[0]}; height=${px.shape[1]}; width=${px.shape[2]}` : '';
}

/** The error a failed request recorded, on the wire. */
function requestErrorToWire(state: RequestState): WireErrorDetail | undefined {
  const error = state.context.error;
  if (!error) return undefined;
  return errorDetailToWire(
    new DiffmeshError(parseCode(error.code), error.reason as Reason, error.message, {
      metadata: error.field ? { field: error.field } : {},
    }),
  );
}

function poolToWire(p: PoolView): PoolStatus {
  return {
    pool: p.pool,
    ...(p.stage ? { stage: stageNameToWire(p.stage) } : {}),
    queued: p.queued,
    instances: p.instances.map((i) => ({
      id: i.instance.id,
      version: i.instance.version,
      nodeId: i.instance.nodeId,
      address: i.instance.address ?? '',
      capacity: i.instance.capacity,
      active: i.active,
      breaker: i.breaker ? BREAKER[i.breaker] : 'BREAKER_STATE_UNSPECIFIED',
      available: i.available,
      models: [...i.instance.models],
    })),
  };
}

function recentToWire(state: RequestState): RecentRequest {
  const ctx = state.context;
  const prompt = [...(ctx.params.prompt ?? '')];
  const error = requestErrorToWire(state);
  return {
    reqId: ctx.reqId,
    model: ctx.model,
    status: requestStatusToWire(ctx.status),
    createdAt: timestampToWire(ctx.createdAt),
    updatedAt: timestampToWire(ctx.updatedAt),
    timings: state.timings.map(timingToWire),
    // Cut by code points, so a character is never split.
    prompt: prompt.length > STATUS_PROMPT_CHARS ? prompt.slice(0, STATUS_PROMPT_CHARS).join('') : prompt.join(''),
    step: state.step,
    totalSteps: state.totalSteps,
    ...(error ? { error } : {}),
  };
}

/** GetStatus: the scheduler's pools and its latest requests. */
export async function statusResponse(scheduler: Scheduler, identity: SchedulerIdentity, scope?: Tenant): Promise<GetStatusResponse> {
  const pools = await scheduler.pools();
  return {
    schedulerId: identity.instanceId,
    version: identity.version,
    inFlight: scheduler.inFlightCount(),
    pools: pools.map(poolToWire),
    recentRequests: scheduler.recentRequests(scope).map(recentToWire),
    time: timestampToWire(Date.now()),
  };
}

export function getResponse(state: RequestState): SchedulerGetResponse {
  const ctx = state.context;
  const stage = ctx.executionPlan.stages[ctx.currentStageIndex];
  return {
    reqId: ctx.reqId,
    model: ctx.model,
    status: requestStatusToWire(ctx.status),
    executionPlan: planToWire(ctx.executionPlan),
    currentStageIndex: ctx.currentStageIndex,
    ...(stage ? { currentStage: stageNameToWire(stage.name) } : {}),
    step: state.step,
    totalSteps: state.totalSteps,
    timings: state.timings.map(timingToWire),
    results: Object.values(state.result).map(objectRefToWire),
    mediaType: mediaType(state),
    ...(ctx.error ? { error: requestErrorToWire(state) } : {}),
    createdAt: timestampToWire(ctx.createdAt),
    updatedAt: timestampToWire(ctx.updatedAt),
  };
}

export function eventToWire(e: RequestEvent, sequence: number, state?: RequestState): WireRequestEvent {
  const base = { reqId: e.reqId, time: timestampToWire(e.at), sequence };
  switch (e.type) {
    case 'queued':
      return { ...base, queued: { pool: e.pool, position: e.position, stageIndex: e.stageIndex, stage: stageNameToWire(e.stage) } };
    case 'stage_started':
      return {
        ...base,
        stageStarted: {
          stageIndex: e.stageIndex,
          stage: stageNameToWire(e.stage),
          pool: e.pool,
          instanceId: e.instanceId,
          attempt: e.attempt,
        },
      };
    case 'progress':
      return {
        ...base,
        stepProgress: { stageIndex: e.stageIndex, stage: stageNameToWire(e.stage), step: e.step, totalSteps: e.totalSteps },
      };
    case 'stage_finished': {
      const t = state?.timings.find((x) => x.stageIndex === e.stageIndex);
      return {
        ...base,
        stageFinished: {
          timing: t ? timingToWire(t) : { stageIndex: e.stageIndex, stage: stageNameToWire(e.stage) },
          outputs: objectRefsToWire(e.outputs),
          warnings: e.warnings ?? [],
        },
      };
    }
    case 'completed':
      return {
        ...base,
        completed: {
          results: Object.values(e.outputs).map(objectRefToWire),
          mediaType: state ? mediaType(state) : '',
          timings: state ? state.timings.map(timingToWire) : [],
        },
      };
    case 'failed':
      return {
        ...base,
        failed: {
          error: errorDetailToWire(
            new DiffmeshError(e.error.code, e.error.reason as Reason, e.error.message, {
              metadata: e.error.field ? { field: e.error.field } : {},
            }),
          ),
        },
      };
    case 'cancelled':
      return { ...base, cancelled: { reason: 'cancelled' } };
    case 'preview':
      return {
        ...base,
        preview: {
          stageIndex: e.stageIndex,
          stage: stageNameToWire(e.stage),
          step: e.step,
          totalSteps: e.totalSteps,
          mediaType: e.mediaType,
          data: Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength),
          width: e.width,
          height: e.height,
        },
      };
    case 'preempted':
      return {
        ...base,
        preempted: {
          stageIndex: e.stageIndex,
          stage: stageNameToWire(e.stage),
          pool: e.pool,
          instanceId: e.instanceId,
          attempt: e.attempt,
          step: e.step,
          totalSteps: e.totalSteps,
          reason: e.reason,
        },
      };
  }
}
