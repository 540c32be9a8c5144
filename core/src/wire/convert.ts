/**
 * Conversions between the domain types (domain.ts) and the generated wire messages
 * (diffmesh.common.v1). `…ToWire` returns a message ready for a gRPC call or an encoder;
 * `…FromWire` accepts both what a call delivers (`__Output`) and what `…ToWire` built.
 * `…ToWire` builds messages in the encoder's own form, so hot paths can encode them without
 * conversion (`MessageCodec.encodeReady`): enums as numbers, 64-bit integers as decimal
 * strings, times as google.protobuf.Timestamp with numeric seconds (domain: milliseconds
 * since the epoch). Decoded messages carry enums by name.
 */
import type {
  Dtype as WireDtype,
  ExecutionPlan as WireExecutionPlan,
  GenerationParams as WireGenerationParams,
  InputImage as WireInputImage,
  ObjectRef as WireObjectRef,
  PlanStage as WirePlanStage,
  RequestContext as WireRequestContext,
  RequestStatus as WireRequestStatus,
  StageName as WireStageName,
  Timestamp,
} from '@diffmesh/protos';
import type { Long } from '@grpc/proto-loader';

import { STAGE_INPUTS, STAGE_NAMES, type ExecutionPlan, type PlanStage, type StageInput, type StageName } from '../execution-plan.js';
import { type Dtype, type ObjectRef } from '../object-ref.js';
import { DEFAULT_ADAPTER_SCALE, DEFAULT_PREVIEW_SIDE, type GenerationParams, type PreviewParams } from '../generation-params.js';
import { type RequestContext, type RequestStatus } from '../request-context.js';
import { Code, DiffmeshError, invalidParameter } from '../errors/index.js';
import { codeName, parseCode, reasonFromWire, reasonForCode, reasonToWire } from './errors.js';

/** Domain dtypes in the order of the wire enum (value 1 first). */
export const DTYPES: readonly Dtype[] = ['float32', 'float16', 'int64', 'int32', 'uint8'];
/** Domain request statuses in the order of the wire enum (value 1 first). */
export const REQUEST_STATUSES: readonly RequestStatus[] = ['pending', 'running', 'completed', 'failed', 'cancelled'];

type Int64 = number | string | Long;

function int64ToNumber(v: Int64 | null | undefined): number {
  if (v === undefined || v === null) return 0;
  return typeof v === 'object' ? v.toNumber() : Number(v);
}

function int64ToString(v: Int64 | null | undefined): string {
  if (v === undefined || v === null) return '0';
  return typeof v === 'object' ? v.toString() : typeof v === 'number' ? String(Math.trunc(v)) : v;
}

/** Durations in ms travel as uint32 (up to ~49 days); larger values saturate. */
function toUint32(n: number): number {
  if (!Number.isFinite(n)) return n > 0 ? 0xffffffff : 0;
  return Math.min(0xffffffff, Math.max(0, Math.round(n)));
}

/** Malformed data from a peer: a contract violation, not a user error. */
function badWire(what: string, value: unknown): DiffmeshError {
  return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `${what}: unsupported value ${JSON.stringify(value)}`, {
    metadata: { field: what },
  });
}

/** Wire enum number of a domain value; `domain` lists the values numbered 1..n (0 = unspecified). */
function enumToWire<T extends string, W>(domain: readonly T[], value: T): W {
  return (domain.indexOf(value) + 1) as W;
}

/** Domain value of a wire enum given by name or number; `domain` lists values 1..n. */
function enumFromWire<T extends string>(prefix: string, domain: readonly T[], value: string | number | null | undefined, field: string): T {
  if (typeof value === 'number') {
    const byNumber = domain[value - 1];
    if (byNumber !== undefined) return byNumber;
  } else if (typeof value === 'string' && value.startsWith(prefix)) {
    const candidate = value.slice(prefix.length).toLowerCase() as T;
    if (domain.includes(candidate)) return candidate;
  }
  throw badWire(field, value);
}

// ---- scalars ----

/** Milliseconds since the epoch → Timestamp. */
export function timestampToWire(ms: number): Timestamp {
  const seconds = Math.floor(ms / 1000);
  const nanos = Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1_000_000));
  // A number, not a string: the encoder takes it without parsing (seconds stay far below 2^53).
  return { seconds, nanos };
}

/** Timestamp → milliseconds since the epoch; 0 when unset. */
export function timestampFromWire(ts: Timestamp | null | undefined): number {
  if (!ts) return 0;
  return int64ToNumber(ts.seconds) * 1000 + (ts.nanos ?? 0) / 1_000_000;
}

/** `float32` → 1 (`DTYPE_FLOAT32`). */
export function dtypeToWire(dtype: Dtype): WireDtype {
  return enumToWire<Dtype, WireDtype>(DTYPES, dtype);
}

