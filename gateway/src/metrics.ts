import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The gateway's Prometheus metrics, in a registry of their own (served on the admin port). */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'route' | 'method' | 'code'>;
  readonly duration: Histogram<'route' | 'method'>;
  readonly inFlight: Gauge;
  readonly rateLimited: Counter;
  readonly failovers: Counter<'pool'>;
  readonly images: Counter<'model'>;
  readonly videos: Counter<'model'>;

  constructor(upstreams: () => Record<string, number>) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'diffmesh_gateway_http_requests_total',
      help: 'HTTP requests answered, by route, method and status code',
      labelNames: ['route', 'method', 'code'],
      registers,
    });
    this.duration = new Histogram({
      name: 'diffmesh_gateway_http_request_duration_seconds',
      help: 'Time from request to the end of the response (streams included)',
      labelNames: ['route', 'method'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.inFlight = new Gauge({
      name: 'diffmesh_gateway_http_requests_in_flight',
      help: 'Requests being answered (open streams included)',
      registers,
    });
    this.rateLimited = new Counter({ name: 'diffmesh_gateway_rate_limited_total', help: 'Requests refused by the rate limit', registers });
    this.failovers = new Counter({
      name: 'diffmesh_gateway_upstream_failovers_total',
      help: 'Calls moved to another instance after UNAVAILABLE',
      labelNames: ['pool'],
      registers,
    });
    this.images = new Counter({
      name: 'diffmesh_gateway_images_total',
      help: 'Images generated through /v1/images/generations',
      labelNames: ['model'],
      registers,
    });
    this.videos = new Counter({
      name: 'diffmesh_gateway_video_jobs_total',
      help: 'Video jobs created through /v1/videos',
      labelNames: ['model'],
      registers,
    });
    new Gauge({
      name: 'diffmesh_gateway_upstream_instances',
      help: 'Instances the gateway can call, by pool',
      labelNames: ['pool'],
      registers,
      collect() {
        for (const [pool, n] of Object.entries(upstreams())) this.set({ pool }, n);
      },
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'diffmesh_gateway_' });
  }
}
