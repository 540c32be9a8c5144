import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { ROOT_CONTEXT, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Code, DiffmeshError } from '../errors/index.js';
import { createLogger } from '../logging/index.js';
import {
  SPAN,
  contextFromMetadata,
  diffmeshTracer,
  extractTraceContext,
  injectTraceContext,
  resolveTelemetrySettings,
  startTelemetry,
  traceContextFromMetadata,
  traceLogFields,
  traceMetadata,
  withSpan,
} from './index.js';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

describe('resolveTelemetrySettings', () => {
  it('is off without an endpoint, and when disabled or the exporter is none', () => {
    expect(resolveTelemetrySettings({}, 'dit-svc')).toMatchObject({ enabled: false, serviceName: 'dit-svc' });
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(resolveTelemetrySettings({ ...endpoint, OTEL_SDK_DISABLED: 'true' }, 'x')).toMatchObject({
      enabled: false,
      reason: 'OTEL_SDK_DISABLED=true',
    });
    expect(resolveTelemetrySettings({ ...endpoint, OTEL_SDK_DISABLED: 'false' }, 'x').enabled).toBe(true);
    expect(resolveTelemetrySettings({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }, 'x')).toMatchObject({ enabled: false, warnings: [] });
    const zipkin = resolveTelemetrySettings({ ...endpoint, OTEL_TRACES_EXPORTER: 'zipkin' }, 'x');
    expect(zipkin.enabled).toBe(false);
    expect(zipkin.warnings[0]).toMatch(/only "otlp" and "none"/);
  });

  it('takes the endpoint, protocol and service name from OTEL_* with per-signal variables first', () => {
    expect(resolveTelemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }, 'scheduler')).toMatchObject({
      enabled: true,
      protocol: 'http/protobuf',
      endpoint: 'http://c:4318',
      serviceName: 'scheduler',
    });
    expect(
      resolveTelemetrySettings(
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4317',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
          OTEL_SERVICE_NAME: 'dit-svc-gpu',
        },
        'dit-svc',
      ),
    ).toMatchObject({ enabled: true, protocol: 'grpc', endpoint: 'http://t:4317', serviceName: 'dit-svc-gpu' });
    const bad = resolveTelemetrySettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' }, 'x');
    expect(bad).toMatchObject({ enabled: true, protocol: 'http/protobuf' });
    expect(bad.warnings[0]).toMatch(/unsupported OTLP protocol "thrift"/);
  });
});

describe('trace context propagation', () => {
  it('round-trips a W3C traceparent through a context, maps and gRPC metadata', () => {
    const ctx = extractTraceContext({ traceparent: TRACEPARENT, tracestate: 'vendor=1' });
    expect(trace.getSpanContext(ctx)).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, isRemote: true });
    expect(injectTraceContext(ctx)).toEqual({ traceparent: TRACEPARENT, tracestate: 'vendor=1' });
    const md = traceMetadata(ctx);
    expect(md.get('traceparent')).toEqual([TRACEPARENT]);
    expect(traceContextFromMetadata(md)).toEqual({ traceparent: TRACEPARENT, tracestate: 'vendor=1' });
    expect(trace.getSpanContext(contextFromMetadata(md))?.spanId).toBe(SPAN_ID);
  });

  it('treats a missing or malformed traceparent as no parent', () => {
    expect(extractTraceContext(undefined)).toBe(ROOT_CONTEXT);
    expect(trace.getSpanContext(extractTraceContext({ traceparent: 'garbage' }))).toBeUndefined();
    expect(trace.getSpanContext(extractTraceContext({ traceparent: `00-${'0'.repeat(32)}-${SPAN_ID}-01` }))).toBeUndefined();
    expect(injectTraceContext(ROOT_CONTEXT)).toEqual({});
    expect(traceMetadata(ROOT_CONTEXT).getMap()).toEqual({});
    expect(traceContextFromMetadata(new grpc.Metadata())).toEqual({});
  });

  it('passes a trace context through a process whose tracing is off', async () => {
    const telemetry = await startTelemetry({ serviceName: 'test' });
    expect(telemetry.enabled).toBe(false);
    // No SDK: spans are no-ops that keep their parent's ids, so the next hop still joins the trace.
    const span = diffmeshTracer().startSpan(SPAN.dispatch, {}, extractTraceContext({ traceparent: TRACEPARENT }));
    expect(span.isRecording()).toBe(false);
    expect(injectTraceContext(trace.setSpan(ROOT_CONTEXT, span))).toEqual({ traceparent: TRACEPARENT });
    span.end();
    await expect(withSpan('x', {}, () => 42)).resolves.toBe(42);
    await expect(telemetry.shutdown()).resolves.toBeUndefined();
  });
});

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  status?: { code?: number; message?: string };
  attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
}
interface Export {
  resourceSpans: Array<{
    resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
    scopeSpans: Array<{ spans: ExportedSpan[] }>;
  }>;
}

