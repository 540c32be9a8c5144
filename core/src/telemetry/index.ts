export { OTLP_PROTOCOLS, resolveTelemetrySettings, telemetrySettingsFromEnv } from './config.js';
export type { OtlpProtocol, TelemetrySettings } from './config.js';
export {
  TRACE_CONTEXT_KEYS,
  contextFromMetadata,
  extractTraceContext,
  injectTraceContext,
  traceContextFromMetadata,
  traceMetadata,
} from './propagation.js';
export { ATTR, SPAN, SpanKind, TRACER_NAME, diffmeshTracer, recordError, spanLogFields, traceLogFields, withSpan } from './spans.js';
export type { Attributes, Context, Span, Tracer, WithSpanOptions } from './spans.js';
export { startTelemetry } from './telemetry.js';
export type { Telemetry, TelemetryOptions } from './telemetry.js';