/** `DTYPE_FLOAT32` (or 1) → `float32`; throws on UNSPECIFIED or unknown values. */
export function dtypeFromWire(dtype: WireDtype | null | undefined): Dtype {
  return enumFromWire('DTYPE_', DTYPES, dtype, 'dtype');
}

/** `text_encoding` → 1 (`STAGE_NAME_TEXT_ENCODING`). */
export function stageNameToWire(name: StageName): WireStageName {
  return enumToWire<StageName, WireStageName>(STAGE_NAMES, name);
}

/** `STAGE_NAME_TEXT_ENCODING` (or 1) → `text_encoding`; throws on UNSPECIFIED or unknown values. */
export function stageNameFromWire(name: WireStageName | null | undefined): StageName {
  return enumFromWire('STAGE_NAME_', STAGE_NAMES, name, 'stage');
}

/** `pending` → 1 (`REQUEST_STATUS_PENDING`). */
export function requestStatusToWire(status: RequestStatus): WireRequestStatus {
  return enumToWire<RequestStatus, WireRequestStatus>(REQUEST_STATUSES, status);
}

/** `REQUEST_STATUS_PENDING` (or 1) → `pending`; throws on UNSPECIFIED or unknown values. */
export function requestStatusFromWire(status: WireRequestStatus | null | undefined): RequestStatus {
  return enumFromWire('REQUEST_STATUS_', REQUEST_STATUSES, status, 'status');
}

// ---- messages ----

export function objectRefToWire(ref: ObjectRef): WireObjectRef {
  return {
    objectId: ref.objectId,
    ownerAddress: ref.ownerAddress,
    ownerNodeId: ref.ownerNodeId,
    shape: ref.shape.map((d) => int64ToString(d)),
    dtype: dtypeToWire(ref.dtype),
    sizeBytes: int64ToString(ref.sizeBytes),
    createdAt: timestampToWire(ref.createdAt),
    name: ref.name,
    ttlMs: toUint32(ref.ttlMs),
    checksum: ref.checksum,
    ...(ref.inlineData && ref.inlineData.length > 0
      ? { inlineData: Buffer.from(ref.inlineData.buffer, ref.inlineData.byteOffset, ref.inlineData.byteLength) }
      : {}),
    ...(ref.durableUri ? { durableUri: ref.durableUri } : {}),
    ...(ref.capability ? { capability: ref.capability } : {}),
  };
}

export function objectRefFromWire(ref: WireObjectRef): ObjectRef {
  return {
    objectId: ref.objectId ?? '',
    ownerAddress: ref.ownerAddress ?? '',
    ownerNodeId: ref.ownerNodeId ?? '',
    shape: (ref.shape ?? []).map((d) => int64ToNumber(d)),
    dtype: dtypeFromWire(ref.dtype),
    sizeBytes: int64ToNumber(ref.sizeBytes),
    createdAt: timestampFromWire(ref.createdAt),
    name: ref.name ?? '',
    ttlMs: ref.ttlMs ?? 0,
    checksum: ref.checksum ?? '',
    ...(ref.inlineData && ref.inlineData.length > 0 ? { inlineData: new Uint8Array(ref.inlineData as Uint8Array) } : {}),
    ...(ref.durableUri ? { durableUri: ref.durableUri } : {}),
    ...(ref.capability ? { capability: ref.capability } : {}),
  };
}

/** A name → ref map (RequestContext.refs, Task.inputs, TaskResult.outputs). */
export function objectRefsToWire(refs: Readonly<Record<string, ObjectRef>>): Record<string, WireObjectRef> {
  return Object.fromEntries(Object.entries(refs).map(([k, v]) => [k, objectRefToWire(v)]));
}

export function objectRefsFromWire(refs: Readonly<Record<string, WireObjectRef>> | null | undefined): Record<string, ObjectRef> {
  return Object.fromEntries(Object.entries(refs ?? {}).map(([k, v]) => [k, objectRefFromWire(v)]));
}

export function planStageToWire(stage: PlanStage): WirePlanStage {
  return {
    name: stageNameToWire(stage.name),
    pool: stage.pool,
    ...(stage.version !== undefined ? { version: stage.version } : {}),
    ...(stage.requires !== undefined ? { requires: stage.requires } : {}),
  };
}

export function planStageFromWire(stage: WirePlanStage): PlanStage {
  const out: PlanStage = { name: stageNameFromWire(stage.name), pool: stage.pool ?? '' };
  // proto3 `optional`: present (even empty) only when it was set.
  if (stage.version !== undefined && stage.version !== null) out.version = stage.version;
  if (stage.requires !== undefined && stage.requires !== null) {
    if (!STAGE_INPUTS.includes(stage.requires as StageInput)) throw badWire('requires', stage.requires);
    out.requires = stage.requires as StageInput;
  }
  return out;
}

