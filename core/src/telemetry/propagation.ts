import * as grpc from '@grpc/grpc-js';
import { ROOT_CONTEXT, context as api, defaultTextMapGetter, defaultTextMapSetter, type Context } from '@opentelemetry/api';
import { TRACE_PARENT_HEADER, TRACE_STATE_HEADER, W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * The W3C trace-context propagator, used directly rather than through the global one: the
 * trace context of a request then travels through every hop (gRPC metadata, NATS headers,
 * `traceContext` maps) even in a process whose tracing is off, so one process without an
 * exporter does not cut the trace of the others.
 */
const propagator = new W3CTraceContextPropagator();

/** Keys of the W3C trace context: `traceparent`, `tracestate`. */
export const TRACE_CONTEXT_KEYS: readonly string[] = [TRACE_PARENT_HEADER, TRACE_STATE_HEADER];

/**
 * The W3C trace context (`traceparent`, `tracestate`) of `ctx` (default: the active
 * context) as a plain map, for `traceContext` fields, gRPC metadata and NATS headers.
 * Empty when the context holds no valid span.
 */
export function injectTraceContext(ctx: Context = api.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, defaultTextMapSetter);
  return carrier;
}

/**
 * A context whose parent span is the one a carrier names (`traceparent`/`tracestate`, in a
 * plain map with lower-case keys). A missing or malformed `traceparent` yields `base`
 * unchanged: by default the root context, so an incoming message without trace context
 * starts a new trace instead of joining whatever happened to be active.
 */
export function extractTraceContext(
  carrier: Readonly<Record<string, string | string[] | undefined>> | undefined,
  base: Context = ROOT_CONTEXT,
): Context {
  if (!carrier) return base;
  return propagator.extract(base, carrier, defaultTextMapGetter);
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
export function traceMetadata(ctx: Context = api.active(), metadata: grpc.Metadata = new grpc.Metadata()): grpc.Metadata {
  for (const [k, v] of Object.entries(injectTraceContext(ctx))) metadata.set(k, v);
  return metadata;
}
