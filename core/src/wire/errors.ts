/**
 * The error wire format. A DiffmeshError crosses gRPC as a status code, a safe message and
 * a `google.rpc.Status` in the `grpc-status-details-bin` trailer (ErrorInfo with the reason,
 * RetryInfo when a retry makes sense, BadRequest when a field is at fault). It crosses NATS
 * as plain `Diffmesh-Error-*` headers, and requests and tasks record it as a
 * `diffmesh.common.v1.ErrorDetail`. Unknown errors always leave as INTERNAL 'internal
 * error': their message and stack stay in the process.
 */
import { Metadata, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import {
  loadDiffmeshRoot,
  messageCodec,
  type Any,
  type BadRequest,
  type Duration,
  type Duration__Output,
  type ErrorDetail,
  type ErrorDetail__Output,
  type ErrorInfo,
  type ErrorInfo__Output,
  type ErrorReason as ErrorReasonWire,
  type RetryInfo,
  type RetryInfo__Output,
  type RpcCode__Output,
  type RpcStatus,
  type RpcStatus__Output,
} from '@diffmesh/protos';

import { Code, DiffmeshError, REASONS, asDiffmeshError, type Reason } from '../errors/index.js';

/** `ErrorInfo.domain` of every diffmesh error. */
export const ERROR_DOMAIN = 'diffmesh.io';

/** The binary trailer that carries the encoded `google.rpc.Status`. */
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';

/**
 * Reason of a gRPC status that carried no diffmesh ErrorInfo: raised by the transport
 * (connection refused or reset, message too large, method not implemented) or by a peer
 * that is not a diffmesh service. The status code tells what happened. Mirrors
 * `ERROR_REASON_TRANSPORT`; not yet part of REASONS in errors.ts.
 */
export const TRANSPORT_REASON: Reason = 'TRANSPORT';

/** NATS header names of the error fields. */
export const ERROR_HEADERS = {
  code: 'Diffmesh-Error-Code',
  reason: 'Diffmesh-Error-Reason',
  message: 'Diffmesh-Error-Message',
  field: 'Diffmesh-Error-Field',
  retryAfterMs: 'Diffmesh-Retry-After-Ms',
  /** ErrorInfo metadata other than `field`, as a JSON object of strings. */
  metadata: 'Diffmesh-Error-Metadata',
} as const;

const TYPE_URL_PREFIX = 'type.googleapis.com/';
const STATUS_TYPE = 'google.rpc.Status';
const ERROR_INFO_TYPE = 'google.rpc.ErrorInfo';
const RETRY_INFO_TYPE = 'google.rpc.RetryInfo';
const BAD_REQUEST_TYPE = 'google.rpc.BadRequest';
const REASON_PREFIX = 'ERROR_REASON_';

// Codecs are created on first use: the proto files load once, lazily.
const statusCodec = () => messageCodec<RpcStatus, RpcStatus__Output>(STATUS_TYPE);
const errorInfoCodec = () => messageCodec<ErrorInfo, ErrorInfo__Output>(ERROR_INFO_TYPE);
const retryInfoCodec = () => messageCodec<RetryInfo, RetryInfo__Output>(RETRY_INFO_TYPE);
const badRequestCodec = () => messageCodec<BadRequest>(BAD_REQUEST_TYPE);

/** Reasons this build knows (REASONS plus the transport reason). */
function isKnownReason(reason: string): reason is Reason {
  return reason === TRANSPORT_REASON || (REASONS as readonly string[]).includes(reason);
}

/**
 * The reason of a status that arrived without diffmesh details. Only exact matches get a
 * specific reason; anything else is a transport error whose code says what happened.
 */
export function reasonForCode(code: number): Reason {
  switch (code) {
    case Code.CANCELLED:
      return 'CANCELLED';
    case Code.DEADLINE_EXCEEDED:
      return 'TIMEOUT';
    case Code.UNAUTHENTICATED:
      return 'UNAUTHENTICATED';
    case Code.INVALID_ARGUMENT:
      return 'INVALID_PARAMETER';
    case Code.INTERNAL:
      return 'INTERNAL';
    default:
      return TRANSPORT_REASON;
  }
}

/** `INVALID_ARGUMENT` for 3; `UNKNOWN` for a number that is no status code. */
export function codeName(code: number): RpcCode__Output {
  const name = (Code as unknown as Record<number, string | undefined>)[code];
  return (name ?? 'UNKNOWN') as RpcCode__Output;
}

/** 3 for `INVALID_ARGUMENT` or `3`; UNKNOWN for anything else. */
export function parseCode(value: string | number | undefined | null): Code {
  if (typeof value === 'number') return Number.isInteger(value) && codeName(value) !== 'UNKNOWN' ? value : Code.UNKNOWN;
  if (value === undefined || value === null) return Code.UNKNOWN;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return parseCode(Number(trimmed));
  const code = (Code as unknown as Record<string, number | undefined>)[trimmed.toUpperCase()];
  return typeof code === 'number' ? code : Code.UNKNOWN;
}

function msToDuration(ms: number): Duration {
  const whole = Math.max(0, Math.round(ms));
  return { seconds: String(Math.floor(whole / 1000)), nanos: (whole % 1000) * 1_000_000 };
}

function durationToMs(d: Duration__Output | null | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) * 1000 + Math.round(d.nanos / 1_000_000);
}