export function planToWire(plan: ExecutionPlan): WireExecutionPlan {
  return { model: plan.model, stages: plan.stages.map(planStageToWire) };
}

export function planFromWire(plan: WireExecutionPlan | null | undefined): ExecutionPlan {
  return { model: plan?.model ?? '', stages: (plan?.stages ?? []).map(planStageFromWire) };
}

/** The input image of a request, as it came on the wire: bytes, or a ref to bytes in a tensor service. */
export type InputImageSource = { kind: 'ref'; ref: ObjectRef } | { kind: 'data'; data: Uint8Array; mediaType: string };

/**
 * Generation parameters → wire. Fields left undefined stay unset on the wire (the
 * scheduler fills them with the model's defaults), so a client may send a partial set.
 */
export function paramsToWire(params: Partial<GenerationParams>, inputImage?: InputImageSource): WireGenerationParams {
  const out: WireGenerationParams = { prompt: params.prompt ?? '' };
  if (params.negativePrompt !== undefined) out.negativePrompt = params.negativePrompt;
  if (params.width !== undefined) out.width = params.width;
  if (params.height !== undefined) out.height = params.height;
  if (params.numFrames !== undefined) out.numFrames = params.numFrames;
  if (params.numInferenceSteps !== undefined) out.numInferenceSteps = params.numInferenceSteps;
  if (params.guidanceScale !== undefined) out.guidanceScale = params.guidanceScale;
  if (params.seed !== undefined) out.seed = params.seed;
  if (params.fps !== undefined) out.fps = params.fps;
  if (params.strength !== undefined) out.strength = params.strength;
  if (params.stepCache !== undefined) {
    const { threshold, maxSkippedSteps } = params.stepCache;
    out.stepCache = { ...(threshold !== undefined ? { threshold } : {}), ...(maxSkippedSteps !== undefined ? { maxSkippedSteps } : {}) };
  }
  if (params.preview !== undefined) out.preview = { everySteps: params.preview.everySteps, maxSide: params.preview.maxSide };
  if (params.adapters !== undefined && params.adapters.length > 0)
    out.adapters = params.adapters.map((a) => ({ name: a.name, scale: a.scale }));
  if (inputImage) out.inputImage = inputImageToWire(inputImage);
  return out;
}

function inputImageToWire(image: InputImageSource): WireInputImage {
  return image.kind === 'ref'
    ? { ref: objectRefToWire(image.ref) }
    : { data: Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength), mediaType: image.mediaType };
}

function optionalNumber(v: number | string | null | undefined): number | undefined {
  return v === undefined || v === null ? undefined : Number(v);
}

/**
 * The parameters a request set, as the scheduler's parameter resolution takes them: unset
 * fields are absent. The input image is read with {@link inputImageFromWire}.
 */
export function paramsInputFromWire(params: WireGenerationParams | null | undefined): Partial<GenerationParams> {
  const p = params ?? {};
  const out: Partial<GenerationParams> = {};
  if (p.prompt !== undefined && p.prompt !== null) out.prompt = p.prompt;
  if (p.negativePrompt !== undefined && p.negativePrompt !== null) out.negativePrompt = p.negativePrompt;
  const numbers = {
    width: optionalNumber(p.width),
    height: optionalNumber(p.height),
    numFrames: optionalNumber(p.numFrames),
    numInferenceSteps: optionalNumber(p.numInferenceSteps),
    guidanceScale: optionalNumber(p.guidanceScale),
    fps: optionalNumber(p.fps),
    strength: optionalNumber(p.strength),
  };
  for (const [k, v] of Object.entries(numbers)) if (v !== undefined) out[k as keyof typeof numbers] = v;
  if (p.seed !== undefined && p.seed !== null) out.seed = int64ToString(p.seed);
  if (p.stepCache !== undefined && p.stepCache !== null) {
    const threshold = optionalNumber(p.stepCache.threshold);
    const maxSkippedSteps = optionalNumber(p.stepCache.maxSkippedSteps);
    out.stepCache = { ...(threshold !== undefined ? { threshold } : {}), ...(maxSkippedSteps !== undefined ? { maxSkippedSteps } : {}) };
  }
  const preview = previewInputFromWire(p.preview);
  if (preview) out.preview = preview;
  if (p.adapters && p.adapters.length > 0) {
    out.adapters = p.adapters.map((a) => ({ name: a.name ?? '', scale: optionalNumber(a.scale) ?? DEFAULT_ADAPTER_SCALE }));
  }
  return out;
}

/**
 * The preview params as a request set them (`everySteps` 0 = off, `maxSide` unset =
 * {@link DEFAULT_PREVIEW_SIDE}); absent when the request set none. The scheduler checks them.
 */
