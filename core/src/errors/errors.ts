import { status } from '@grpc/grpc-js';

/**
 * Reason codes carried in `google.rpc.ErrorInfo.reason` (and in NATS headers). They mirror
 * `diffmesh.common.v1.ErrorReason` without the `ERROR_REASON_` prefix.
 */
export const REASONS = [
  'INVALID_PARAMETER',
  'UNKNOWN_MODEL',
  'REQUEST_NOT_FOUND',
  'OBJECT_NOT_FOUND',
  'OBJECT_EXPIRED',
  'CHECKSUM_MISMATCH',
  'QUEUE_FULL',
  'TOO_MANY_REQUESTS',
  'STORE_FULL',
  'POOL_UNAVAILABLE',
  'NO_MATCHING_VERSION',
  'BREAKER_OPEN',
  'DRAINING',
  'CANCELLED',
  'TIMEOUT',
  'STAGE_FAILED',
  'MODEL_LOAD_FAILED',
  'UNAUTHENTICATED',
  'RATE_LIMITED',
  'TRANSPORT',
  'INTERNAL',
  'REQUEST_NOT_FINISHED',
  'INSTANCE_HELD',
  'CAPABILITY_REQUIRED',
  'TENANT_QUOTA',
  'PREEMPTED',
  'DEADLINE_UNREACHABLE',
] as const;
export type Reason = (typeof REASONS)[number];

/** gRPC status codes, re-exported so callers need not import grpc-js for them. */
export const Code = status;
export type Code = status;

export interface DiffmeshErrorOptions {
  /** Extra key/values for ErrorInfo.metadata, e.g. `{ field: 'width' }`. */
  metadata?: Record<string, string>;
  /** Suggested client back-off (RetryInfo). */
  retryAfterMs?: number;
  cause?: unknown;
}

/**
 * The one error type that crosses component boundaries: a gRPC status code, a reason code
 * and a message safe to show to the caller.
 */
export class DiffmeshError extends Error {
  readonly code: Code;
  readonly reason: Reason;
  readonly metadata: Record<string, string>;
  readonly retryAfterMs?: number;

  constructor(code: Code, reason: Reason, message: string, opts: DiffmeshErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'DiffmeshError';
    this.code = code;
    this.reason = reason;
    this.metadata = opts.metadata ?? {};
    if (opts.retryAfterMs !== undefined) this.retryAfterMs = opts.retryAfterMs;
  }

  /** The request field the error is about, when there is one. */
  get field(): string | undefined {
    return this.metadata.field;
  }
}

/** An invalid request parameter; `field` names it as the user wrote it (snake_case). */
export function invalidParameter(field: string, message: string): DiffmeshError {
  return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `${field}: ${message}`, {
    metadata: { field },
  });
}

export function unknownModel(model: string, known: string[] = []): DiffmeshError {
  const hint = known.length > 0 ? ` (known: ${known.join(', ')})` : '';
  return new DiffmeshError(Code.NOT_FOUND, 'UNKNOWN_MODEL', `model: unknown model "${model}"${hint}`, {
    metadata: { field: 'model', model },
  });
}

export function cancelled(message = 'request cancelled'): DiffmeshError {
  return new DiffmeshError(Code.CANCELLED, 'CANCELLED', message);
}

/** Codes that breakers and retries count; never INVALID_ARGUMENT or NOT_FOUND. */
const RETRYABLE = new Set<Code>([Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED, Code.RESOURCE_EXHAUSTED, Code.INTERNAL]);

export function isRetryableCode(code: Code): boolean {
  return RETRYABLE.has(code);
}

/** Wraps anything thrown into a DiffmeshError; unknown errors become a generic INTERNAL. */
export function asDiffmeshError(err: unknown): DiffmeshError {
  if (err instanceof DiffmeshError) return err;
  if (err instanceof Error && err.name === 'AbortError') return cancelled();
  return new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'internal error', { cause: err });
}
