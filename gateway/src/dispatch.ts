/**
 * Request → handler: every HTTP request of the public listener passes CORS, is looked up
 * among the gateway's own routes and then the proto-derived ones, passes the auth step
 * (unless its route is open), and goes to its handler. Whatever it throws becomes an error
 * body in the style of its route (google.rpc.Status for `/api/…`, OpenAI for `/v1/…`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code, DiffmeshError, type Logger } from '@diffmesh/core';
import type { Gatekeeper } from './auth.js';
import type { Cors } from './cors.js';
import { HttpStatusError, describeAny, gatewayError, googleErrorBody, openAiErrorBody } from './errors.js';
import { checkQuery, matchFixedRoute, type FixedRoute, type RequestCtx } from './fixed-routes.js';
import { clientGone, parseQuery, percentDecode, sendJson } from './http-util.js';
import type { GatewayMetrics } from './metrics.js';
import { handleProtoRoute, type ProtoRouteDeps } from './proto-handler.js';
import type { ProtoRoute, RouteTable } from './routes.js';

/** The error body a route answers with. */
type ErrorStyle = 'google' | 'openai';

/** What {@link Dispatcher} routes to. */
export interface DispatcherDeps {
  /** The gateway's own routes, matched first. */
  fixed: readonly FixedRoute[];
  /** The routes derived from the proto annotations. */
  routes: RouteTable;
  proto: ProtoRouteDeps;
  cors: Cors;
  gatekeeper: Gatekeeper;
  metrics: GatewayMetrics;
  log: Logger;
}

/** Where a request goes: one of the gateway's own routes, else a proto-derived one. */
type Resolution =
  | { kind: 'fixed'; route: FixedRoute; m: RegExpExecArray }
  | { kind: 'proto'; route: ProtoRoute; params: Record<string, string> }
  | { kind: 'method-not-allowed'; allowed: string[] }
  | { kind: 'malformed'; error: Error }
  | { kind: 'none' };

/** Looks a request up among the fixed routes, then (for a path none of them has) the proto routes. */
function resolve(fixed: readonly FixedRoute[], routes: RouteTable, method: string, rawPath: string): Resolution {
  const own = matchFixedRoute(fixed, method, rawPath);
  if (own.kind === 'route') return { kind: 'fixed', route: own.route, m: own.m };
  if (own.kind === 'method-not-allowed') return own;
  const match = routes.match(method, rawPath);
  return match.kind === 'route' ? { kind: 'proto', route: match.route, params: match.params } : match;
}

/** Serves the public listener's requests and counts the ones still open. */
export class Dispatcher {
  private open = 0;
  private drained: (() => void) | undefined;

  constructor(private readonly deps: DispatcherDeps) {}

  /** Requests being answered (open streams included). */
  get openRequests(): number {
    return this.open;
  }

  /** Resolves once no request is open, or after `graceMs`. */
  async drain(graceMs: number): Promise<void> {
    if (this.open === 0) return;
    await Promise.race([new Promise<void>((r) => (this.drained = r)), new Promise<void>((r) => setTimeout(r, graceMs).unref())]);
  }

  /** Answers one request; never throws (errors become error responses). */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { fixed, routes, proto, cors, gatekeeper, metrics: m } = this.deps;
    const started = process.hrtime.bigint();
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const rawPath = q === -1 ? rawUrl : rawUrl.slice(0, q);
    const method = (req.method ?? 'GET').toUpperCase();
    const style: ErrorStyle = rawPath.startsWith('/v1/') ? 'openai' : 'google';
    const c: RequestCtx = { req, res, query: new URLSearchParams(), signal: clientGone(res) };
    let label = 'unmatched';
    this.open += 1;
    m.inFlight.inc();
    res.once('close', () => {
      this.open -= 1;
      m.inFlight.dec();
      m.requests.inc({ route: label, method, code: String(res.statusCode) });
      m.duration.observe({ route: label, method }, Number(process.hrtime.bigint() - started) / 1e9);
      if (this.open === 0) this.drained?.();
    });
    try {
      if (cors.apply(req, res) === 'answered') {
        label = 'cors.preflight';
        return;
      }
      const found = resolve(fixed, routes, method, rawPath);
      label = found.kind === 'fixed' ? found.route.label : found.kind === 'proto' ? found.route.id : 'unmatched';
      if (!(found.kind === 'fixed' && found.route.open)) {
        const caller = gatekeeper.admit(req, label);
        if (caller.owner !== undefined) c.owner = caller.owner;
        if (caller.apiKey !== undefined) c.apiKey = caller.apiKey;
      }
      c.query = parseQuery(q === -1 ? '' : rawUrl.slice(q + 1));
      switch (found.kind) {
        case 'malformed':
          throw found.error;
        case 'fixed':
          if (style === 'openai') checkQuery(c.query, found.route.query ?? []);
          await found.route.handle(c, found.m);
          return;
        case 'method-not-allowed': {
          const allow = found.allowed.join(', ');
          throw new HttpStatusError(
            405,
            'METHOD_NOT_ALLOWED',
            `${method} is not allowed on ${rawPath} (allowed: ${allow})`,
            'METHOD_NOT_ALLOWED',
            { allow },
          );
        }
        case 'proto':
          await handleProtoRoute(proto, found.route, found.params, req, res, c.query, c.signal);
          return;
        case 'none':
          // No route, so no variable to name: the path as a whole is at fault.
          if (percentDecode(rawPath) === undefined)
            throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'malformed percent-encoding in the URL path', { field: 'path' });
          throw new HttpStatusError(404, 'NOT_FOUND', `no route for ${method} ${rawPath}`, 'UNKNOWN_ROUTE');
      }
    } catch (err) {
      this.writeError(c, err, style);
    }
  }

  /** Error mapping: the error's HTTP status, body and headers; a log line at a level that fits. */
  private writeError(c: RequestCtx, err: unknown, style: ErrorStyle): void {
    const { log, metrics } = this.deps;
    if (c.signal.aborted) return; // the client is gone; its call was cancelled
    const e = describeAny(err);
    if (e.httpStatus >= 500) {
      // Errors with a status are answers from the mesh; anything else is a gateway bug worth its stack.
      const answered =
        err instanceof DiffmeshError || (typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'number');
      const fields = { method: c.req.method, url: c.req.url, status: e.httpStatus, reason: e.reason, msg: e.message };
      if (answered) log.warn(fields, 'request failed');
      else log.error({ ...fields, err }, 'request failed');
    } else log.debug({ method: c.req.method, url: c.req.url, status: e.httpStatus, reason: e.reason, msg: e.message }, 'request refused');
    if (e.reason === 'RATE_LIMITED') metrics.rateLimited.inc();
    const headers: Record<string, string> = err instanceof HttpStatusError ? { ...err.headers } : {};
    if (e.retryAfterSeconds !== undefined) headers['retry-after'] = String(e.retryAfterSeconds);
    if (e.httpStatus === 401) headers['www-authenticate'] = 'Bearer';
    if (headers.connection === 'close') c.req.resume(); // discard the rest of an oversize body
    if (c.res.headersSent) {
      c.res.end();
      return;
    }
    sendJson(c.res, e.httpStatus, style === 'openai' ? openAiErrorBody(e, c.paramOf) : googleErrorBody(e), headers);
  }
}
