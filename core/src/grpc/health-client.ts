import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { clientCredentials, type TlsFiles } from './channel.js';

/** A `grpc.health.v1` status. */
export type HealthStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

const STATUS: Record<number, HealthStatus> = { 0: 'UNKNOWN', 1: 'SERVING', 2: 'NOT_SERVING', 3: 'SERVICE_UNKNOWN' };

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'Health');

type CheckFn = (
  req: { service: string },
  options: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res?: { status: number | string }) => void,
) => void;

/**
 * A client of a server's `grpc.health.v1.Health` (what Kubernetes probes and load balancers
 * ask): one channel, any number of checks. `check` resolves with the status or rejects with the
 * call's error (UNAVAILABLE, DEADLINE_EXCEEDED).
 */
export class HealthChecker {
  private readonly client: grpc.Client;

  constructor(address: string, tls?: TlsFiles) {
    this.client = new HealthClient(address, clientCredentials(tls));
  }

  /** The status of `service` ('' = the whole server), within `deadlineMs`. */
  check(service = '', deadlineMs = 5000): Promise<HealthStatus> {
    const check = (this.client as unknown as { Check: CheckFn }).Check.bind(this.client);
    return new Promise((resolve, reject) => {
      check({ service }, { deadline: Date.now() + deadlineMs }, (err, res) => {
        if (err) reject(err);
        else resolve(typeof res?.status === 'string' ? (res.status as HealthStatus) : (STATUS[res?.status ?? 0] ?? 'UNKNOWN'));
      });
    });
  }

  close(): void {
    this.client.close();
  }
}
