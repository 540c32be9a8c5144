/**
 * Upstream pools: a set of equivalent gRPC instances (schedulers, tensor services) that a
 * client calls, found through discovery and/or a configured address list. A call that fails with
 * UNAVAILABLE before any response is retried on the next instance; calls about one request
 * (`req_id`) go to the instance that accepted it, and calls about an id no instance is known
 * for try each instance in turn until one knows it.
 */
import * as grpc from '@grpc/grpc-js';
import {
  Code,
  DiffmeshError,
  channelOptions,
  clientCredentials,
  fromWire,
  traceMetadata,
  type Logger,
  type TlsFiles,
} from '@diffmesh/core/client';
import { type Discovery, type InstanceStage } from '@diffmesh/discovery';
import { NO_UPSTREAM } from './connection-errors.js';
import { describeWait, sleepUnlessAborted, Waiting, type WaitNotice, type WaitPolicy } from './wait-policy.js';

/**
 * Reconnection back-off of the pool's channels. grpc-js fails calls at once while a channel
 * backs off (1 s growing to 120 s by default), so a service back after a restart would be
 * seen only at the channel's next try; with these it is seen within a second.
 */
const RECONNECT_OPTIONS = { 'grpc.initial_reconnect_backoff_ms': 250, 'grpc.max_reconnect_backoff_ms': 1000 };

/** Per-call options of an {@link UpstreamPool}. */
export interface UpstreamCallOptions {
  /**
   * The id the call is about (a request id, an object id). Calls with a key go first to the
   * instance remembered for it, and a NOT_FOUND for the id moves on to the next instance.
   */
  affinityKey?: string;
  /** Deadline of a unary call; default the pool's. Streams have none. */
  timeoutMs?: number;
  signal?: AbortSignal;
  metadata?: grpc.Metadata;
  /** Called with the address that answered (its first message, for a stream). */
  onServed?: (address: string) => void;
  /**
   * Wait for the service while none of its instances can be reached (a restart): try again
   * with back-off for up to `wait.maxWaitMs`. Only for calls that are safe to send twice.
   * A stream waits only before its first message.
   */
  wait?: WaitPolicy;
}

/** Options of {@link UpstreamPool}. */
export interface UpstreamPoolOptions {
  /** For logs and errors, e.g. `scheduler`. */
  name: string;
  /** Addresses always in the pool. */
  addresses?: readonly string[];
  /** TLS for the calls (plaintext without). */
  tls?: TlsFiles;
  /** Discovery to follow; instances whose stage is `stage` join and leave the pool. */
  discovery?: Discovery;
  stage?: InstanceStage;
  /** Reasons of NOT_FOUND errors that mean "this instance does not know the id". */
  notFoundReasons?: readonly string[];
  /** How long an instance that refused a connection goes to the back of the line. Default 5 s. */
  cooldownMs?: number;
  /** Default deadline of unary calls. Default 30 s. */
  timeoutMs?: number;
  /** Most affinity entries remembered. Default 10,000. */
  maxAffinity?: number;
  /** Called when an instance joins or leaves. */
  onChange?: (addresses: string[]) => void;
  /** Called each time a call moves on to another instance after UNAVAILABLE. */
  onFailover?: () => void;
  /** Called before each sleep of a call that waits for the service (see {@link UpstreamCallOptions.wait}); default a warning in the log. */
  onWait?: (notice: WaitNotice) => void;
  log: Logger;
}

const identity = (b: Buffer): Buffer => b;

/** Whether `err` means the instance is gone or refusing (not a reply about the request). */
function isTransportFailure(err: DiffmeshError): boolean {
  return err.code === Code.UNAVAILABLE && (err.reason === 'TRANSPORT' || err.reason === 'DRAINING');
}

/** A set of equivalent gRPC instances with failover. */
export class UpstreamPool {
  private readonly fixed: string[];
  private readonly discovered = new Map<string, string>(); // instance id → address
  private readonly clients = new Map<string, grpc.Client>();
  private readonly downUntil = new Map<string, number>();
  private readonly affinity = new Map<string, string>();
  private readonly unsubscribe?: () => void;
  private next = 0;
  private closed = false;
  /** Calls repeated on another instance after UNAVAILABLE. */
  failovers = 0;