function previewInputFromWire(p: WireGenerationParams['preview']): PreviewParams | undefined {
  if (!p) return undefined;
  return { everySteps: optionalNumber(p.everySteps) ?? 0, maxSide: optionalNumber(p.maxSide) ?? DEFAULT_PREVIEW_SIDE };
}

const PARAM_FIELDS: ReadonlyArray<[keyof GenerationParams, string]> = [
  ['negativePrompt', 'negative_prompt'],
  ['width', 'width'],
  ['height', 'height'],
  ['numFrames', 'num_frames'],
  ['numInferenceSteps', 'num_inference_steps'],
  ['guidanceScale', 'guidance_scale'],
  ['seed', 'seed'],
  ['fps', 'fps'],
];

/**
 * Resolved parameters (a task's, a request context's): every field must be set (`strength`
 * only with an input image). Throws
 * `invalidParameter(<snake_case field>, 'is required')` for the first one missing.
 */
export function paramsFromWire(params: WireGenerationParams | null | undefined): GenerationParams {
  const input = paramsInputFromWire(params);
  for (const [key, field] of PARAM_FIELDS) {
    if (input[key] === undefined) throw invalidParameter(field, 'is required');
  }
  return { prompt: '', ...input } as GenerationParams;
}

/**
 * The input image of a request, if it has one. An image whose `data` is set but empty is
 * INVALID_ARGUMENT naming `input_image.data` (it used to pass as "no image", so that a
 * client that lost its file got a text-only result instead of an error).
 */
export function inputImageFromWire(params: WireGenerationParams | null | undefined): InputImageSource | undefined {
  const image = params?.inputImage;
  if (!image) return undefined;
  if (image.ref) return { kind: 'ref', ref: objectRefFromWire(image.ref) };
  if (image.data !== undefined && image.data !== null) {
    const data = typeof image.data === 'string' ? Buffer.from(image.data, 'base64') : new Uint8Array(image.data);
    if (data.byteLength > 0) return { kind: 'data', data, mediaType: image.mediaType ?? '' };
    if (image.kind === 'data')
      throw invalidParameter('input_image.data', 'is empty (an input image needs its encoded bytes: PNG, JPEG or WebP)');
  }
  return undefined;
}

/** RequestContext.error → wire ErrorDetail (code and reason as enum numbers). */
function contextErrorToWire(error: NonNullable<RequestContext['error']>) {
  return {
    code: parseCode(error.code),
    reason: reasonToWire(error.reason),
    message: error.message,
  };
}

export function requestContextToWire(ctx: RequestContext): WireRequestContext {
  return {
    reqId: ctx.reqId,
    model: ctx.model,
    params: paramsToWire(ctx.params),
    executionPlan: planToWire(ctx.executionPlan),
    currentStageIndex: ctx.currentStageIndex,
    refs: objectRefsToWire(ctx.refs),
    status: requestStatusToWire(ctx.status),
    createdAt: timestampToWire(ctx.createdAt),
    updatedAt: timestampToWire(ctx.updatedAt),
    priority: ctx.priority,
    timeoutMs: toUint32(ctx.timeoutMs),
    retryCount: ctx.retryCount,
    ...(ctx.error ? { error: contextErrorToWire(ctx.error) } : {}),
    traceContext: { ...ctx.traceContext },
    tenant: ctx.tenant ?? '',
    ...(ctx.deadline ? { deadline: timestampToWire(ctx.deadline) } : {}),
  };
}

export function requestContextFromWire(ctx: WireRequestContext): RequestContext {
  const out: RequestContext = {
    reqId: ctx.reqId ?? '',
    model: ctx.model ?? '',
    params: paramsFromWire(ctx.params),
    executionPlan: planFromWire(ctx.executionPlan),
    currentStageIndex: ctx.currentStageIndex ?? 0,
    refs: objectRefsFromWire(ctx.refs),
    status: requestStatusFromWire(ctx.status),
    createdAt: timestampFromWire(ctx.createdAt),
    updatedAt: timestampFromWire(ctx.updatedAt),
    priority: ctx.priority ?? 0,
    timeoutMs: ctx.timeoutMs ?? 0,
    retryCount: ctx.retryCount ?? 0,
    traceContext: { ...(ctx.traceContext ?? {}) },
  };
  if (ctx.tenant) out.tenant = ctx.tenant;
  if (ctx.deadline) out.deadline = timestampFromWire(ctx.deadline);
  if (ctx.error) {
    const code = parseCode(ctx.error.code);
    out.error = {
      code: codeName(code),
      reason: reasonFromWire(ctx.error.reason) ?? reasonForCode(code),
      message: ctx.error.message ?? '',
    };
  }
  return out;
}
