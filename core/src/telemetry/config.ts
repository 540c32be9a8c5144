/**
 * Tracing settings from the standard `OTEL_*` environment variables. diffmesh adds no
 * variables of its own: the OpenTelemetry SDK reads the rest (sampler, batch processor,
 * headers, timeouts, resource attributes) itself.
 */

/** OTLP transports of the trace exporter. */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** What {@link resolveTelemetrySettings} decided. */
export type TelemetrySettings =
  | {
      enabled: true;
      /** `OTEL_SERVICE_NAME`, else the service's own name. */
      serviceName: string;
      protocol: OtlpProtocol;
      /** The endpoint variable that turned tracing on, as given. */
      endpoint: string;
      /** `OTEL_LOG_LEVEL`: how much of the SDK's own diagnostics reach the log (default warn). */
      diagLogLevel: string | undefined;
      /** Problems worth a warning (e.g. an unknown protocol that fell back to the default). */
      warnings: string[];
    }
  | {
      enabled: false;
      serviceName: string;
      /** Why tracing is off, for the start-up log line. */
      reason: string;
      warnings: string[];
    };

type Env = Readonly<Record<string, string | undefined>>;

function value(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/**
 * Decides whether spans are exported, where and how:
 * - `OTEL_SDK_DISABLED=true` → off;
 * - `OTEL_TRACES_EXPORTER` other than `otlp` (e.g. `none`) → off;
 * - neither `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` nor `OTEL_EXPORTER_OTLP_ENDPOINT` set → off
 *   (a service never sends spans to a default address nobody configured);
 * - protocol from `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, then `OTEL_EXPORTER_OTLP_PROTOCOL`,
 *   default `http/protobuf`;
 * - service name from `OTEL_SERVICE_NAME`, else `defaultServiceName`.
 */
export function resolveTelemetrySettings(env: Env, defaultServiceName: string): TelemetrySettings {
  const serviceName = value(env, 'OTEL_SERVICE_NAME') ?? defaultServiceName;
  const warnings: string[] = [];
  if (value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') {
    return { enabled: false, serviceName, reason: 'OTEL_SDK_DISABLED=true', warnings };
  }
  const exporters = (value(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
  if (!exporters.includes('otlp')) {
    const unsupported = exporters.filter((e) => e !== 'none');
    if (unsupported.length > 0) warnings.push(`OTEL_TRACES_EXPORTER: only "otlp" and "none" are supported, got "${unsupported.join(',')}"`);
    return { enabled: false, serviceName, reason: `OTEL_TRACES_EXPORTER=${exporters.join(',') || 'none'}`, warnings };
  }
  const endpoint = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (!endpoint) {
    return { enabled: false, serviceName, reason: 'no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', warnings };
  }
  const diagLogLevel = value(env, 'OTEL_LOG_LEVEL');
  const rawProtocol = value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? value(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf';
  let protocol: OtlpProtocol = 'http/protobuf';
  if ((OTLP_PROTOCOLS as readonly string[]).includes(rawProtocol)) protocol = rawProtocol as OtlpProtocol;
  else warnings.push(`unsupported OTLP protocol "${rawProtocol}" (expected ${OTLP_PROTOCOLS.join(', ')}); using http/protobuf`);
  return { enabled: true, serviceName, protocol, endpoint, diagLogLevel, warnings };
}

/** {@link resolveTelemetrySettings} of this process's environment. */
export function telemetrySettingsFromEnv(defaultServiceName: string): TelemetrySettings {
  return resolveTelemetrySettings(process.env, defaultServiceName);
}
