import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from '../logging/index.js';
import { channelOptions, serverCredentials, type TlsFiles } from './channel.js';
import { defaultDescriptorRegistry, ReflectionService } from './reflection.js';
import { guardServiceDefinition, rejectMalformedRequests } from './request-decoding.js';

const HEALTH_SERVICE = 'grpc.health.v1.Health';

/** One service to add to a server. */
export interface ServiceBinding {
  /** Fully qualified name, e.g. `diffmesh.stage.v1.StageService` (used for health and reflection). */
  name: string;
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
}

export interface GrpcServerOptions {
  /** `host:port`; port 0 picks a free one. */
  address: string;
  services: ServiceBinding[];
  log: Logger;
  tls?: TlsFiles;
}

/**
 * A grpc-js server whose every service (health and reflection too) answers a malformed
 * request message with INVALID_ARGUMENT naming the message type and field, never INTERNAL
 * (see request-decoding.ts).
 */
class CheckedServer extends grpc.Server {
  private readonly registry = defaultDescriptorRegistry();

  constructor(options: grpc.ServerOptions) {
    super({ ...options, interceptors: [rejectMalformedRequests, ...(options.interceptors ?? [])] });
  }

  override addService(service: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation): void {
    super.addService(guardServiceDefinition(service, this.registry), implementation);
  }
}

/**
 * A running gRPC server with `grpc.health.v1` health (overall and per service) and standard
 * server reflection (v1 and v1alpha, from the compiled descriptors) of the services it hosts.
 * `drain()` is the graceful half of shutdown: health goes NOT_SERVING, no new calls are
 * accepted, and calls in flight get `graceMs` to finish before being cut.
 */
export class GrpcServer {
  /** `host:port` actually bound. */
  readonly address: string;
  readonly port: number;
  private readonly health: HealthImplementation;
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly server: grpc.Server,
    private readonly names: string[],
    health: HealthImplementation,
    host: string,
    port: number,
    private readonly log: Logger,
  ) {
    this.health = health;
    this.port = port;
    this.address = `${host}:${port}`;
  }

  static async start(opts: GrpcServerOptions): Promise<GrpcServer> {
    const server = new CheckedServer(channelOptions());
    const names = opts.services.map((s) => s.name);
    const health = new HealthImplementation(Object.fromEntries([['', 'NOT_SERVING'], ...names.map((n) => [n, 'NOT_SERVING'])]));
    health.addToServer(server);
    new ReflectionService({ services: [HEALTH_SERVICE, ...names] }).addToServer(server);
    for (const s of opts.services) server.addService(s.definition, s.implementation);
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync(opts.address, serverCredentials(opts.tls), (err, p) => (err ? reject(err) : resolve(p)));
    });
    const host = opts.address.slice(0, opts.address.lastIndexOf(':')) || '127.0.0.1';
    const s = new GrpcServer(server, names, health, host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host, port, opts.log);
    s.setServing(true);
    opts.log.info({ address: s.address, services: names }, 'gRPC server listening');
    return s;
  }

  /** Sets health for the whole server and each of its services. */
  setServing(serving: boolean): void {
    const status = serving ? 'SERVING' : 'NOT_SERVING';
    this.health.setStatus('', status);
    for (const n of this.names) this.health.setStatus(n, status);
  }

  /** Health NOT_SERVING, stop accepting calls, wait up to `graceMs` for calls in flight. Idempotent. */
  drain(graceMs: number): Promise<void> {
    this.stopping ??= new Promise<void>((resolve) => {
      this.setServing(false);
      const timer = setTimeout(() => {
        this.log.warn({ graceMs }, 'grace period over; cutting remaining calls');
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      timer.unref();
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return this.stopping;
  }

  /** Stops at once, cutting calls in flight. */
  forceStop(): void {
    this.setServing(false);
    this.server.forceShutdown();
  }
}
