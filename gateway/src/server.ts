/**
 * The gateway service: a public HTTP listener (annotated proto routes, OpenAI-compatible
 * endpoints, OpenAPI) behind API keys, rate limits, body and prompt limits and CORS, and an
 * admin listener (health, readiness, Prometheus metrics) that needs no key.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpBindings } from '@diffmesh/protos';
import {
  Code,
  DiffmeshError,
  InlineTensorStore,
  RemoteTensorStore,
  loadTlsFiles,
  SpanKind,
  extractTraceContext,
  withSpan,
  createDiscovery,
  packageVersion,
  type Discovery,
  type Logger,
  type Registration,
} from '@diffmesh/runtime';
import { ApiKeys, RateLimiter, clientAddress } from './auth.js';
import type { GatewayConfig } from './config.js';
import { HttpStatusError, describeAny, gatewayError, googleErrorBody, openAiErrorBody } from './errors.js';
import { clientGone, header, parseQuery, percentDecode, readJsonOrForm, sendJson } from './http-util.js';
import { previewName } from './proto-json.js';
import { GatewayMetrics } from './metrics.js';
import {
  ModelDirectory,
  createImages,
  createVideo,
  deleteVideo,
  getVideo,
  listModels,
  LIST_VIDEOS_QUERY,
  listVideos,
  retrieveModel,
  sendImageResult,
  sendObjectImage,
  sendVideoContent,
  type OpenAiDeps,
  type ParamMapper,
} from './openai.js';
import { openApiDocument } from './openapi.js';
import { handleProtoRoute, type ProtoRouteDeps } from './proto-handler.js';
import { ResultStore } from './results.js';
import { RouteTable } from './routes.js';
import { SchedulerApi } from './scheduler-api.js';
import { loadStatusPage, sendAsset } from './status-page.js';
import { UpstreamPool } from './upstream.js';
import { VideoJobs } from './videos.js';

/** A running gateway. */

/** Span of one HTTP request at the gateway. */
const SPAN_GATEWAY_REQUEST = 'diffmesh.gateway.request';
export interface RunningGateway {
  /** `http://host:port` of the public listener. */
  address: string;
  /** `http://host:port` of the admin listener. */
  adminAddress: string;
  routes: RouteTable;
  schedulers: UpstreamPool;
  tensors: UpstreamPool;
  /** Graceful stop: leave discovery, stop accepting, let open requests finish (up to the grace). Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@link startGateway}. */
export interface StartGatewayOptions {
  /** Discovery to use instead of connecting to `config.natsUrl` (the caller closes it). */
  discovery?: Discovery;
  /** Version advertised in discovery and the OpenAPI document. */
  version?: string;
}

type Style = 'google' | 'openai';

interface FixedRoute {
  method: string;
  pattern: RegExp;
  label: string;
  /** Query parameters the route reads (on `/v1/` routes any other one is a 400). */
  query?: readonly string[];
  /** Served without an API key (and without counting against the rate limit). */
  open?: boolean;
  handle(ctx: RequestCtx, m: RegExpExecArray): Promise<void> | void;
}

interface RequestCtx {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  signal: AbortSignal;
  paramOf?: ParamMapper;
  /** The caller's API key identity, when authentication is on: video jobs are scoped to it. */
  owner?: string;
}

function parseListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(listen.slice(i + 1)) };
}

function listen(server: Server, addr: string): Promise<{ host: string; port: number }> {
  const { host, port } = parseListen(addr);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const a = server.address() as AddressInfo;
      resolve({ host: a.address, port: a.port });
    });
  });
}

