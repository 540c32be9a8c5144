import { DiagLogLevel, context, diag, propagation, trace, type DiagLogger, type Tracer } from '@opentelemetry/api';
import type { Logger } from '../logging/index.js';
import { telemetrySettingsFromEnv, type OtlpProtocol } from './config.js';
import { TRACER_NAME } from './spans.js';

/** Options of {@link startTelemetry}. */
export interface TelemetryOptions {
  /** `service.name` unless `OTEL_SERVICE_NAME` overrides it, e.g. `dit-svc`. */
  serviceName: string;
  /** `service.version`, e.g. the package version. */
  serviceVersion?: string;
  /** Extra resource attributes, e.g. `{ 'service.instance.id': … }` (`OTEL_RESOURCE_ATTRIBUTES` wins). */
  attributes?: Record<string, string>;
  /** Where start-up decisions and exporter problems are logged. */
  log?: Logger;
  /** Longest wait of {@link Telemetry.shutdown} (flush and shutdown together). Default 5 s. */
  shutdownTimeoutMs?: number;
}

/** Tracing of one process. */
export interface Telemetry {
  /** Whether spans are exported. */
  readonly enabled: boolean;
  /** The `service.name` spans carry. */
  readonly serviceName: string;
  /** The diffmesh tracer (a no-op tracer when tracing is off). */
  readonly tracer: Tracer;
  /**
   * Exports the spans still buffered, then shuts the SDK down. Bounded by
   * `shutdownTimeoutMs` (an unreachable collector cannot hold an exit); never rejects;
   * idempotent.
   */
  shutdown(): Promise<void>;
}

/**
 * Starts tracing for a process, configured by the standard `OTEL_*` environment variables
 * (see `resolveTelemetrySettings`): a NodeSDK with one OTLP trace exporter
 * (`http/protobuf`, `http/json` or `grpc`), the W3C propagator, and the async-hooks context
 * manager. No auto-instrumentation and no metrics or log exporters: diffmesh creates its spans
 * explicitly and serves metrics through Prometheus. With tracing off (`OTEL_SDK_DISABLED`, or no
 * endpoint) the SDK is not even loaded and every span is a no-op.
 *
 * Never throws: a start-up failure is logged and leaves tracing off.
 */
export async function startTelemetry(opts: TelemetryOptions): Promise<Telemetry> {
  const log = opts.log;
  const settings = telemetrySettingsFromEnv(opts.serviceName);
  for (const w of settings.warnings) log?.warn(`telemetry: ${w}`);
  if (!settings.enabled) {
    log?.debug({ reason: settings.reason }, 'telemetry: tracing off');
    return disabled(settings.serviceName);
  }
  try {
    // Loaded only when tracing is on: the SDK and its exporters cost start-up time.
    const [{ NodeSDK }, { resourceFromAttributes }, exporter] = await Promise.all([
      import('@opentelemetry/sdk-node'),
      import('@opentelemetry/resources'),
      createTraceExporter(settings.protocol),
    ]);
    const sdk = new NodeSDK({
      // Defaults: the env detector (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) overrides them.
      resource: resourceFromAttributes({
        'service.name': opts.serviceName,
        ...(opts.serviceVersion ? { 'service.version': opts.serviceVersion } : {}),
        ...(opts.attributes ?? {}),
      }),
      traceExporter: exporter,
      metricReaders: [],
      logRecordProcessors: [],
      instrumentations: [],
    });
    // After the constructor, which installs a console diag logger when OTEL_LOG_LEVEL is set.
    if (log) {
      diag.setLogger(diagLogger(log), { logLevel: diagLevel(settings.diagLogLevel), suppressOverrideMessage: true });
    }
    sdk.start();
    log?.info(
      { serviceName: settings.serviceName, protocol: settings.protocol, endpoint: settings.endpoint },
      'telemetry: exporting traces',
    );
    const timeoutMs = opts.shutdownTimeoutMs ?? 5_000;
    let stopping: Promise<void> | undefined;
    return {
      enabled: true,
      serviceName: settings.serviceName,
      tracer: trace.getTracer(TRACER_NAME, opts.serviceVersion),
      shutdown() {
        stopping ??= (async () => {
          const deadline = Date.now() + timeoutMs;
          const provider = (trace.getTracerProvider() as { getDelegate?: () => unknown }).getDelegate?.() as
            { forceFlush?: () => Promise<void> } | undefined;
          try {
            await bounded(provider?.forceFlush?.() ?? Promise.resolve(), timeoutMs, 'flush');
          } catch (err) {
            log?.warn({ err }, 'telemetry: could not export the last spans');
          }
          try {
            // What the flush left of the budget (a little at least, to stop the exporter's timers).
            await bounded(sdk.shutdown(), Math.max(250, deadline - Date.now()), 'shutdown');
          } catch (err) {
            log?.warn({ err }, 'telemetry: shutdown failed');
          }
          // Unregister, so a later start in the same process (tests) can register again.
          trace.disable();
          context.disable();
          propagation.disable();
          diag.disable();
        })();
        return stopping;
      },
    };
  } catch (err) {
    log?.warn({ err }, 'telemetry: could not start; tracing off');
    return disabled(settings.serviceName);
  }
}

function disabled(serviceName: string): Telemetry {
  return { enabled: false, serviceName, tracer: trace.getTracer(TRACER_NAME), shutdown: () => Promise.resolve() };
}

/** The OTLP trace exporter of a protocol; endpoint, headers, timeout and compression come from `OTEL_EXPORTER_OTLP_*`. */
async function createTraceExporter(protocol: OtlpProtocol) {
  switch (protocol) {
    case 'grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
    case 'http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
    case 'http/protobuf':
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  }
}

function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`telemetry ${what} took longer than ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function diagLevel(raw: string | undefined): DiagLogLevel {
  switch (raw?.trim().toUpperCase()) {
    case 'NONE':
      return DiagLogLevel.NONE;
    case 'ERROR':
      return DiagLogLevel.ERROR;
    case 'INFO':
      return DiagLogLevel.INFO;
    case 'DEBUG':
      return DiagLogLevel.DEBUG;
    case 'VERBOSE':
      return DiagLogLevel.VERBOSE;
    case 'ALL':
      return DiagLogLevel.ALL;
    default:
      return DiagLogLevel.WARN;
  }
}

/** How long the same SDK message is kept from repeating (an unreachable collector fails every batch). */
const REPEAT_MS = 60_000;

/** OpenTelemetry's internal diagnostics into the service's logger, without repeating itself. */
function diagLogger(log: Logger): DiagLogger {
  const child = log.child({ component: 'opentelemetry' });
  const lastSeen = new Map<string, number>();
  const emit =
    (level: 'error' | 'warn' | 'info' | 'debug' | 'trace') =>
    (message: string, ...args: unknown[]) => {
      const now = Date.now();
      const key = `${level}:${message}`;
      if ((lastSeen.get(key) ?? -Infinity) > now - REPEAT_MS) return;
      if (lastSeen.size > 1000) lastSeen.clear();
      lastSeen.set(key, now);
      const detail = args.map((a) => (a instanceof Error ? a.message : typeof a === 'string' ? a : safeJson(a))).join(' ');
      child[level](detail ? `${message} ${detail}` : message);
    };
  return { error: emit('error'), warn: emit('warn'), info: emit('info'), debug: emit('debug'), verbose: emit('trace') };
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}