  constructor(private readonly opts: UpstreamPoolOptions) {
    this.fixed = [...new Set(opts.addresses ?? [])];
    if (opts.discovery && opts.stage) {
      const stage = opts.stage;
      this.unsubscribe = opts.discovery.subscribe(
        (e) => {
          if (e.instance.stage !== stage || !e.instance.grpcAddress) return;
          const before = this.addresses().join(',');
          if (e.type === 'down') this.discovered.delete(e.instance.id);
          else {
            this.discovered.set(e.instance.id, e.instance.grpcAddress);
            this.downUntil.delete(e.instance.grpcAddress);
          }
          if (this.addresses().join(',') !== before) {
            opts.log.info({ pool: opts.name, event: e.type, instance: e.instance.id, address: e.instance.grpcAddress }, 'upstream changed');
            opts.onChange?.(this.addresses());
          }
        },
        { replay: true },
      );
    }
  }

  /** Every address in the pool: configured ones first, then discovered ones. */
  addresses(): string[] {
    return [...new Set([...this.fixed, ...this.discovered.values()])];
  }

  /** Remembers which instance holds `key` (e.g. the scheduler that accepted a request). */
  remember(key: string, address: string): void {
    if (!key) return;
    this.affinity.delete(key);
    this.affinity.set(key, address);
    const max = this.opts.maxAffinity ?? 10_000;
    while (this.affinity.size > max) this.affinity.delete(this.affinity.keys().next().value as string);
  }

  /**
   * The order to try instances in: the remembered one for the key, then round-robin over
   * the healthy ones, then those that recently refused connections (as a last resort).
   */
  candidates(affinityKey?: string): string[] {
    const all = this.addresses();
    if (all.length === 0) return [];
    const start = this.next++ % all.length;
    const rotated = [...all.slice(start), ...all.slice(0, start)];
    const now = Date.now();
    const healthy = rotated.filter((a) => (this.downUntil.get(a) ?? 0) <= now);
    const cooling = rotated.filter((a) => (this.downUntil.get(a) ?? 0) > now);
    const order = [...healthy, ...cooling];
    const pinned = affinityKey ? this.affinity.get(affinityKey) : undefined;
    if (pinned && order.includes(pinned)) return [pinned, ...order.filter((a) => a !== pinned)];
    return order;
  }

  /** The channel to one instance (made on first use, closed with the pool). */
  client(address: string): grpc.Client {
    let c = this.clients.get(address);
    if (!c) {
      c = new grpc.Client(address, clientCredentials(this.opts.tls), channelOptions(RECONNECT_OPTIONS));
      this.clients.set(address, c);
    }
    return c;
  }

  /** The error for a pool with no instance at all. */
  noInstance(): DiffmeshError {
    return new DiffmeshError(Code.UNAVAILABLE, 'POOL_UNAVAILABLE', `no ${this.opts.name} is available`, {
      retryAfterMs: 1000,
      metadata: { [NO_UPSTREAM]: this.opts.name },
    });
  }

