/**
 * @diffmesh/core: what every diffmesh process shares. Domain types (ObjectRef,
 * ExecutionPlan, GenerationParams, RequestContext, RequestEvent, the stage contract), the
 * error model and its wire forms, configuration, logging, telemetry, gRPC helpers and
 * breakers, cancellation, the metrics endpoint and process lifecycle. No ONNX, no NATS, no
 * media.
 */
export { Cancellation } from './abort.js';
export { ConfigError, defineConfig, formatConfigTable, formatIssue, listEnvVars, listFlags, loadConfig } from './config/config.js';
export type { ConfigDefinition, ConfigIssue, ConfigSource, ConfigSpec, EnvVarInfo, FlagInfo, LoadConfigOptions } from './config/config.js';
export { configArgs, kebabCase, schemaMappings, upperSnakeCase } from './config/config-fields.js';
export type { ConfigMappings, FieldNames } from './config/config-fields.js';
export type { ConfigPath, ConfigValues } from './config/config-paths.js';
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
export { advertisedAddress, hostOf, isWildcardHost } from './grpc/advertise.js';
export type { AdvertiseInput } from './grpc/advertise.js';
export { countsForBreaker, createBreaker } from './grpc/breaker.js';
export type { BreakerOptions, CircuitBreaker } from './grpc/breaker.js';
export {
  channelOptions,
  clientCredentials,
  loadTlsFiles,
  MAX_MESSAGE_BYTES,
  serverCredentials,
  tlsConfigMappings,
  TlsConfigSchema,
} from './grpc/options.js';
export type { TlsConfig, TlsFileSettings, TlsFiles } from './grpc/options.js';
export { IDENTITY_URI_PREFIX, certificateIdentity, peerIdentity } from './grpc/peer-identity.js';
export type { CallWithAuthContext } from './grpc/peer-identity.js';
export { GrpcServer } from './grpc/server.js';
export { HealthChecker } from './grpc/health-client.js';
export type { HealthStatus } from './grpc/health-client.js';
export {
  REFLECTION_SERVICE_NAMES,
  ReflectionService,
  defaultDescriptorRegistry,
  type ReflectionServiceOptions,
} from './grpc/reflection.js';
export { MalformedRequest, malformedRequestError } from './grpc/request-decoding.js';
export { MAX_REPEATED_ELEMENTS, MAX_WIRE_DEPTH, checkWire, type WireProblem } from './grpc/wire-check.js';
export type { GrpcServerOptions, ServiceBinding } from './grpc/server.js';
export {
  createLogger,
  DEFAULT_REDACT_PATHS,
  LOG_LEVELS,
  LOG_FORMATS,
  silentLogger,
  traceFieldsFromTraceparent,
  withContext,
} from './logging/logger.js';
export { LogConfigSchema, logConfigMappings, LogLevelSchema } from './logging/log-config.js';
export { redactUri } from './logging/redact-uri.js';
export type { LogContext, LogFormat, Logger, LoggerOptions, LogLevel } from './logging/logger.js';
export type { LogConfig } from './logging/log-config.js';
export { startMetricsEndpoint } from './metrics-endpoint.js';
export type { MetricsEndpoint, MetricsSource } from './metrics-endpoint.js';
export type { Dtype, ObjectRef } from './object-ref.js';
export { loadServiceConfig, packageVersion, runProcess } from './process.js';
export type { RunProcessOptions } from './process.js';
export type { RequestContext, RequestStatus } from './request-context.js';
export { isTerminal } from './request-event.js';
export type { RequestEvent } from './request-event.js';
export type { AdapterReport, StageContext, StageHandler, StagePreview, StageProgress, StageResult, StageTask } from './stage-task.js';
export { preemptedError } from './stage-task.js';
export { OTLP_PROTOCOLS, resolveTelemetrySettings } from './telemetry/config.js';
export type { OtlpProtocol, TelemetrySettings } from './telemetry/config.js';
export {
  contextFromMetadata,
  extractTraceContext,
  injectTraceContext,
  TRACE_CONTEXT_KEYS,
  traceContextFromMetadata,
  traceMetadata,
} from './telemetry/propagation.js';
export {
  ATTR,
  diffmeshTracer,
  recordError,
  SPAN,
  SpanKind,
  spanLogFields,
  stageExecuteAttributes,
  traceLogFields,
  TRACER_NAME,
  withSpan,
} from './telemetry/spans.js';
export type { Attributes, Context as OtelContext, Span, Tracer, WithSpanOptions } from './telemetry/spans.js';
export { startTelemetry } from './telemetry/telemetry.js';
export type { Telemetry, TelemetryOptions } from './telemetry/telemetry.js';
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
export { taskFromWire, taskToWire } from './wire/task.js';
export { apiKeyHash, apiKeyOf, callCredentials, DEFAULT_TENANT, OPEN_TENANT, TenantDirectory } from './tenants/index.js';
export type { CallCredentials, Tenant, TenantLimits } from './tenants/index.js';
