/**
 * The admin listener: health (`/healthz`), readiness (`/readyz`: a scheduler to call) and
 * Prometheus metrics (`/metrics`), on a port of its own and without an API key.
 */
import { createServer, type Server } from 'node:http';
import type { Logger } from '@diffmesh/core';
import { sendJson } from './http-util.js';
import type { GatewayMetrics } from './metrics.js';
import type { UpstreamPool } from '@diffmesh/client';

/** What the admin listener reports on. */
export interface AdminListenerDeps {
  version: string;
  schedulers: UpstreamPool;
  metrics: GatewayMetrics;
  log: Logger;
}

/** The admin listener's server (not yet listening). */
export function createAdminListener({ version, schedulers, metrics: m, log }: AdminListenerDeps): Server {
  return createServer((req, res) => {
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
}