const urlOf = ({ host, port }: { host: string; port: number }): string => `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

/** A path variable of a fixed route, decoded; malformed percent-encoding is a 400 naming `field`. */
function decode(s: string, field: string): string {
  const decoded = percentDecode(s);
  if (decoded === undefined) throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'malformed percent-encoding in the URL path', { field });
  return decoded;
}

/** Refuses a query parameter a route does not read, or one given twice, naming it. */
function checkQuery(query: URLSearchParams, known: readonly string[]): void {
  const seen = new Set<string>();
  for (const key of query.keys()) {
    if (!known.includes(key)) {
      const supported = known.length > 0 ? `supported: ${known.join(', ')}` : 'this route takes none';
      throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `unknown query parameter (${supported})`, { field: previewName(key) });
    }
    if (seen.has(key)) throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'is given more than once', { field: key });
    seen.add(key);
  }
}

/** Starts the gateway's two listeners and its upstream pools. */
export async function startGateway(config: GatewayConfig, log: Logger, opts: StartGatewayOptions = {}): Promise<RunningGateway> {
  const version = opts.version ?? packageVersion(import.meta.url);
  const ownDiscovery = !opts.discovery && config.natsUrl ? await createDiscovery({ backend: 'nats', url: config.natsUrl }, log) : undefined;
  const discovery = opts.discovery ?? ownDiscovery;
  // The first poll: schedulers already running are in the pools before the first request.
  if (discovery) await discovery.instances();
  let metrics: GatewayMetrics | undefined;
  const tls = loadTlsFiles(config.tls);
  const schedulers = new UpstreamPool({
    name: 'scheduler',
    ...(tls ? { tls } : {}),
    addresses: config.schedulerAddresses,
    ...(discovery ? { discovery, stage: 'scheduler' as const } : {}),
    notFoundReasons: ['REQUEST_NOT_FOUND'],
    timeoutMs: config.upstreamTimeoutMs,
    onFailover: () => metrics?.failovers.inc({ pool: 'scheduler' }),
    log,
  });
  const tensors = new UpstreamPool({
    name: 'tensor service',
    ...(tls ? { tls } : {}),
    addresses: config.tensorAddresses,
    ...(discovery ? { discovery, stage: 'tensor' as const } : {}),
    notFoundReasons: ['OBJECT_NOT_FOUND', 'OBJECT_EXPIRED'],
    timeoutMs: config.upstreamTimeoutMs,
    onFailover: () => metrics?.failovers.inc({ pool: 'tensor' }),
    log,
  });
  metrics = new GatewayMetrics(() => ({ scheduler: schedulers.addresses().length, tensor: tensors.addresses().length }));
  const upstreams = new Map<string, UpstreamPool>([
    ['diffmesh.scheduler.v1.SchedulerService', schedulers],
    ['diffmesh.tensor.v1.TensorService', tensors],
  ]);
  const routes = new RouteTable(httpBindings());
  const store = new InlineTensorStore(new RemoteTensorStore({ address: '', nodeId: config.nodeId, log, ...(tls ? { tls } : {}) }));
  const api = new SchedulerApi(schedulers);
  const results = new ResultStore(store, config.resultTtlMs, log, config.maxImageResults);
  const videos = new VideoJobs({ api, store, ttlMs: config.resultTtlMs, maxJobs: config.maxVideoJobs, ffmpegPath: config.ffmpegPath, log });
  const keys = new ApiKeys(config.apiKeys);
  const limiter = new RateLimiter(config.rateLimitPerMinute, config.rateLimitBurst, {
    message: `rate limit exceeded for this ${keys.enabled ? 'API key' : 'client address'}; retry later`,
  });
  // Failed attempts cost tokens of the client address, so keys cannot be guessed at full speed.
  const authFailures = new RateLimiter(keys.enabled ? config.authFailuresPerMinute : 0, 0, {
    message: 'too many failed authentication attempts from this client address; retry later',
  });
  const sweeper = setInterval(() => {
    limiter.sweep();
    authFailures.sweep();
  }, 60_000);
  sweeper.unref();
  const openApi = openApiDocument(routes.routes, { version, authenticated: keys.enabled });
  const statusPage = loadStatusPage();
  const protoDeps: ProtoRouteDeps = { upstreams, maxBodyBytes: config.maxBodyBytes, maxPromptChars: config.maxPromptChars };
  const oa: OpenAiDeps = {
    api,
    store,
    results,
    tensors,
    videos,
    models: new ModelDirectory(api),
    metrics,
    maxBodyBytes: config.maxBodyBytes,
    maxPromptChars: config.maxPromptChars,
    publicUrl: config.publicUrl,
    log,
  };
  const m = metrics;

  const fixed: FixedRoute[] = [
    { method: 'GET', pattern: /^\/openapi\.json$/, label: 'openapi', open: true, handle: (c) => sendJson(c.res, 200, openApi) },
    // The status page is static and public; its API calls carry the key the user enters.
    {
      method: 'GET',
      pattern: /^\/status(?:\/status\.(?:js|css))?$/,
      label: 'status.page',
      open: true,
      handle: (c, mm) => sendAsset(c.res, statusPage.get(mm[0])!),
    },
    {
      method: 'GET',
      pattern: /^\/status\/$/,
      label: 'status.page',
      open: true,
      handle: (c) => {
        c.res.writeHead(308, { location: '../status', 'content-length': '0' });
        c.res.end();
      },
    },
    {
      method: 'POST',
      pattern: /^\/v1\/images\/generations$/,
      label: 'openai.images.generations',
      handle: async (c) => {
        const body = await readJsonOrForm(c.req, config.maxBodyBytes);
        await createImages(oa, c.req, c.res, body, c.signal, (p) => (c.paramOf = p));
      },
    },
    {
      method: 'GET',
      pattern: /^\/v1\/images\/results\/([A-Za-z0-9_-]+?)(?:\.png)?$/,
      label: 'openai.images.results',
      open: true,
      handle: (c, mm) => sendImageResult(oa, c.res, mm[1]),
    },
    {
      method: 'GET',
      pattern: /^\/v1\/images\/objects\/([^/]+)\.png$/,
      label: 'images.objects',
      handle: (c, mm) => sendObjectImage(oa, c.res, decode(mm[1], 'object_id'), c.signal),
    },
    { method: 'GET', pattern: /^\/v1\/models$/, label: 'openai.models.list', handle: (c) => listModels(oa, c.res, c.signal) },
    { method: 'GET', pattern: /^\/v1\/models\/(.+)$/, label: 'openai.models.retrieve', handle: (c, mm) => retrieveModel(oa, c.res, decode(mm[1], 'model'), c.signal) },
    {
      method: 'POST',
      pattern: /^\/v1\/videos$/,
      label: 'openai.videos.create',
      handle: async (c) => {
        const body = await readJsonOrForm(c.req, config.maxBodyBytes);
        await createVideo(oa, c.res, body, c.owner, c.signal, (p) => (c.paramOf = p));
      },
    },
    { method: 'GET', pattern: /^\/v1\/videos$/, label: 'openai.videos.list', query: LIST_VIDEOS_QUERY, handle: (c) => listVideos(oa, c.res, c.query, c.owner) },
    { method: 'GET', pattern: /^\/v1\/videos\/([^/]+)$/, label: 'openai.videos.retrieve', handle: (c, mm) => getVideo(oa, c.res, decode(mm[1], 'video_id'), c.owner) },
    { method: 'DELETE', pattern: /^\/v1\/videos\/([^/]+)$/, label: 'openai.videos.delete', handle: (c, mm) => deleteVideo(oa, c.res, decode(mm[1], 'video_id'), c.owner) },
    {
      method: 'GET',
      pattern: /^\/v1\/videos\/([^/]+)\/content$/,
      label: 'openai.videos.content',
      query: ['variant'],
      handle: (c, mm) => sendVideoContent(oa, c.res, decode(mm[1], 'video_id'), c.query.get('variant') ?? 'video', c.owner),
    },
  ];

  /** Sets CORS headers; answers a preflight. Returns true when the request is done. */
  const cors = (req: IncomingMessage, res: ServerResponse): boolean => {
    const origin = header(req, 'origin');
    if (!origin || config.corsOrigins.length === 0) return false;
    const any = config.corsOrigins.includes('*');
    const preflight = req.method === 'OPTIONS' && header(req, 'access-control-request-method') !== undefined;
    if (!any && !config.corsOrigins.includes(origin)) {
      if (preflight) {
        sendJson(res, 403, googleErrorBody({ httpStatus: 403, code: Code.PERMISSION_DENIED, status: 'PERMISSION_DENIED', message: `origin ${origin} is not allowed`, reason: 'UNAUTHENTICATED', details: [] }));
        return true;
      }
      return false;
    }
    res.setHeader('access-control-allow-origin', any ? '*' : origin);
    res.setHeader('vary', 'Origin');
    res.setHeader('access-control-expose-headers', 'Retry-After, X-Diffmesh-Video-Format, Content-Disposition');
    if (!preflight) return false;
    res.writeHead(204, {
      'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
      'access-control-allow-headers': header(req, 'access-control-request-headers') ?? 'authorization, content-type, accept',
      'access-control-max-age': '600',
    });
    res.end();
    return true;
  };

  const writeError = (c: RequestCtx, err: unknown, style: Style): void => {
    if (c.signal.aborted) return; // the client is gone; its call was cancelled
    const e = describeAny(err);
    if (e.httpStatus >= 500) {
      // Errors with a status are answers from the mesh; anything else is a gateway bug worth its stack.
      const answered = err instanceof DiffmeshError || (typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'number');
      const fields = { method: c.req.method, url: c.req.url, status: e.httpStatus, reason: e.reason, msg: e.message };
      if (answered) log.warn(fields, 'request failed');
      else log.error({ ...fields, err }, 'request failed');
    } else log.debug({ method: c.req.method, url: c.req.url, status: e.httpStatus, reason: e.reason, msg: e.message }, 'request refused');
    if (e.reason === 'RATE_LIMITED') m.rateLimited.inc();
    const headers: Record<string, string> = err instanceof HttpStatusError ? { ...err.headers } : {};
    if (e.retryAfterSeconds !== undefined) headers['retry-after'] = String(e.retryAfterSeconds);
    if (e.httpStatus === 401) headers['www-authenticate'] = 'Bearer';
    if (headers.connection === 'close') c.req.resume(); // discard the rest of an oversize body
    if (c.res.headersSent) {
      c.res.end();
      return;
    }
    sendJson(c.res, e.httpStatus, style === 'openai' ? openAiErrorBody(e, c.paramOf) : googleErrorBody(e), headers);
  };

  /**
   * The request's identity (API key, or client address when authentication is off). An
   * address that has used up its failed attempts is refused (429) before its key is even
   * looked at, so a guess that happens to be right is refused too.
   */
  const authenticate = (req: IncomingMessage): string => {
    const address = clientAddress(req);
    try {
      authFailures.check(address);
    } catch (err) {
      log.info({ address }, 'too many failed authentication attempts');
      throw err;
    }
    try {
      return keys.authenticate(req);
    } catch (err) {
      authFailures.take(address); // check() left at least one token
      throw err;
    }
  };

  let inFlight = 0;
  let drained: (() => void) | undefined;

  const onRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const started = process.hrtime.bigint();
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const rawPath = q === -1 ? rawUrl : rawUrl.slice(0, q);
    const method = (req.method ?? 'GET').toUpperCase();
    const style: Style = rawPath.startsWith('/v1/') ? 'openai' : 'google';
    const c: RequestCtx = { req, res, query: new URLSearchParams(), signal: clientGone(res) };
    let label = 'unmatched';
    inFlight += 1;
    m.inFlight.inc();
    res.once('close', () => {
      inFlight -= 1;
      m.inFlight.dec();
      m.requests.inc({ route: label, method, code: String(res.statusCode) });
      m.duration.observe({ route: label, method }, Number(process.hrtime.bigint() - started) / 1e9);
      if (inFlight === 0) drained?.();
    });
    try {
      if (cors(req, res)) {
        label = 'cors.preflight';
        return;
      }
      let fixedMatch: { route: FixedRoute; m: RegExpExecArray } | undefined;
      const allowed = new Set<string>();
      for (const route of fixed) {
        const mm = route.pattern.exec(rawPath);
        if (!mm) continue;
        if (route.method === method) {
          fixedMatch = { route, m: mm };
          break;
        }
        allowed.add(route.method);
      }
      const protoMatch = fixedMatch || allowed.size > 0 ? undefined : routes.match(method, rawPath);
      label = fixedMatch?.route.label ?? (protoMatch?.kind === 'route' ? protoMatch.route.id : 'unmatched');
      if (!fixedMatch?.route.open) {
        const identity = authenticate(req);
        if (keys.enabled) c.owner = identity;
        try {
          limiter.take(identity);
        } catch (err) {
          log.info({ identity, route: label }, 'rate limited');
          throw err;
        }
      }
      const query = parseQuery(q === -1 ? '' : rawUrl.slice(q + 1));
      c.query = query;
      if (protoMatch?.kind === 'malformed') throw protoMatch.error;
      if (fixedMatch) {
        if (style === 'openai') checkQuery(query, fixedMatch.route.query ?? []);
        await fixedMatch.route.handle(c, fixedMatch.m);
        return;
      }
      if (allowed.size > 0 || protoMatch?.kind === 'method-not-allowed') {
        const allow = [...allowed, ...(protoMatch?.kind === 'method-not-allowed' ? protoMatch.allowed : [])].join(', ');
        throw new HttpStatusError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on ${rawPath} (allowed: ${allow})`, 'METHOD_NOT_ALLOWED', { allow });
      }
      if (protoMatch?.kind === 'route') {
        await handleProtoRoute(protoDeps, protoMatch.route, protoMatch.params, req, res, query, c.signal);
        return;
      }
      if (percentDecode(rawPath) === undefined) throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'malformed percent-encoding in the URL path');
      throw new HttpStatusError(404, 'NOT_FOUND', `no route for ${method} ${rawPath}`, 'UNKNOWN_ROUTE');
    } catch (err) {
      writeError(c, err, style);
    }
  };

  // One server span per HTTP request, continuing the caller's traceparent; upstream calls
  // made while handling it carry its context (see UpstreamPool).
  const traced = (req: IncomingMessage, res: ServerResponse): Promise<void> =>
    withSpan(
      SPAN_GATEWAY_REQUEST,
      { 'http.request.method': req.method ?? '', 'url.path': (req.url ?? '').split('?')[0] },
      async (span) => {
        await onRequest(req, res);
        span.setAttribute('http.response.status_code', res.statusCode);
      },
      { kind: SpanKind.SERVER, parent: extractTraceContext(req.headers as Record<string, string>) },
    );
  const server = createServer((req, res) => {
    traced(req, res).catch((err: unknown) => {
      // Never reached in practice (onRequest catches); a last guard so the process keeps serving.
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

  const admin = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      sendJson(res, 405, { status: 'method not allowed' }, { allow: 'GET' });
      return;
    }
    if (path === '/healthz') {
      sendJson(res, 200, { status: 'ok', version, schedulers: schedulers.addresses().length });
    } else if (path === '/readyz') {
      const n = schedulers.addresses().length;
      sendJson(res, n > 0 ? 200 : 503, { status: n > 0 ? 'ready' : 'no scheduler available', schedulers: n });
    } else if (path === '/metrics') {
      m.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': m.registry.contentType });
          res.end(text);
        },
        (err: unknown) => {
          log.warn({ err }, 'could not collect metrics');
          sendJson(res, 500, { status: 'could not collect metrics' });
        },
      );
    } else {
      sendJson(res, 404, { status: 'not found', paths: ['/healthz', '/readyz', '/metrics'] });
    }
  });

  let publicAddr: { host: string; port: number };
  let adminAddr: { host: string; port: number };
  try {
    publicAddr = await listen(server, config.listen);
    adminAddr = await listen(admin, config.adminListen);
  } catch (err) {
    server.close();
    admin.close();
    schedulers.close();
    tensors.close();
    await store.close();
    await ownDiscovery?.close();
    throw err;
  }
  const address = urlOf(publicAddr);
  const adminAddress = urlOf(adminAddr);
  let registration: Registration | undefined;
  if (discovery) {
    registration = await discovery
      .register({
        name: 'gateway',
        version,
        nodeId: config.nodeId,
        pool: '',
        stage: 'gateway',
        grpcAddress: `${publicAddr.host.includes(':') ? `[${publicAddr.host}]` : publicAddr.host}:${publicAddr.port}`,
        models: [],
        capacity: 0,
        metadata: { http_url: config.publicUrl || address, admin_url: adminAddress },
      })
      .catch((err: unknown) => {
        log.warn({ err }, 'could not register in discovery');
        return undefined;
      });
  }
  log.info({ address, adminAddress, schedulers: schedulers.addresses(), auth: keys.enabled, routes: routes.routes.length }, 'gateway ready');

  let stopping: Promise<void> | undefined;
  return {
    address,
    adminAddress,
    routes,
    schedulers,
    tensors,
    stop(graceMs = config.drainGraceMs) {
      stopping ??= (async () => {
        await registration?.stop().catch(() => undefined);
        const closed = Promise.all([new Promise<void>((r) => server.close(() => r())), new Promise<void>((r) => admin.close(() => r()))]);
        server.closeIdleConnections();
        admin.closeAllConnections();
        if (inFlight > 0) {
          await Promise.race([
            new Promise<void>((r) => (drained = r)),
            new Promise<void>((r) => setTimeout(r, graceMs).unref()),
          ]);
        }
        server.closeAllConnections();
        await closed;
        clearInterval(sweeper);
        videos.close();
        results.close();
        // Session streams end once their requests (cancelled with their HTTP requests) have.
        await Promise.race([api.close(), new Promise<void>((r) => setTimeout(r, 1000).unref())]);
        schedulers.close();
        tensors.close();
        await store.close();
        await ownDiscovery?.close();
      })();
      return stopping;
    },
  };
}
