/**
 * The gateway's own routes: the OpenAPI document, the status page and the OpenAI-compatible
 * endpoints. They are matched before the routes derived from the proto annotations
 * (`routes.ts`), by a regular expression per route.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code } from '@diffmesh/core';
import { gatewayError } from './errors.js';
import { percentDecode, readJsonOrForm, sendJson } from './http-util.js';
import {
  createImageEdit,
  createImages,
  createVideo,
  EDIT_FILE_FIELDS,
  deleteVideo,
  getVideo,
  listModels,
  LIST_VIDEOS_QUERY,
  listVideos,
  retrieveModel,
  sendImageResult,
  sendObjectImage,
  sendVideoContent,
  VIDEO_FILE_FIELDS,
  type OpenAiDeps,
  type ParamMapper,
} from './openai.js';
import { previewName } from './proto-json.js';
import { sendAsset, type StaticAsset } from './status-page.js';

/** What a route's handler gets: one HTTP request and what the gateway learned about it. */
export interface RequestCtx {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  signal: AbortSignal;
  paramOf?: ParamMapper;
  /** The caller's identity (its tenant, or its key), when authentication is on: video jobs are scoped to it. */
  owner?: string;
  /** The caller's API key: the scheduler calls made for it carry it (see `SchedulerClient.withApiKey`). */
  apiKey?: string;
}

/** The OpenAI routes' services calling the scheduler as the route's caller (with its API key). */
function forCaller(oa: OpenAiDeps, c: RequestCtx): OpenAiDeps {
  if (c.apiKey === undefined) return oa;
  const api = oa.api.withApiKey(c.apiKey);
  return { ...oa, api, models: oa.models.through(api) };
}

/** One of the gateway's own routes. */
export interface FixedRoute {
  method: string;
  pattern: RegExp;
  label: string;
  /** Query parameters the route reads (on `/v1/` routes any other one is a 400). */
  query?: readonly string[];
  /** Served without an API key (and without counting against the rate limit). */
  open?: boolean;
  handle(ctx: RequestCtx, m: RegExpExecArray): Promise<void> | void;
}

/** The result of looking a request up among the fixed routes (as `RouteMatch` is for the proto routes). */
export type FixedRouteMatch =
  | { kind: 'route'; route: FixedRoute; m: RegExpExecArray }
  /** The path is a fixed route's, the method is not: the methods that are. */
  | { kind: 'method-not-allowed'; allowed: string[] }
  | { kind: 'none' };

/** What the fixed routes serve from. */
export interface FixedRouteDeps {
  openApi: unknown;
  statusPage: ReadonlyMap<string, StaticAsset>;
  openAi: OpenAiDeps;
  maxBodyBytes: number;
  /** Largest input image (`/v1/images/edits`' image, `/v1/videos`' input_reference). */
  maxImageBytes: number;
}

/** A path variable of a fixed route, decoded; malformed percent-encoding is a 400 naming `field`. */
function decode(s: string, field: string): string {
  const decoded = percentDecode(s);
  if (decoded === undefined)
    throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'malformed percent-encoding in the URL path', { field });
  return decoded;
}

/** The gateway's own routes, in the order they are matched. */
export function fixedRoutes({ openApi, statusPage, openAi: oa, maxBodyBytes, maxImageBytes }: FixedRouteDeps): FixedRoute[] {
  const withFiles = (fields: readonly string[]) => ({ maxBodyBytes, files: { fields, maxFileBytes: maxImageBytes } });
  return [
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
        const body = await readJsonOrForm(c.req, { maxBodyBytes });
        await createImages(forCaller(oa, c), c.req, c.res, body, c.signal, (p) => (c.paramOf = p));
      },
    },
    {
      method: 'POST',
      pattern: /^\/v1\/images\/edits$/,
      label: 'openai.images.edits',
      handle: async (c) => {
        const body = await readJsonOrForm(c.req, withFiles(EDIT_FILE_FIELDS));
        await createImageEdit(forCaller(oa, c), c.req, c.res, body, c.signal, (p) => (c.paramOf = p));
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
      query: ['capability'],
      handle: (c, mm) => sendObjectImage(oa, c.res, decode(mm[1], 'object_id'), c.query.get('capability') ?? '', c.signal),
    },
    { method: 'GET', pattern: /^\/v1\/models$/, label: 'openai.models.list', handle: (c) => listModels(forCaller(oa, c), c.res, c.signal) },
    {
      method: 'GET',
      pattern: /^\/v1\/models\/(.+)$/,
      label: 'openai.models.retrieve',
      handle: (c, mm) => retrieveModel(forCaller(oa, c), c.res, decode(mm[1], 'model'), c.signal),
    },
    {
      method: 'POST',
      pattern: /^\/v1\/videos$/,
      label: 'openai.videos.create',
      handle: async (c) => {
        const body = await readJsonOrForm(c.req, withFiles(VIDEO_FILE_FIELDS));
        await createVideo(forCaller(oa, c), c.res, body, c.owner, c.signal, (p) => (c.paramOf = p));
      },
    },
    {
      method: 'GET',
      pattern: /^\/v1\/videos$/,
      label: 'openai.videos.list',
      query: LIST_VIDEOS_QUERY,
      handle: (c) => listVideos(oa, c.res, c.query, c.owner),
    },
    {
      method: 'GET',
      pattern: /^\/v1\/videos\/([^/]+)$/,
      label: 'openai.videos.retrieve',
      handle: (c, mm) => getVideo(oa, c.res, decode(mm[1], 'video_id'), c.owner),
    },
    {
      method: 'DELETE',
      pattern: /^\/v1\/videos\/([^/]+)$/,
      label: 'openai.videos.delete',
      handle: (c, mm) => deleteVideo(oa, c.res, decode(mm[1], 'video_id'), c.owner),
    },
    {
      method: 'GET',
      pattern: /^\/v1\/videos\/([^/]+)\/content$/,
      label: 'openai.videos.content',
      query: ['variant'],
      handle: (c, mm) => sendVideoContent(oa, c.res, decode(mm[1], 'video_id'), c.query.get('variant') ?? 'video', c.owner),
    },
  ];
}

/** The first route whose pattern and method fit, else the methods of those whose pattern fits. */
export function matchFixedRoute(routes: readonly FixedRoute[], method: string, rawPath: string): FixedRouteMatch {
  const allowed = new Set<string>();
  for (const route of routes) {
    const m = route.pattern.exec(rawPath);
    if (!m) continue;
    if (route.method === method) return { kind: 'route', route, m };
    allowed.add(route.method);
  }
  return allowed.size > 0 ? { kind: 'method-not-allowed', allowed: [...allowed] } : { kind: 'none' };
}

/** Refuses a query parameter a route does not read, or one given twice, naming it. */
export function checkQuery(query: URLSearchParams, known: readonly string[]): void {
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
