/**
 * Serves one annotated route: builds the request message from the path variables, the body
 * and the query, calls the upstream service, and writes the response as proto3 JSON — or,
 * for server-streaming RPCs, as newline-delimited JSON (`{"result": …}` per message) or as
 * server-sent events when the client accepts `text/event-stream`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { Code, DiffmeshError } from '@diffmesh/core';
import protobuf from 'protobufjs';
import { bodyTooLarge, describeAny, googleErrorBody, type HttpError } from './errors.js';
import { checkPromptLength } from './limits.js';
import { base64Length, header, parseJsonObject, readBody, sendJson, wantsEventStream, writeChunk } from './http-util.js';
import {
  badField,
  previewName,
  decodeObject,
  encodeObject,
  jsonName,
  jsonToObject,
  messageToJson,
  setFieldPath,
  stringFields,
} from './proto-json.js';
import type { ProtoRoute } from './routes.js';
import type { UpstreamPool, WaitPolicy } from '@diffmesh/client';
import { schedulerWaitFor } from './scheduler-wait.js';

/** What a proto route needs from the gateway. */
export interface ProtoRouteDeps {
  /** Upstream pool by fully qualified service name. */
  upstreams: ReadonlyMap<string, UpstreamPool>;
  maxBodyBytes: number;
  /**
   * Largest input image: a request message that can carry one (`input_image.data`, base64 in
   * JSON) may be this much (base64) larger than `maxBodyBytes`. 0 = no allowance.
   */
  maxImageBytes?: number;
  maxPromptChars: number;
  /** How long a stream may stay silent before its 200 headers are sent anyway. */
  streamHeaderWaitMs?: number;
  /** Interval of SSE keep-alive comments. */
  sseKeepAliveMs?: number;
  /** How scheduler calls that are safe to repeat wait for a restarting scheduler (none when absent). */
  schedulerWait?: WaitPolicy;
}

/** Request fields whose value names what the call is about, for instance affinity. */
const AFFINITY_FIELDS = ['req_id', 'request_id', 'object_id'];
/** String fields held to the prompt limit. */
const PROMPT_FIELDS = new Set(['prompt', 'negative_prompt']);
/**
 * Request headers passed on to the upstream call as gRPC metadata. The API key goes along:
 * the scheduler scopes requests to the key's tenant.
 */
const FORWARDED_HEADERS = ['traceparent', 'tracestate', 'x-request-id', 'authorization', 'x-api-key'];

/** Builds the plain request object (proto names) from path variables, body and query. */
export async function buildRequest(
  route: ProtoRoute,
  params: Record<string, string>,
  req: IncomingMessage,
  query: URLSearchParams,
  deps: Pick<ProtoRouteDeps, 'maxBodyBytes' | 'maxPromptChars' | 'maxImageBytes'>,
): Promise<Record<string, unknown>> {
  const { binding, requestType } = route;
  let obj: Record<string, unknown> = {};
  if (binding.body) {
    // An input image (base64 in JSON) has its own allowance on top of the body limit.
    const imageRoom = deps.maxImageBytes && carriesInputImage(requestType) ? base64Length(deps.maxImageBytes) : 0;
    const body = await readBody(req, deps.maxBodyBytes + imageRoom);
    const json = parseJsonObject(body, header(req, 'content-type'));
    if (body.length > deps.maxBodyBytes && body.length - inputImageDataLength(requestType, json) > deps.maxBodyBytes) {
      throw bodyTooLarge(deps.maxBodyBytes);
    }
    if (binding.body === '*') {
      obj = jsonToObject(requestType, json);
    } else {
      const field = requestType.fields[binding.body];
      if (!(field.resolvedType instanceof protobuf.Type)) throw badField(binding.body, 'body field must be a message');
      obj[field.name] = jsonToObject(field.resolvedType, json);
    }
  }
  if (binding.body === '*') {
    // The body sets every field: a query parameter would be silently ignored.
    const [first] = query.keys();
    if (first !== undefined) throw badField(previewName(first), 'query parameters are not accepted here: the JSON body sets every field');
  } else {
    const pathFields = new Set(route.template.variables);
    for (const [key, value] of query) {
      if (pathFields.has(key)) throw badField(key, 'is set by the URL path and cannot be a query parameter');
      if (binding.body && key.split('.')[0] === binding.body) throw badField(key, 'is set by the request body');
      setFieldPath(requestType, obj, key, value);
    }
  }
  // Path variables win over anything the body says.
  for (const [field, value] of Object.entries(params)) {
    const parts = field.split('.');
    let node = obj;
    for (const p of parts.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>;
    delete node[parts.at(-1)!];
    setFieldPath(requestType, obj, field, value);
  }
  for (const s of stringFields(requestType, obj)) {
    if (PROMPT_FIELDS.has(s.field.name)) checkPromptLength(s.path, s.value, deps.maxPromptChars);
  }
  return obj;
}

const INPUT_IMAGE_TYPE = '.diffmesh.common.v1.InputImage';
const imageCarriers = new WeakMap<protobuf.Type, boolean>();

/** Whether a request message can carry an input image (a field of type InputImage, a few levels down). */
function carriesInputImage(type: protobuf.Type, depth = 0): boolean {
  const known = imageCarriers.get(type);
  if (known !== undefined) return known;
  const found =
    depth < 3 &&
    type.fieldsArray.some(
      (f) =>
        f.resolvedType instanceof protobuf.Type &&
        (f.resolvedType.fullName === INPUT_IMAGE_TYPE || carriesInputImage(f.resolvedType, depth + 1)),
    );
  if (depth === 0) imageCarriers.set(type, found);
  return found;
}

/** Length of the base64 `data` of the input image a JSON request carries (either spelling of the names), or 0. */
function inputImageDataLength(type: protobuf.Type, json: Record<string, unknown>, depth = 0): number {
  if (depth > 3) return 0;
  for (const f of type.fieldsArray) {
    if (!(f.resolvedType instanceof protobuf.Type)) continue;
    const v = json[f.name] ?? json[jsonName(f)];
    if (!v || typeof v !== 'object' || Array.isArray(v)) continue;
    if (f.resolvedType.fullName === INPUT_IMAGE_TYPE) {
      const data = (v as Record<string, unknown>).data;
      return typeof data === 'string' ? data.length : 0;
    }
    const inner = inputImageDataLength(f.resolvedType, v as Record<string, unknown>, depth + 1);
    if (inner > 0) return inner;
  }
  return 0;
}

/** What gRPC metadata may carry in a text value: printable ASCII. */
const METADATA_VALUE = /^[\x20-\x7e]*$/;

/**
 * The forwarded headers as gRPC metadata. HTTP lets a header carry bytes that gRPC metadata
 * cannot (anything outside printable ASCII); such a header is refused naming it.
 */
function metadataFrom(req: IncomingMessage): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const name of FORWARDED_HEADERS) {
    const v = header(req, name);
    if (!v) continue;
    if (!METADATA_VALUE.test(v)) throw badField(name, 'header must be printable ASCII');
    md.set(name, v);
  }
  return md;
}

