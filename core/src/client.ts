/**
 * `@diffmesh/core/client`: the light part of core, for processes that call a mesh rather than
 * serve one (the CLI's remote commands, `@diffmesh/client`, libraries that only need the error
 * model). The error model and its wire forms, the domain types and their wire conversion,
 * generation-parameter limits and seeds, request events, gRPC channel options and client
 * credentials, the logger and trace-context propagation. It loads no config schemas (zod), no
 * telemetry SDK, metrics, servers, breakers or tenants: those stay in the full index
 * (`@diffmesh/core`), which exports everything here too.
 */
export { Cancellation } from './abort.js';
export {
  asDiffmeshError,
  cancelled,
  Code,
  DiffmeshError,
  invalidParameter,
  isRetryableCode,
  REASONS,
  unknownModel,
} from './errors/errors.js';
export type { DiffmeshErrorOptions, Reason } from './errors/errors.js';
export { globToRegExp, STAGE_INPUTS, STAGE_NAMES } from './execution-plan.js';
export type { ExecutionPlan, PlanStage, StageInput, StageName } from './execution-plan.js';
export {
  ADAPTER_NAME_PATTERN,
  DEFAULT_ADAPTER_SCALE,
  DEFAULT_PREVIEW_SIDE,
  DEFAULT_STEP_CACHE_MAX_SKIPPED,
  DEFAULT_STRENGTH,
  MAX_ADAPTER_SCALE,
  MAX_ADAPTERS,
  MAX_FPS,
  MAX_PREVIEW_SIDE,
  MAX_PROMPT_LENGTH,
  MAX_SEED,
  MAX_STEPS,
  MIN_FPS,
  MIN_PREVIEW_SIDE,
  MIN_STEPS,
  randomSeed,
} from './generation-params.js';
export type { AdapterParams, GenerationParams, PreviewParams, StepCacheParams } from './generation-params.js';
export { channelOptions, clientCredentials, loadTlsFiles, MAX_MESSAGE_BYTES } from './grpc/channel.js';
export type { TlsFileSettings, TlsFiles } from './grpc/channel.js';
export { createLogger, DEFAULT_REDACT_PATHS, LOG_FORMATS, LOG_LEVELS, silentLogger, withContext } from './logging/logger.js';
export type { LogContext, LogFormat, Logger, LoggerOptions, LogLevel } from './logging/logger.js';
export type { Dtype, ObjectRef } from './object-ref.js';
export type { RequestContext, RequestStatus } from './request-context.js';
export { isTerminal } from './request-event.js';
export type { RequestEvent } from './request-event.js';
export { extractTraceContext, injectTraceContext, TRACE_CONTEXT_KEYS, traceMetadata } from './telemetry/propagation.js';
export {
  dtypeFromWire,
  DTYPES,
  dtypeToWire,
  inputImageFromWire,
  objectRefFromWire,
  objectRefsFromWire,
  objectRefsToWire,
  objectRefToWire,
  paramsFromWire,
  paramsInputFromWire,
  paramsToWire,
  planFromWire,
  planStageFromWire,
  planStageToWire,
  planToWire,
  REQUEST_STATUSES,
  requestContextFromWire,
  requestContextToWire,
  requestStatusFromWire,
  requestStatusToWire,
  stageNameFromWire,
  stageNameToWire,
  timestampFromWire,
  timestampToWire,
} from './wire/convert.js';
export type { InputImageSource } from './wire/convert.js';
export {
  codeName,
  ERROR_DOMAIN,
  ERROR_HEADERS,
  errorDetailFromWire,
  errorDetailToWire,
  fromHeaders,
  fromWire,
  parseCode,
  reasonForCode,
  reasonFromWire,
  reasonToWire,
  STATUS_DETAILS_KEY,
  toHeaders,
  toWire,
  TRANSPORT_REASON,
} from './wire/errors.js';
export type { HeaderSource } from './wire/errors.js';
