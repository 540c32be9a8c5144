/**
 * The scheduler's API on the wire: a client's request read, and requests, events, pools and
 * models written as `diffmesh.scheduler.v1` messages.
 */
import {
  type GenerateRequest__Output,
  type GetStatusResponse,
  type ListModelsResponse,
  type RequestEvent as WireRequestEvent,
  type SchedulerGetResponse,
  type StageTiming as WireStageTiming,
  type SubmitRequest__Output,
  type ErrorDetail as WireErrorDetail,
  type PoolStatus,
  type RecentRequest,
} from '@diffmesh/protos';
import {
  Code,
  DEFAULT_STRENGTH,
  DEFAULT_TENANT,
  DiffmeshError,
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
  type Reason,
  type RequestEvent,
  type Tenant,
} from '@diffmesh/core';
import { submitWithInputImage } from './input-image.js';
import { type PlanRegistry } from './plans/registry.js';
import { IMAGE_MODALITIES, type Modality } from './plans/schema.js';
import type { PoolView, Scheduler } from './scheduler.js';
import type { GenerateRequest, RequestState, StageTiming } from './types.js';
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

export function requireId(id: string): string {
  if (!id) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'req_id: is required', { metadata: { field: 'req_id' } });
  }
  return id;
}

/** Submits a client's request, storing its input image first when it has one. */
export function submit(
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
      return { ...base, failed: { error: failureToWire(e.error) } };
    case 'cancelled':
      return { ...base, cancelled: { reason: 'cancelled' } };
    case 'preview':
      return { ...base, preview: previewToWire(e) };
    case 'preempted':
      return { ...base, preempted: preemptedToWire(e) };
  }
}

/** ListModels: the plan registry's entries, with whether each model is ready here. */
export function listModelsResponse(scheduler: Scheduler, registry: PlanRegistry): ListModelsResponse {
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

/** A `failed` event's error on the wire. */
function failureToWire(error: Extract<RequestEvent, { type: 'failed' }>['error']): WireErrorDetail {
  return errorDetailToWire(
    new DiffmeshError(error.code, error.reason as Reason, error.message, { metadata: error.field ? { field: error.field } : {} }),
  );
}

function previewToWire(e: Extract<RequestEvent, { type: 'preview' }>): NonNullable<WireRequestEvent['preview']> {
  return {
    stageIndex: e.stageIndex,
    stage: stageNameToWire(e.stage),
    step: e.step,
    totalSteps: e.totalSteps,
    mediaType: e.mediaType,
    data: Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength),
    width: e.width,
    height: e.height,
  };
}

function preemptedToWire(e: Extract<RequestEvent, { type: 'preempted' }>): NonNullable<WireRequestEvent['preempted']> {
  return {
    stageIndex: e.stageIndex,
    stage: stageNameToWire(e.stage),
    pool: e.pool,
    instanceId: e.instanceId,
    attempt: e.attempt,
    step: e.step,
    totalSteps: e.totalSteps,
    reason: e.reason,
  };
}