function isStatusLike(err: unknown): err is Partial<StatusObject> & { code: number; message?: string } {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'number' &&
    Number.isInteger((err as { code: number }).code)
  );
}

interface DecodedDetails {
  info?: ErrorInfo__Output;
  retryAfterMs?: number;
}

/** Reads diffmesh's ErrorInfo and RetryInfo from a status trailer; tolerates garbage. */
function decodeDetails(metadata: unknown): DecodedDetails {
  if (!(metadata instanceof Metadata)) return {};
  const raw = metadata.get(STATUS_DETAILS_KEY)[0];
  if (!raw || typeof raw === 'string') return {};
  const out: DecodedDetails = {};
  try {
    const st = statusCodec().decode(raw);
    for (const any of st.details) {
      const type = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
      if (type === ERROR_INFO_TYPE && !out.info) {
        const info = errorInfoCodec().decode(any.value);
        if (info.domain === ERROR_DOMAIN) out.info = info;
      } else if (type === RETRY_INFO_TYPE && out.retryAfterMs === undefined) {
        out.retryAfterMs = durationToMs(retryInfoCodec().decode(any.value).retryDelay);
      }
    }
  } catch {
    // A malformed trailer is treated as absent: the status code still stands.
    return {};
  }
  return out;
}

/** Normalises anything thrown into the DiffmeshError that may cross the wire. */
function toSendable(err: unknown): DiffmeshError {
  // An error received from another diffmesh service passes through unchanged; a bare gRPC
  // error (which may name internal hosts) counts as unknown.
  if (!(err instanceof DiffmeshError) && isStatusLike(err) && decodeDetails(err.metadata).info) {
    return fromWire(err);
  }
  const e = asDiffmeshError(err);
  if (e.code === Code.OK) {
    // An "error" with status OK would read as success without a response.
    return new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'internal error', { cause: e });
  }
  return e;
}

/**
 * The gRPC status for `err`, ready for a unary callback (`callback(toWire(err))`) or a
 * stream (`call.emit('error', toWire(err))`). DiffmeshErrors keep their code, reason,
 * message, metadata and retry delay; anything else becomes INTERNAL 'internal error'.
 * The result is a plain object: it carries no stack.
 */
export function toWire(err: unknown): ServiceError {
  const e = toSendable(err);
  const details: Any[] = [
    {
      type_url: TYPE_URL_PREFIX + ERROR_INFO_TYPE,
      value: errorInfoCodec().encode({ reason: e.reason, domain: ERROR_DOMAIN, metadata: { ...e.metadata } }),
    },
  ];
  if (e.retryAfterMs !== undefined) {
    details.push({
      type_url: TYPE_URL_PREFIX + RETRY_INFO_TYPE,
      value: retryInfoCodec().encode({ retryDelay: msToDuration(e.retryAfterMs) }),
    });
  }
  if (e.field !== undefined && e.code === Code.INVALID_ARGUMENT) {
    details.push({
      type_url: TYPE_URL_PREFIX + BAD_REQUEST_TYPE,
      value: badRequestCodec().encode({ fieldViolations: [{ field: e.field, description: e.message }] }),
    });
  }
  const metadata = new Metadata();
  metadata.set(STATUS_DETAILS_KEY, Buffer.from(statusCodec().encode({ code: e.code, message: e.message, details })));
  return { name: 'DiffmeshError', message: e.message, code: e.code, details: e.message, metadata };
}

/**
 * The DiffmeshError behind a gRPC error (a client's ServiceError, or a status object).
 * Reason, metadata and retry delay come back from the status details; a status without
 * diffmesh details keeps its code, with a reason derived from it (see reasonForCode).
 * Anything that is not a gRPC status goes through asDiffmeshError.
 */
export function fromWire(err: unknown): DiffmeshError {
  if (err instanceof DiffmeshError) return err;
  if (!isStatusLike(err)) return asDiffmeshError(err);
  const code = parseCode(err.code);
  const message = typeof err.details === 'string' ? err.details : (err.message ?? '');
  const { info, retryAfterMs } = decodeDetails(err.metadata);
  // A reason this build does not know yet (a newer peer) is kept as it came.
  const reason = info && info.reason !== '' ? (info.reason as Reason) : reasonForCode(code);
  return new DiffmeshError(code, reason, message, {
    metadata: info ? { ...info.metadata } : {},
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    cause: err,
  });
}

/** Header values cannot hold line breaks. */
function headerValue(value: string): string {
  return value.replace(/[\r\n]+/g, ' ');
}

/**
 * NATS headers for `err`: the same code (by name), reason and message as on gRPC, the
 * field, the retry delay and any other metadata. Unknown errors become INTERNAL.
 */
