import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { isWildcardHost } from './grpc/advertise.js';
import type { Logger } from './logging/index.js';

/** Metrics rendered by hand (not a prom-client registry), e.g. tensor-svc's. */
export interface MetricsSource {
  contentType: string;
  render(): string | Promise<string>;
}

/** A running Prometheus endpoint. */
export interface MetricsEndpoint {
  /** `http://host:port/metrics` (a wildcard listen host is shown as the advertise host, else 127.0.0.1). */
  url: string;
  /** `host:port` of `url`. */
  address: string;
  /** Stops listening; idempotent. */
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (Prometheus text format of `source`: a prom-client registry or a
 * render function) on `listen` (`host:port`; port 0 = any free port; an empty host means
 * 127.0.0.1). Anything else answers 404. `advertiseHost` (the service's advertised host, e.g.
 * from `--advertise-address`) names the endpoint in its `url` when it listens on every interface.
 */
export async function startMetricsEndpoint(
  source: Registry | MetricsSource,
  listen: string,
  log: Logger,
  advertiseHost = '',
): Promise<MetricsEndpoint> {
  const render = 'metrics' in source ? () => source.metrics() : () => source.render();
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      Promise.resolve()
        .then(render)
        .then(
          (text) => {
            res.writeHead(200, { 'content-type': source.contentType });
            res.end(text);
          },
          (err: unknown) => {
            log.warn({ err }, 'metrics collection failed');
            res.writeHead(500).end();
          },
        );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics\n');
  });
  const at = listen.lastIndexOf(':');
  // `[::1]:9464` names an IPv6 host; listen() wants it without the brackets.
  const host = ((at >= 0 ? listen.slice(0, at) : '') || '127.0.0.1').replace(/^\[(.*)\]$/, '$1');
  const port = Number(at >= 0 ? listen.slice(at + 1) : listen);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`metrics listen address "${listen}": expected host:port with a port from 0 to 65535`);
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // The process exits on its own terms; an open metrics port never keeps it alive.
  server.unref();
  const addr = server.address();
  const bound = typeof addr === 'object' && addr ? addr.port : port;
  const shown = isWildcardHost(host) ? advertiseHost || '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shown}:${bound}/metrics`,
    address: `${shown}:${bound}`,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