/** The id a response is about (`req_id` at the top or one message below), to remember where it lives. */
function learnedKey(type: protobuf.Type, obj: Record<string, unknown>): string | undefined {
  if (typeof obj.req_id === 'string' && obj.req_id) return obj.req_id;
  for (const f of type.fieldsArray) {
    const v = obj[f.name];
    if (f.resolvedType instanceof protobuf.Type && v && typeof v === 'object' && !Array.isArray(v)) {
      const id = (v as Record<string, unknown>).req_id;
      if (typeof id === 'string' && id) return id;
    }
  }
  return undefined;
}

function selectResponseBody(route: ProtoRoute, json: Record<string, unknown>): unknown {
  const field = route.binding.responseBody ? route.responseType.fields[route.binding.responseBody] : undefined;
  return field ? (json[jsonName(field)] ?? null) : json;
}

/** Writes an error on a route that has not started its response. */
export function sendGoogleError(res: ServerResponse, e: HttpError, extraHeaders: Record<string, string> = {}): void {
  const headers: Record<string, string> = { ...extraHeaders };
  if (e.retryAfterSeconds !== undefined) headers['retry-after'] = String(e.retryAfterSeconds);
  if (e.httpStatus === 401) headers['www-authenticate'] = 'Bearer';
  sendJson(res, e.httpStatus, googleErrorBody(e), headers);
}

/** Serves one call of an annotated route. */
export async function handleProtoRoute(
  deps: ProtoRouteDeps,
  route: ProtoRoute,
  params: Record<string, string>,
  req: IncomingMessage,
  res: ServerResponse,
  query: URLSearchParams,
  signal: AbortSignal,
): Promise<void> {
  const obj = await buildRequest(route, params, req, query, deps);
  const pool = deps.upstreams.get(route.binding.service);
  if (!pool) {
    throw new DiffmeshError(Code.UNIMPLEMENTED, 'INTERNAL', `the gateway has no upstream for ${route.binding.service}`);
  }
  const metadata = metadataFrom(req);
  const request = encodeObject(route.requestType, obj);
  const affinity = AFFINITY_FIELDS.map((f) => obj[f]).find((v): v is string => typeof v === 'string' && v !== '');
  let served = '';
  const wait = schedulerWaitFor(route.binding.grpcPath, obj, deps.schedulerWait);
  const callOpts = {
    ...(affinity ? { affinityKey: affinity } : {}),
    ...(wait ? { wait } : {}),
    signal,
    metadata,
    onServed: (address: string) => (served = address),
  };
  if (!route.binding.responseStream) {
    const bytes = await pool.unary(route.binding.grpcPath, request, callOpts);
    const decoded = decodeObject(route.responseType, bytes);
    const key = learnedKey(route.responseType, decoded);
    if (key && served) pool.remember(key, served);
    sendJson(res, 200, selectResponseBody(route, messageToJson(route.responseType, decoded) as Record<string, unknown>));
    return;
  }
  const messages = pool.stream(route.binding.grpcPath, request, callOpts);
  if (route.responseType.fullName === FILE_RESPONSE_TYPE) {
    await fileResponse(route, messages, res, signal);
    return;
  }
  await streamResponse(deps, route, pool, messages, req, res, signal, () => served);
}