  /** Throws DRAINING once the pool is closed. */
  checkOpen(): void {
    if (this.closed)
      throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `the ${this.opts.name} client is closed`, { retryAfterMs: 1000 });
  }

  /** Whether a failed attempt may move on to the next instance; marks dead instances. */
  shouldMoveOn(address: string, err: unknown, opts: UpstreamCallOptions, last: boolean): boolean {
    const e = fromWire(err);
    if (e.code === Code.UNAVAILABLE) {
      if (isTransportFailure(e)) this.downUntil.set(address, Date.now() + (this.opts.cooldownMs ?? 5000));
      if (!last) {
        this.failovers += 1;
        this.opts.onFailover?.();
        this.opts.log.warn(
          { pool: this.opts.name, address, reason: e.reason, msg: e.message },
          'upstream unavailable; trying the next one',
        );
      }
      return true;
    }
    return e.code === Code.NOT_FOUND && opts.affinityKey !== undefined && (this.opts.notFoundReasons ?? []).includes(e.reason);
  }

  /**
   * After a failed round of a call that waits (`waiting` made from its {@link WaitPolicy}):
   * sleeps before the next round and returns true, or returns false when the call should
   * fail (not a service out of reach, no wait asked for, its time spent, or the pool closed).
   */
  async waitBeforeRetry(waiting: Waiting | undefined, err: unknown, opts: UpstreamCallOptions): Promise<boolean> {
    if (!waiting || this.closed || opts.signal?.aborted) return false;
    const notice = waiting.next(err, this.opts.name, this.addresses());
    if (!notice) return false;
    if (this.opts.onWait) this.opts.onWait(notice);
    else this.opts.log.warn({ pool: this.opts.name, addresses: notice.addresses, waitedMs: notice.waitedMs }, describeWait(notice));
    await sleepUnlessAborted(notice.delayMs, opts.signal);
    return true;
  }

  /**
   * A unary call with failover (and, with `opts.wait`, waiting for a restarting service).
   * Resolves with the response bytes; rejects with the gRPC error.
   */
  async unary(path: string, request: Buffer, opts: UpstreamCallOptions = {}): Promise<Buffer> {
    const waiting = opts.wait ? new Waiting(opts.wait) : undefined;
    for (;;) {
      try {
        return await this.unaryRound(path, request, opts);
      } catch (err) {
        if (!(await this.waitBeforeRetry(waiting, err, opts))) throw err;
      }
    }
  }

  /** One try of a unary call on each instance in turn. */
  private async unaryRound(path: string, request: Buffer, opts: UpstreamCallOptions): Promise<Buffer> {
    this.checkOpen();
    const order = this.candidates(opts.affinityKey);
    if (order.length === 0) throw this.noInstance();
    let lastErr: unknown;
    for (const [i, address] of order.entries()) {
      if (opts.signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'client went away');
      try {
        const res = await this.unaryOnce(address, path, request, opts);
        opts.onServed?.(address);
        return res;
      } catch (err) {
        lastErr = err;
        if (!this.shouldMoveOn(address, err, opts, i === order.length - 1)) throw err;
      }
    }
    throw lastErr;
  }

  private unaryOnce(address: string, path: string, request: Buffer, opts: UpstreamCallOptions): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      const deadline = Date.now() + (opts.timeoutMs ?? this.opts.timeoutMs ?? 30_000);
      const call = this.client(address).makeUnaryRequest<Buffer, Buffer>(
        path,
        identity,
        identity,
        request,
        traceMetadata(undefined, opts.metadata?.clone() ?? new grpc.Metadata()),
        { deadline },
        (err, res) => {
          opts.signal?.removeEventListener('abort', onAbort);
          if (err) reject(err);
          else resolve(res ?? Buffer.alloc(0));
        },
      );
      const onAbort = (): void => call.cancel();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * A server-streaming call with failover (and, with `opts.wait`, waiting for a restarting
   * service) before the first message. The returned iterable yields response bytes; leaving
   * the loop early (or `signal`) cancels the call.
   */
  async *stream(path: string, request: Buffer, opts: UpstreamCallOptions = {}): AsyncGenerator<Buffer> {
    const waiting = opts.wait ? new Waiting(opts.wait) : undefined;
    for (;;) {
      let received = false;
      try {
        for await (const msg of this.streamRound(path, request, opts)) {
          received = true;
          yield msg;
        }
        return;
      } catch (err) {
        if (received || !(await this.waitBeforeRetry(waiting, err, opts))) throw err;
      }
    }
  }

  /** One try of a server-streaming call on each instance in turn, until one sends a message. */
  private async *streamRound(path: string, request: Buffer, opts: UpstreamCallOptions): AsyncGenerator<Buffer> {
    this.checkOpen();
    const order = this.candidates(opts.affinityKey);
    if (order.length === 0) throw this.noInstance();
    let lastErr: unknown;
    for (const [i, address] of order.entries()) {
      if (opts.signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'client went away');
      const call = this.client(address).makeServerStreamRequest<Buffer, Buffer>(
        path,
        identity,
        identity,
        request,
        traceMetadata(undefined, opts.metadata?.clone() ?? new grpc.Metadata()),
      );
      // The loop below sees errors through the stream's iterator; this listener keeps a late
      // error (after the loop was left) from becoming an uncaught 'error' event.
      call.on('error', () => undefined);
      const onAbort = (): void => call.cancel();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      let received = false;
      let ended = false;
      try {
        for await (const msg of call as AsyncIterable<Buffer>) {
          if (!received) {
            received = true;
            opts.onServed?.(address);
          }
          yield msg;
        }
        ended = true;
        return;
      } catch (err) {
        ended = true;
        lastErr = err;
        if (received || !this.shouldMoveOn(address, err, opts, i === order.length - 1)) throw err;
      } finally {
        opts.signal?.removeEventListener('abort', onAbort);
        if (!ended) call.cancel();
      }
    }
    throw lastErr;
  }

  /** Stops following discovery and closes every channel. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe?.();
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
