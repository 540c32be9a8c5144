import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type PinoPretty from 'pino-pretty';

/**
 * A structured logger. Components take one injected (never `console`) and derive child
 * loggers for requests with {@link withContext}.
 */
export type Logger = PinoLogger;

/** Levels from most to least severe; `silent` logs nothing. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Formats of log lines. */
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Component name, written as `name` on every line, e.g. `scheduler`. */
  name: string;
  /** Minimum level; default `info`. */
  level?: LogLevel;
  /** Human-readable, optionally coloured lines instead of JSON. */
  pretty?: boolean;
  /** `pretty` = the same as `pretty: true`; default `json`. */
  format?: LogFormat;
  /** Colours in pretty mode; default: whether stderr is a terminal. */
  colorize?: boolean;
  /**
   * Where lines go. Default: standard error, written synchronously so nothing is lost on a
   * crash (standard output belongs to the CLI's user-facing output).
   */
  destination?: DestinationStream | NodeJS.WritableStream;
  /** Fields added to every line, e.g. `{ nodeId, pool }`. */
  base?: Record<string, unknown>;
  /**
   * Called for every line; its fields are merged in. The telemetry bootstrap uses it to add
   * the active span's `traceId`/`spanId`.
   */
  mixin?: () => Record<string, unknown>;
  /** Paths whose values are replaced by `[redacted]`; default {@link DEFAULT_REDACT_PATHS}. */
  redact?: string[];
}

/** Fields never written in clear text unless `redact` is overridden. */
export const DEFAULT_REDACT_PATHS: readonly string[] = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'apiKey',
  '*.apiKey',
  'password',
  '*.password',
  'token',
  '*.token',
  // Durable tensor stores: URIs that may carry a password, and cloud credentials.
  'durable',
  '*.durable',
  'tensorStore',
  '*.tensorStore',
  '*.durableLocation.password',
  'REDIS_URL',
  '*.REDIS_URL',
  'secretAccessKey',
  '*.secretAccessKey',
  'AWS_SECRET_ACCESS_KEY',
  '*.AWS_SECRET_ACCESS_KEY',
  // Mesh credentials: NATS nkey seeds and private keys (diffmesh passes only their file paths,
  // but an object holding one must not print it either).
  'seed',
  '*.seed',
  'natsClientSeed',
  '*.natsClientSeed',
  'clientSeed',
  '*.clientSeed',
  'privateKey',
  '*.privateKey',
  'private_key',
  '*.private_key',
  'pass',
  '*.pass',
];

/** Creates a pino logger writing JSON lines (or pretty lines) to standard error. */
export function createLogger(opts: LoggerOptions): Logger {
  const level = opts.level ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new Error(`createLogger: unknown level "${level}" (expected one of ${LOG_LEVELS.join(', ')})`);
  }
  const pretty = opts.pretty === true || opts.format === 'pretty';
  const destination = pretty ? prettyDestination(opts) : (opts.destination ?? pino.destination({ dest: 2, sync: true }));
  return pino(
    {
      name: opts.name,
      level,
      base: { ...(opts.base ?? {}) },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: [...(opts.redact ?? DEFAULT_REDACT_PATHS)], censor: '[redacted]' },
      ...(opts.mixin ? { mixin: opts.mixin } : {}),
    },
    destination,
  );
}

/**
 * pino-pretty is loaded when a pretty logger is made, not with this module: a JSON logger (every
 * service by default, the CLI) never pays for it.
 */
function prettyDestination(opts: LoggerOptions): DestinationStream {
  const pinoPretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
  return pinoPretty({
    destination: opts.destination ?? 2,
    sync: true,
    colorize: opts.colorize ?? (opts.destination === undefined && Boolean(process.stderr.isTTY)),
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
  });
}

/** A logger that writes nothing, for tests and for callers that pass no logger. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** Request-scoped fields that every log line about a request carries. */
export interface LogContext {
  reqId?: string;
  traceId?: string;
  spanId?: string;
  /** Any further bindings, e.g. `pool`, `stage`, `model`. */
  [key: string]: unknown;
}

/**
 * A child logger bound to a request's ids (`reqId`, `traceId`, `spanId`, …). Undefined
 * values are left out so they do not show as `null`.
 */
export function withContext(logger: Logger, ctx: LogContext): Logger {
  const bindings: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(ctx)) if (v !== undefined) bindings[k] = v;
  return logger.child(bindings);
}

/**
 * `traceId`/`spanId` from a W3C `traceparent` header (`00-<trace>-<span>-<flags>`), or an
 * empty object when it is absent or malformed.
 */
export function traceFieldsFromTraceparent(traceparent: string | undefined): { traceId?: string; spanId?: string } {
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(traceparent?.trim() ?? '');
  if (!m || /^0+$/.test(m[1]) || /^0+$/.test(m[2])) return {};
  return { traceId: m[1], spanId: m[2] };
}
