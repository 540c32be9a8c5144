/**
 * CORS at the edge (off while no origin is configured): response headers for allowed
 * origins, and answers to preflight requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code } from '@diffmesh/core';
import { googleErrorBody } from './errors.js';
import { header, sendJson } from './http-util.js';

/** What the CORS step did: answered the request (a preflight), or left it to the routes. */
export type CorsOutcome = 'answered' | 'continue';

/** The CORS policy of the configured origins (`*` = any; none = CORS off). */
export class Cors {
  constructor(private readonly origins: readonly string[]) {}

  /** Sets CORS headers on `res`; answers a preflight (204, or 403 for an origin not allowed). */
  apply(req: IncomingMessage, res: ServerResponse): CorsOutcome {
    const origin = header(req, 'origin');
    if (!origin || this.origins.length === 0) return 'continue';
    const any = this.origins.includes('*');
    const preflight = req.method === 'OPTIONS' && header(req, 'access-control-request-method') !== undefined;
    if (!any && !this.origins.includes(origin)) {
      if (preflight) {
        sendJson(
          res,
          403,
          googleErrorBody({
            httpStatus: 403,
            code: Code.PERMISSION_DENIED,
            status: 'PERMISSION_DENIED',
            message: `origin ${origin} is not allowed`,
            reason: 'UNAUTHENTICATED',
            details: [],
          }),
        );
        return 'answered';
      }
      return 'continue';
    }
    res.setHeader('access-control-allow-origin', any ? '*' : origin);
    res.setHeader('vary', 'Origin');
    res.setHeader('access-control-expose-headers', 'Retry-After, X-Diffmesh-Video-Format, Content-Disposition');
    if (!preflight) return 'continue';
    res.writeHead(204, {
      'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
      'access-control-allow-headers': header(req, 'access-control-request-headers') ?? 'authorization, content-type, accept',
      'access-control-max-age': '600',
    });
    res.end();
    return 'answered';
  }
}
