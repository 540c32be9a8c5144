import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import type * as OtelApi from '@opentelemetry/api';
import type { Context } from '@opentelemetry/api';
import type * as OtelCore from '@opentelemetry/core';

const require = createRequire(import.meta.url);

/**
 * The OpenTelemetry API and the W3C trace-context propagator, loaded on first use. The
 * propagator is used directly rather than through the global one: the trace context of a
 * request then travels through every hop (gRPC metadata, NATS headers, `traceContext` maps)
 * even in a process whose tracing is off, so one process without an exporter does not cut the
 * trace of the others.
 */
let otel: { api: typeof OtelApi; propagator: OtelCore.W3CTraceContextPropagator } | undefined;

function w3c(): NonNullable<typeof otel> {
  otel ??= {
    api: require('@opentelemetry/api') as typeof OtelApi,
    propagator: new (require('@opentelemetry/core') as typeof OtelCore).W3CTraceContextPropagator(),
  };
  return otel;
}

let apiPath: string | undefined;

/**
 * Whether anything in this process has loaded the OpenTelemetry API. Until something has, no
 * span can be active, so the active context carries no trace context: a client that never
 * traces (the CLI) sends none without loading OpenTelemetry at all.
 */
function otelLoaded(): boolean {
  apiPath ??= require.resolve('@opentelemetry/api');
  return require.cache[apiPath] !== undefined;
}

/** Keys of the W3C trace context: `traceparent`, `tracestate`. */
export const TRACE_CONTEXT_KEYS: readonly string[] = ['traceparent', 'tracestate'];

/**
 * The W3C trace context (`traceparent`, `tracestate`) of `ctx` (default: the active
 * context) as a plain map, for `traceContext` fields, gRPC metadata and NATS headers.
 * Empty when the context holds no valid span.
 */
export function injectTraceContext(ctx?: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  if (ctx === undefined && !otelLoaded()) return carrier;
  const { api, propagator } = w3c();
  propagator.inject(ctx ?? api.context.active(), carrier, api.defaultTextMapSetter);
  return carrier;
}

/**
 * A context whose parent span is the one a carrier names (`traceparent`/`tracestate`, in a
 * plain map with lower-case keys). A missing or malformed `traceparent` yields `base`
 * unchanged: by default the root context, so an incoming message without trace context
 * starts a new trace instead of joining whatever happened to be active.
 */
export function extractTraceContext(carrier: Readonly<Record<string, string | string[] | undefined>> | undefined, base?: Context): Context {
  const { api, propagator } = w3c();
  if (!carrier) return base ?? api.ROOT_CONTEXT;
  return propagator.extract(base ?? api.ROOT_CONTEXT, carrier, api.defaultTextMapGetter);
}

/** The `traceparent`/`tracestate` entries of incoming gRPC metadata. */
export function traceContextFromMetadata(metadata: grpc.Metadata | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!metadata) return out;
  for (const key of TRACE_CONTEXT_KEYS) {
    const v = metadata.get(key)[0];
    if (typeof v === 'string' && v !== '') out[key] = v;
  }
  return out;
}

/** The parent context named by incoming gRPC metadata (root when it names none). */
export function contextFromMetadata(metadata: grpc.Metadata | undefined): Context {
  return extractTraceContext(traceContextFromMetadata(metadata));
}

/**
 * Outgoing gRPC metadata carrying the trace context of `ctx` (default: the active context),
 * added to `metadata` when given. Nothing is added when there is no valid span.
 */
export function traceMetadata(ctx?: Context, metadata: grpc.Metadata = new grpc.Metadata()): grpc.Metadata {
  for (const [k, v] of Object.entries(injectTraceContext(ctx))) metadata.set(k, v);
  return metadata;
}