/** Streamed files (GetResult): a header message, then the bytes in chunks. */
const FILE_RESPONSE_TYPE = '.diffmesh.scheduler.v1.GetResultResponse';

/**
 * Answers a file stream with the file itself: its media type and length from the header
 * message, then the chunks as the body. A failure before the header is an HTTP error with a
 * JSON body, as on any route; one after it cuts the response short (its length tells).
 */
async function fileResponse(route: ProtoRoute, messages: AsyncGenerator<Buffer>, res: ServerResponse, signal: AbortSignal): Promise<void> {
  const it = messages[Symbol.asyncIterator]();
  // Bytes stay bytes (not base64) and the size a number.
  const decode = (b: Buffer): { header?: Record<string, unknown>; chunk?: Uint8Array } =>
    route.responseType.toObject(route.responseType.decode(b), { longs: Number });
  try {
    const first = await it.next();
    const header = first.done ? undefined : decode(first.value).header;
    if (!header) throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'the result stream did not start with its header');
    const name = typeof header.file_name === 'string' ? header.file_name.replace(/[^\w.-]/g, '_') : 'result';
    res.writeHead(200, {
      'content-type': typeof header.media_type === 'string' ? header.media_type : 'application/octet-stream',
      'content-length': String(Number(header.size_bytes ?? 0)),
      'content-disposition': `inline; filename="${name}"`,
      'cache-control': 'private, max-age=300',
    });
    for (;;) {
      const step = await it.next();
      if (step.done) break;
      const { chunk } = decode(step.value);
      if (chunk instanceof Uint8Array && !(await writeChunk(res, chunk))) return;
    }
    res.end();
  } catch (err) {
    if (signal.aborted) return;
    if (!res.headersSent) sendGoogleError(res, describeAny(err));
    else res.destroy();
  } finally {
    it.return?.(undefined)?.catch(() => undefined);
  }
}

async function streamResponse(
  deps: ProtoRouteDeps,
  route: ProtoRoute,
  pool: UpstreamPool,
  messages: AsyncGenerator<Buffer>,
  req: IncomingMessage,
  res: ServerResponse,
  signal: AbortSignal,
  servedBy: () => string,
): Promise<void> {
  const sse = wantsEventStream(req);
  let keepAlive: NodeJS.Timeout | undefined;
  let sequence = 0;
  const start = (): void => {
    if (res.headersSent) return;
    res.writeHead(200, {
      'content-type': sse ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
      'cache-control': 'no-cache, no-store',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    if (sse) {
      keepAlive = setInterval(() => void writeChunk(res, ': keep-alive\n\n'), deps.sseKeepAliveMs ?? 15_000);
      keepAlive.unref();
    }
  };
  let learned = false;
  const it = messages[Symbol.asyncIterator]();
  try {
    // Until the first message, a failure can still be answered with its HTTP status; a stream
    // that stays silent gets its 200 headers after a short wait, so clients see it is open.
    let pending = it.next();
    const first = await Promise.race([
      pending,
      new Promise<'wait'>((resolve) => setTimeout(() => resolve('wait'), deps.streamHeaderWaitMs ?? 250).unref()),
    ]);
    if (first === 'wait') start();
    else pending = Promise.resolve(first);
    for (;;) {
      const step = await pending;
      if (step.done) break;
      start();
      const decoded = decodeObject(route.responseType, step.value);
      if (!learned) {
        learned = true;
        const key = learnedKey(route.responseType, decoded);
        if (key && servedBy()) pool.remember(key, servedBy());
      }
      const body = selectResponseBody(route, messageToJson(route.responseType, decoded) as Record<string, unknown>);
      sequence += 1;
      const chunk = sse ? `id: ${sequence}\ndata: ${JSON.stringify(body)}\n\n` : `${JSON.stringify({ result: body })}\n`;
      if (!(await writeChunk(res, chunk))) return; // client gone: the abort cancels the call
      pending = it.next();
    }
    start();
    if (sse) await writeChunk(res, 'event: end\ndata: {}\n\n');
    res.end();
  } catch (err) {
    if (signal.aborted) return;
    const e = describeAny(err);
    if (!res.headersSent) {
      sendGoogleError(res, e);
      return;
    }
    const body = googleErrorBody(e);
    await writeChunk(res, sse ? `event: error\ndata: ${JSON.stringify(body)}\n\n` : `${JSON.stringify(body)}\n`);
    res.end();
  } finally {
    if (keepAlive) clearInterval(keepAlive);
    it.return?.(undefined)?.catch(() => undefined);
  }
}
