/**
 * gRPC status → HTTP, as grpc-gateway maps it, and the two JSON error bodies the gateway
 * writes: the Google API style on the proto-derived routes and the OpenAI style on `/v1/`.
 */
import { Metadata } from '@grpc/grpc-js';
import { Code, DiffmeshError, STATUS_DETAILS_KEY, codeName, fromWire, toWire } from '@diffmesh/core';
import { decodeObject, messageToJson, protoRoot } from './proto-json.js';

/** HTTP status of a gRPC status code (grpc-gateway's `HTTPStatusFromCode`). */
export function httpStatusOf(code: number): number {
  switch (code) {
    case Code.OK:
      return 200;
    case Code.CANCELLED:
      return 499;
    case Code.UNKNOWN:
      return 500;
    case Code.INVALID_ARGUMENT:
      return 400;
    case Code.DEADLINE_EXCEEDED:
      return 504;
    case Code.NOT_FOUND:
      return 404;
    case Code.ALREADY_EXISTS:
      return 409;
    case Code.PERMISSION_DENIED:
      return 403;
    case Code.UNAUTHENTICATED:
      return 401;
    case Code.RESOURCE_EXHAUSTED:
      return 429;
    case Code.FAILED_PRECONDITION:
      return 400;
    case Code.ABORTED:
      return 409;
    case Code.OUT_OF_RANGE:
      return 400;
    case Code.UNIMPLEMENTED:
      return 501;
    case Code.INTERNAL:
      return 500;
    case Code.UNAVAILABLE:
      return 503;
    case Code.DATA_LOSS:
      return 500;
    default:
      return 500;
  }
}

/** Everything the gateway knows about a failed call, ready to be written as HTTP. */
export interface HttpError {
  httpStatus: number;
  /** gRPC status code. */
  code: number;
  /** gRPC status name, e.g. `NOT_FOUND`. */
  status: string;
  message: string;
  /** diffmesh reason code, e.g. `UNKNOWN_MODEL`. */
  reason: string;
  /** The request field at fault, when one is. */
  field?: string;
  /** Seconds for the `Retry-After` header (RetryInfo, rounded up). */
  retryAfterSeconds?: number;
  /** The `google.rpc.Status` details as proto3 JSON (`@type` + fields). */
  details: unknown[];
}

/** Decodes the `google.rpc.Status` details of a gRPC error; garbage yields none. */
function statusDetails(metadata: unknown): unknown[] {
  if (!(metadata instanceof Metadata)) return [];
  const raw = metadata.get(STATUS_DETAILS_KEY)[0];
  if (!raw || typeof raw === 'string') return [];
  try {
    const type = protoRoot().lookupType('google.rpc.Status');
    const status = messageToJson(type, decodeObject(type, raw)) as { details?: unknown[] };
    return status.details ?? [];
  } catch {
    return [];
  }
}

/**
 * Describes anything thrown by a call or by the gateway itself. A gRPC error keeps its
 * code, message and details; a DiffmeshError gets the details it would carry on the wire;
 * anything else is INTERNAL with a generic message (its text stays in the logs).
 */
export function describeError(err: unknown): HttpError {
  const e = fromWire(err);
  const metadata =
    err instanceof DiffmeshError || !(err && typeof err === 'object' && 'metadata' in err) ? toWire(e).metadata : err.metadata;
  const out: HttpError = {
    httpStatus: httpStatusOf(e.code),
    code: e.code,
    status: codeName(e.code),
    message: safeMessage(e),
    reason: e.reason,
    details: statusDetails(metadata),
  };
  if (e.field) out.field = e.field;
  if (e.retryAfterMs !== undefined) out.retryAfterSeconds = Math.max(1, Math.ceil(e.retryAfterMs / 1000));
  // A client may retry these; say when even if the upstream did not.
  else if (e.code === Code.UNAVAILABLE || e.code === Code.RESOURCE_EXHAUSTED) out.retryAfterSeconds = 1;
  return out;
}

/**
 * The message a client may see. Unknown errors are 'internal error' (toWire's rule), and a
 * transport failure's text (which names internal hosts and ports) becomes a plain phrase.
 */
function safeMessage(e: DiffmeshError): string {
  if (e.code === Code.INTERNAL && e.reason === 'INTERNAL') return 'internal error';
  if (e.reason !== 'TRANSPORT') return e.message;
  switch (e.code) {
    case Code.UNAVAILABLE:
      return 'the upstream service is unavailable';
    case Code.DEADLINE_EXCEEDED:
      return 'the upstream service did not answer in time';
    case Code.CANCELLED:
      return 'the call was cancelled';
    case Code.RESOURCE_EXHAUSTED:
      return 'the upstream service refused the call: a message or limit was too large';
    case Code.UNIMPLEMENTED:
      return 'the upstream service does not implement this call';
    default:
      return `the upstream call failed (${codeName(e.code)})`;
  }
}

/** The Google API style body: `{ error: { code, status, message, reason, field, details } }`. */
export function googleErrorBody(e: HttpError): { error: Record<string, unknown> } {
  return {
    error: {
      code: e.httpStatus,
      status: e.status,
      message: e.message,
      reason: e.reason,
      ...(e.field ? { field: e.field } : {}),
      details: e.details,
    },
  };
}

/** OpenAI error `type` by HTTP status. */
function openAiType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 499) return 'cancelled';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/**
 * The OpenAI style body: `{ error: { message, type, param, code } }`. `param` is the
 * request field at fault as the client named it (`paramOf` maps mesh field names back).
 */
export function openAiErrorBody(e: HttpError, paramOf: (field: string) => string = (f) => f): { error: Record<string, unknown> } {
  return {
    error: {
      message: e.message,
      type: openAiType(e.httpStatus),
      param: e.field ? paramOf(e.field) : null,
      code: e.reason.toLowerCase(),
    },
  };
}

/** An error raised by the gateway itself (bad input, auth, limits), on any route style. */
export function gatewayError(
  code: Code,
  reason: DiffmeshError['reason'],
  message: string,
  opts: { field?: string; retryAfterMs?: number } = {},
): DiffmeshError {
  return new DiffmeshError(code, reason, opts.field && !message.startsWith(`${opts.field}:`) ? `${opts.field}: ${message}` : message, {
    metadata: opts.field ? { field: opts.field } : {},
    ...(opts.retryAfterMs !== undefined ? { retryAfterMs: opts.retryAfterMs } : {}),
  });
}

/** A gateway error carrying an HTTP status that no gRPC code maps to (405, 413, 415). */
export class HttpStatusError extends Error {
  constructor(
    readonly httpStatus: number,
    readonly status: string,
    message: string,
    readonly reason = 'INVALID_PARAMETER',
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpStatusError';
  }

  describe(): HttpError {
    return {
      httpStatus: this.httpStatus,
      code: Code.INVALID_ARGUMENT,
      status: this.status,
      message: this.message,
      reason: this.reason,
      details: [],
    };
  }
}

/** The 413 of a body over `maxBytes` (the connection is closed after it). */
export function bodyTooLarge(maxBytes: number): HttpStatusError {
  return new HttpStatusError(413, 'PAYLOAD_TOO_LARGE', `request body is larger than the limit of ${maxBytes} bytes`, 'INVALID_PARAMETER', {
    connection: 'close',
  });
}

/** Describes any error, HTTP-only statuses included. */
export function describeAny(err: unknown): HttpError {
  return err instanceof HttpStatusError ? err.describe() : describeError(err);
}
