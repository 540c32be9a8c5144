/**
 * Waiting for a service that is restarting: how long a call that is safe to repeat keeps
 * retrying while no instance of the service can be reached, and how long it sleeps between
 * tries. Only calls that can be sent twice without a second effect use it — reads (Get,
 * Watch, GetStatus, GetResult, ListModels), Cancel, and a Submit or Generate that carries its
 * request id (the scheduler attaches a repeated id to the request it already has).
 */
import { Code, DiffmeshError, fromWire } from '@diffmesh/core/client';
import { connectionCause, NO_UPSTREAM } from './connection-errors.js';

/** How long and how often a call waits for an unreachable service. */
export interface WaitPolicy {
  /** Longest time spent waiting, ms, from the first failure; 0 = fail at once. */
  maxWaitMs: number;
  /** Sleep after the first failure, ms. Default 250. */
  initialDelayMs?: number;
  /** Longest sleep between two tries, ms. Default 1000 (a restarted service is found within about a second). */
  maxDelayMs?: number;
  /** Share of each sleep taken off at random (0–1), so that many clients do not retry in step. Default 0.2. */
  jitter?: number;
}

/** Why a call is waiting: what was tried, why it failed, and for how long it has waited. */
export interface WaitNotice {
  /** The service, as the pool names it (`scheduler`). */
  service: string;
  /** The addresses the call tried. */
  addresses: string[];
  /** The connection's failure in a few words (`connection refused`). */
  cause: string;
  /** 1 for the first wait. */
  attempt: number;
  waitedMs: number;
  /** The sleep before the next try. */
  delayMs: number;
  maxWaitMs: number;
}

/**
 * Whether an error says that no instance of the service could be reached — refused or reset
 * connections, a draining instance, or none known yet — rather than an answer about the call.
 */
export function isServiceUnreachable(err: DiffmeshError): boolean {
  if (err.code !== Code.UNAVAILABLE) return false;
  return (
    err.reason === 'TRANSPORT' ||
    err.reason === 'DRAINING' ||
    (err.reason === 'POOL_UNAVAILABLE' && err.metadata[NO_UPSTREAM] !== undefined)
  );
}

/** The sleep before try `attempt + 1` (attempt 1 = after the first failure), before jitter: doubling from the initial delay up to the largest. */
export function backoffDelay(policy: WaitPolicy, attempt: number): number {
  const initial = policy.initialDelayMs ?? 250;
  const max = policy.maxDelayMs ?? 1000;
  return Math.min(max, initial * 2 ** Math.max(0, attempt - 1));
}

/** One line for people: `waiting for the scheduler at 127.0.0.1:5000 (connection refused); retrying for up to 30 s`. */
export function describeWait(n: WaitNotice): string {
  const where =
    n.addresses.length === 0 ? ' (none known yet)' : ` at ${n.addresses.slice(0, 3).join(', ')}${n.addresses.length > 3 ? ', …' : ''}`;
  const left = Math.max(0, Math.ceil((n.maxWaitMs - n.waitedMs) / 1000));
  return `waiting for the ${n.service}${where} (${n.cause}); retrying for up to ${left} s more`;
}

/**
 * The waiting of one call: after each failed try, {@link next} says how long to sleep
 * before the next one, or that the call should fail with the error it got.
 */
export class Waiting {
  private attempt = 0;
  private startedAt: number | undefined;

  constructor(
    private readonly policy: WaitPolicy,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * After a failed try: the notice of the wait before the next one, or undefined when `err`
   * is not a service out of reach or the policy's time is spent (the caller then throws it).
   */
  next(err: unknown, service: string, addresses: string[]): WaitNotice | undefined {
    const e = fromWire(err);
    if (!isServiceUnreachable(e) || this.policy.maxWaitMs <= 0) return undefined;
    const now = this.now();
    this.startedAt ??= now;
    const waitedMs = now - this.startedAt;
    const left = this.policy.maxWaitMs - waitedMs;
    if (left <= 0) return undefined;
    this.attempt += 1;
    const jitter = Math.min(1, Math.max(0, this.policy.jitter ?? 0.2));
    const delayMs = Math.min(left, Math.round(backoffDelay(this.policy, this.attempt) * (1 - jitter * this.random())));
    return {
      service,
      addresses,
      cause: connectionCause(e.message),
      attempt: this.attempt,
      waitedMs,
      delayMs,
      maxWaitMs: this.policy.maxWaitMs,
    };
  }
}

/** Sleeps `ms`, or less when `signal` aborts (then throws CANCELLED). */
export async function sleepUnlessAborted(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'cancelled by the client');
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
  if (signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'cancelled by the client');
}
