/**
 * The public HTTP listener: one server span per request (continuing the caller's
 * `traceparent`; upstream calls made while handling it carry its context, see UpstreamPool),
 * and a bare 400 for malformed HTTP. Nothing a client sends stops it serving.
 */
import { createServer, type Server } from 'node:http';
import { SpanKind, extractTraceContext, withSpan, type Logger } from '@diffmesh/core';
import type { Dispatcher } from './dispatch.js';
import { describeAny, googleErrorBody } from './errors.js';
import { sendJson } from './http-util.js';

/** Span of one HTTP request at the gateway. */
const SPAN_GATEWAY_REQUEST = 'diffmesh.gateway.request';

/** The public listener's server (not yet listening), serving through `dispatcher`. */
export function createPublicListener(dispatcher: Dispatcher, log: Logger): Server {
  const server = createServer((req, res) => {
    withSpan(
      SPAN_GATEWAY_REQUEST,
      { 'http.request.method': req.method ?? '', 'url.path': (req.url ?? '').split('?')[0] },
      async (span) => {
        await dispatcher.handle(req, res);
        span.setAttribute('http.response.status_code', res.statusCode);
      },
      { kind: SpanKind.SERVER, parent: extractTraceContext(req.headers as Record<string, string>) },
    ).catch((err: unknown) => {
      // Never reached in practice (the dispatcher catches); a last guard so the process keeps serving.
      log.error({ err }, 'unhandled error in a request');
      if (!res.headersSent) sendJson(res, 500, googleErrorBody(describeAny(err)));
      else res.destroy();
    });
  });
  server.on('clientError', (err, socket) => {
    // Malformed HTTP: answer 400 when the socket still takes it, never crash.
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
    log.debug({ err }, 'malformed HTTP request');
  });
  return server;
}