describe('startTelemetry with an OTLP/HTTP JSON collector', () => {
  let server: Server;
  const exports: Export[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') exports.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Export);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('exports explicit spans with the service name, nests them, stamps log lines and flushes on shutdown', async () => {
    const { port } = server.address() as { port: number };
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', `http://127.0.0.1:${port}`);
    vi.stubEnv('OTEL_EXPORTER_OTLP_PROTOCOL', 'http/json');
    // A long batch delay: only the shutdown's flush can deliver the spans.
    vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '60000');
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({
      name: 'test',
      mixin: traceLogFields,
      destination: new Writable({
        write(chunk: Buffer, _enc, cb) {
          lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
          cb();
        },
      }),
    });
    const telemetry = await startTelemetry({ serviceName: 'scheduler', serviceVersion: '1.2.3', log });
    expect(telemetry.enabled).toBe(true);
    expect(telemetry.serviceName).toBe('scheduler');

    const parent = extractTraceContext({ traceparent: TRACEPARENT });
    let inner = '';
    await withSpan(
      SPAN.request,
      { 'diffmesh.request_id': 'r1' },
      async (outer) => {
        await new Promise((resolve) => setImmediate(resolve));
        await withSpan(SPAN.modelRun, { 'diffmesh.step': 1 }, (span) => {
          inner = span.spanContext().spanId;
          log.info('inside');
        });
        await expect(
          withSpan(SPAN.tensorGet, {}, () => {
            throw new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', 'object x not found');
          }),
        ).rejects.toThrow('object x not found');
        expect(outer.isRecording()).toBe(true);
      },
      { parent },
    );
    log.info('outside');
    expect(lines.find((l) => l.msg === 'inside')).toMatchObject({ traceId: TRACE_ID, spanId: inner });
    expect(lines.find((l) => l.msg === 'outside')?.traceId).toBeUndefined();

    await telemetry.shutdown();
    await telemetry.shutdown(); // idempotent
    const resource = exports.flatMap((e) => e.resourceSpans);
    const attrs = Object.fromEntries(resource[0].resource.attributes.map((a) => [a.key, a.value.stringValue]));
    expect(attrs).toMatchObject({ 'service.name': 'scheduler', 'service.version': '1.2.3' });
    const spans = resource.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
    const byName = Object.fromEntries(spans.map((s) => [s.name, s]));
    expect(Object.keys(byName).sort()).toEqual([SPAN.request, SPAN.modelRun, SPAN.tensorGet].sort());
    const request = byName[SPAN.request];
    expect(request).toMatchObject({ traceId: TRACE_ID, parentSpanId: SPAN_ID });
    expect(byName[SPAN.modelRun]).toMatchObject({ traceId: TRACE_ID, parentSpanId: request.spanId, spanId: inner });
    const failed = byName[SPAN.tensorGet];
    expect(failed.parentSpanId).toBe(request.spanId);
    expect(failed.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'object x not found' });
    expect(failed.attributes).toContainEqual({ key: 'diffmesh.error.reason', value: { stringValue: 'OBJECT_NOT_FOUND' } });

    // After shutdown the globals are released: spans are no-ops again.
    expect(diffmeshTracer().startSpan('after').isRecording()).toBe(false);
  });

  it('never throws on shutdown when the collector is unreachable', async () => {
    // Port 9 (discard) on loopback: nothing listens, connections are refused.
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', 'http://127.0.0.1:9');
    vi.stubEnv('OTEL_EXPORTER_OTLP_PROTOCOL', 'http/protobuf');
    const telemetry = await startTelemetry({ serviceName: 'vae-svc', shutdownTimeoutMs: 1000 });
    expect(telemetry.enabled).toBe(true);
    await withSpan('lost', {}, () => undefined);
    await expect(telemetry.shutdown()).resolves.toBeUndefined();
  });
});