export function toHeaders(err: unknown): Record<string, string> {
  const e = toSendable(err);
  const headers: Record<string, string> = {
    [ERROR_HEADERS.code]: codeName(e.code),
    [ERROR_HEADERS.reason]: e.reason,
    [ERROR_HEADERS.message]: headerValue(e.message),
  };
  const { field, ...rest } = e.metadata;
  if (field !== undefined) headers[ERROR_HEADERS.field] = headerValue(field);
  if (e.retryAfterMs !== undefined) headers[ERROR_HEADERS.retryAfterMs] = String(Math.max(0, Math.round(e.retryAfterMs)));
  if (Object.keys(rest).length > 0) headers[ERROR_HEADERS.metadata] = headerValue(JSON.stringify(rest));
  return headers;
}

/** A plain header map (any case), or anything with `get(name)` such as NATS MsgHdrs. */
export type HeaderSource =
  { get(name: string): string | null | undefined } | Readonly<Record<string, string | readonly string[] | undefined>>;

function headerGetter(headers: HeaderSource): (name: string) => string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const h = headers as { get(name: string): string | null | undefined };
    return (name) => h.get(name) || undefined;
  }
  const byLower = new Map<string, string>();
  for (const [k, v] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    const value = Array.isArray(v) ? v[0] : v;
    if (typeof value === 'string') byLower.set(k.toLowerCase(), value);
  }
  return (name) => byLower.get(name.toLowerCase());
}

/**
 * The DiffmeshError carried by NATS headers, or undefined when they carry none (no
 * `Diffmesh-Error-Code` and no `Diffmesh-Error-Reason`).
 */
export function fromHeaders(headers: HeaderSource): DiffmeshError | undefined {
  const get = headerGetter(headers);
  const rawCode = get(ERROR_HEADERS.code);
  const rawReason = get(ERROR_HEADERS.reason);
  if (rawCode === undefined && rawReason === undefined) return undefined;
  const code = parseCode(rawCode);
  const reason = rawReason ? (rawReason as Reason) : reasonForCode(code);
  const metadata: Record<string, string> = {};
  const rawMeta = get(ERROR_HEADERS.metadata);
  if (rawMeta) {
    try {
      const parsed: unknown = JSON.parse(rawMeta);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
        for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string') metadata[k] = v;
      }
    } catch {
      // Unreadable metadata is dropped; code and reason still stand.
    }
  }
  const field = get(ERROR_HEADERS.field);
  if (field !== undefined) metadata.field = field;
  const retry = Number(get(ERROR_HEADERS.retryAfterMs));
  return new DiffmeshError(code, reason, get(ERROR_HEADERS.message) ?? '', {
    metadata,
    ...(Number.isFinite(retry) && get(ERROR_HEADERS.retryAfterMs) !== undefined ? { retryAfterMs: retry } : {}),
  });
}

/** The wire number of `ERROR_REASON_<reason>` (e.g. for `INVALID_PARAMETER`); 0 (UNSPECIFIED) when not in the enum. */
export function reasonToWire(reason: string): ErrorReasonWire {
  reasonNumbers ??= loadDiffmeshRoot().lookupEnum('diffmesh.common.v1.ErrorReason').values;
  return (reasonNumbers[REASON_PREFIX + reason] ?? 0) as ErrorReasonWire;
}

let reasonNumbers: Readonly<Record<string, number>> | undefined;

/** `INVALID_PARAMETER` for `ERROR_REASON_INVALID_PARAMETER`; undefined for UNSPECIFIED or unknown. */
export function reasonFromWire(reason: string | number | null | undefined): Reason | undefined {
  if (typeof reason !== 'string' || !reason.startsWith(REASON_PREFIX)) return undefined;
  const r = reason.slice(REASON_PREFIX.length);
  return r !== 'UNSPECIFIED' && isKnownReason(r) ? r : undefined;
}

/**
 * The ErrorDetail recorded for `err` (TaskFailed, FailedEvent, RequestContext.error).
 * Unknown errors become INTERNAL 'internal error'.
 */
export function errorDetailToWire(err: unknown): ErrorDetail {
  const e = toSendable(err);
  const { field, ...rest } = e.metadata;
  return {
    code: e.code,
    reason: reasonToWire(e.reason),
    message: e.message,
    field: field ?? '',
    metadata: rest,
    retryAfterMs: e.retryAfterMs === undefined ? 0 : Math.max(0, Math.round(e.retryAfterMs)),
  };
}

/** The DiffmeshError an ErrorDetail describes. */
export function errorDetailFromWire(detail: ErrorDetail | ErrorDetail__Output): DiffmeshError {
  const code = parseCode(detail.code);
  const reason = reasonFromWire(detail.reason) ?? reasonForCode(code);
  const metadata: Record<string, string> = { ...(detail.metadata ?? {}) };
  if (detail.field) metadata.field = detail.field;
  const retry = detail.retryAfterMs ?? 0;
  return new DiffmeshError(code, reason, detail.message ?? '', {
    metadata,
    ...(retry > 0 ? { retryAfterMs: retry } : {}),
  });
}
