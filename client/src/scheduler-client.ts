import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import {
  SERVICE_NAMES,
  messageCodec,
  type CancelRequest,
  type CancelResponse__Output,
  type GenerateRequest,
  type GenerateResponse__Output,
  type GetResultRequest,
  type GetResultResponse__Output,
  type GetStatusResponse__Output,
  type ResultHeader__Output,
  type ListModelsResponse__Output,
  type RequestEvent__Output,
  type SchedulerGetRequest,
  type SchedulerGetResponse__Output,
  type SubmitRequest,
  type SubmitResponse__Output,
  type WatchRequest,
} from '@diffmesh/protos';
import { Code, DiffmeshError, fromWire, injectTraceContext, silentLogger, type Logger, type TlsFiles } from '@diffmesh/core/client';
import type { Discovery } from '@diffmesh/discovery';
import { describeUnreachable, isUnreachable } from './connection-errors.js';
import { SchedulerSession } from './session.js';
import { UpstreamPool } from './upstream-pool.js';
import { Waiting, type WaitNotice, type WaitPolicy } from './wait-policy.js';

const pkg = 'diffmesh.scheduler.v1';
const path = (method: string): string => `/${SERVICE_NAMES.scheduler}/${method}`;

const codecs = {
  generateRes: messageCodec<object, GenerateResponse__Output>(`${pkg}.GenerateResponse`),
  submitReq: messageCodec<SubmitRequest>(`${pkg}.SubmitRequest`),
  submitRes: messageCodec<object, SubmitResponse__Output>(`${pkg}.SubmitResponse`),
  getReq: messageCodec<SchedulerGetRequest>(`${pkg}.GetRequest`),
  getRes: messageCodec<object, SchedulerGetResponse__Output>(`${pkg}.GetResponse`),
  cancelReq: messageCodec<CancelRequest>(`${pkg}.CancelRequest`),
  cancelRes: messageCodec<object, CancelResponse__Output>(`${pkg}.CancelResponse`),
  watchReq: messageCodec<WatchRequest>(`${pkg}.WatchRequest`),
  empty: messageCodec<object>(`${pkg}.ListModelsRequest`),
  listModelsRes: messageCodec<object, ListModelsResponse__Output>(`${pkg}.ListModelsResponse`),
  statusRes: messageCodec<object, GetStatusResponse__Output>(`${pkg}.GetStatusResponse`),
  resultReq: messageCodec<GetResultRequest>(`${pkg}.GetResultRequest`),
  resultRes: messageCodec<object, GetResultResponse__Output>(`${pkg}.GetResultResponse`),
};

const buf = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** Options of {@link SchedulerClient}. */
export interface SchedulerClientOptions {
  /** Scheduler addresses (`host:port`); any of them may serve any call. */
  addresses?: readonly string[];
  /** Discovery to follow: every registered scheduler joins the pool. */
  discovery?: Discovery;
  /** TLS for the calls (plaintext without). */
  tls?: TlsFiles;
  /** Share a pool another component made (the gateway's); the other options are then ignored. */
  pool?: UpstreamPool;
  /** Default deadline of unary calls. Default 30 s. */
  timeoutMs?: number;
  /**
   * How long a request whose stream broke keeps being looked for on the other schedulers
   * (re-attaching by its id) before its events fail with the last error. Default 60 s.
   */
  reattachTimeoutMs?: number;
  /**
   * How long a call waits for a scheduler while none can be reached (one restarting), trying
   * again with back-off; 0 = fail at once. Every call of this client is safe to repeat: reads
   * and Cancel are, and Submit and Generate always carry a request id (the caller's or a fresh
   * one), which a scheduler that already has the request attaches to. Default 30 s.
   */
  waitForRestartMs?: number;
  /** Told before each sleep of such a wait (what is waited for, and why); default a warning in the log. */
  onWait?: (notice: WaitNotice) => void;
  /** Metadata sent with every call (e.g. authorization). */
  metadata?: () => grpc.Metadata;
  log?: Logger;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborting cancels the call (for `generate`, the request too; for `watch`, only watching). */
  signal?: AbortSignal;
  /** Deadline of a unary call, overriding the client's. */
  timeoutMs?: number;
}

/** Options of {@link SchedulerClient.watch}. */
export interface WatchOptions extends CallOptions {
  /** Skip the events up to and including this sequence number (they were seen already). */
  afterSequence?: number;
}

/** Options of {@link SchedulerClient.getResult}. */
export interface ResultOptions extends CallOptions {
  /** `png`, `jpeg`, `webp`; `mp4`, `webm`, `gif`, `apng`. Default: PNG for a picture, MP4 for a video. */
  format?: string;
  /** JPEG and WebP quality, 1–100. */
  quality?: number;
}

/** An encoded result: what it is, and its bytes. */
export interface EncodedResultFile {
  header: ResultHeader__Output;
  bytes: Buffer;
}

/**
 * A transport failure: the scheduler went away, refused, or cut the stream — not an answer
 * about the request. A cancelled request is an event on the stream, never a status, so a
 * CANCELLED status the caller did not ask for (callers check their own signal first) is a
 * stream the server or a proxy cut, e.g. a scheduler whose drain ran out.
 */
function isBreak(err: DiffmeshError): boolean {
  return err.code === Code.UNAVAILABLE || err.code === Code.CANCELLED;
}

function isEnd(e: RequestEvent__Output): boolean {
  return Boolean(e.completed || e.failed || e.cancelled);
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * The diffmesh scheduler client: Generate, Submit, Get, Watch, Cancel, ListModels and
 * GetStatus over a pool of equivalent schedulers.
 *
 * - Generations travel as messages on one long-lived `Session` stream per scheduler, not a
 *   call each.
 * - Every generation carries a request id (the caller's or a fresh one), so sending it again
 *   after a failure attaches to the request instead of starting a second one.
 * - A call that fails because its scheduler is gone or draining moves on to the next one.
 *   When the stream of an accepted request breaks, the client re-attaches by request id
 *   (`Watch` on any scheduler that shares the request store), skips the events it has
 *   already yielded, and carries on: the caller sees one uninterrupted sequence of events.
 */
export class SchedulerClient {
  readonly pool: UpstreamPool;
  private readonly ownsPool: boolean;
  private readonly sessions = new Map<string, SchedulerSession>();
  private readonly log: Logger;
  /** Views of this client calling with an API key (see {@link withApiKey}), by key. */
  private readonly views = new Map<string, SchedulerClient>();
  /** How calls wait for a restarting scheduler. */
  private readonly wait: WaitPolicy;

  constructor(private readonly opts: SchedulerClientOptions = {}) {
    this.log = opts.log ?? silentLogger();
    this.ownsPool = !opts.pool;
    this.pool =
      opts.pool ??
      new UpstreamPool({
        name: 'scheduler',
        addresses: opts.addresses ?? [],
        ...(opts.tls ? { tls: opts.tls } : {}),
        ...(opts.discovery ? { discovery: opts.discovery, stage: 'scheduler' as const } : {}),
        notFoundReasons: ['REQUEST_NOT_FOUND'],
        timeoutMs: opts.timeoutMs ?? 30_000,
        ...(opts.onWait ? { onWait: opts.onWait } : {}),
        log: this.log,
      });
    this.wait = { maxWaitMs: opts.waitForRestartMs ?? 30_000 };
  }

  /** Closes the sessions (each ends once its requests have) and, unless shared, the pool. */
  async close(): Promise<void> {
    const sessions = [...this.sessions.values()];
    const views = [...this.views.values()];
    this.sessions.clear();
    this.views.clear();
    await Promise.all([...sessions.map((s) => s.close()), ...views.map((v) => v.close())]);
    if (this.ownsPool) this.pool.close();
  }

  /**
   * This client calling as the holder of `apiKey` (`authorization: Bearer <key>` on every
   * call and session): the scheduler scopes what it does to the key's tenant. A gateway
   * calls for each of its callers this way. Views share this client's pool; one is kept
   * per key (at most `maxViews`, the least recently used going first) and closed with it.
   */
  withApiKey(apiKey: string, maxViews = 1024): SchedulerClient {
    let view = this.views.get(apiKey);
    if (view) {
      this.views.delete(apiKey);
    } else {
      const base = this.opts.metadata;
      view = new SchedulerClient({
        ...this.opts,
        pool: this.pool,
        metadata: () => {
          const md = base ? base() : new grpc.Metadata();
          md.set('authorization', `Bearer ${apiKey}`);
          return md;
        },
      });
      while (this.views.size >= maxViews) {
        const [oldestKey, oldest] = this.views.entries().next().value as [string, SchedulerClient];
        this.views.delete(oldestKey);
        void oldest.close();
      }
    }
    this.views.set(apiKey, view);
    return view;
  }

  private session(address: string): SchedulerSession {
    let s = this.sessions.get(address);
    if (!s) {
      const metadata = this.opts.metadata;
      s = new SchedulerSession(this.pool.client(address), metadata ? { metadata } : {});
      this.sessions.set(address, s);
    }
    return s;
  }

  private metadata(): { metadata?: grpc.Metadata } {
    return this.opts.metadata ? { metadata: this.opts.metadata() } : {};
  }

  /**
   * Turns "no scheduler answered" (a transport failure, or no scheduler known) into one line
   * that names the addresses tried. A scheduler's own answer — POOL_UNAVAILABLE when a stage
   * pool of the model has no instance — is passed on as it came.
   */
  private unreachable(err: unknown): DiffmeshError {
    const e = fromWire(err);
    return isUnreachable(e) ? describeUnreachable('scheduler', this.pool.addresses(), e) : e;
  }

  private async unary(
    method: string,
    request: Buffer,
    opts: CallOptions & { affinityKey?: string; onServed?: (a: string) => void } = {},
  ): Promise<Buffer> {
    try {
      return await this.pool.unary(path(method), request, {
        wait: this.wait,
        ...this.metadata(),
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(opts.timeoutMs ? { timeoutMs: opts.timeoutMs } : {}),
        ...(opts.affinityKey ? { affinityKey: opts.affinityKey } : {}),
        ...(opts.onServed ? { onServed: opts.onServed } : {}),
      });
    } catch (err) {
      throw this.unreachable(err);
    }
  }

  async listModels(opts: CallOptions = {}): Promise<ListModelsResponse__Output> {
    return codecs.listModelsRes.decode(await this.unary('ListModels', buf(codecs.empty.encode({})), opts));
  }

  async status(opts: CallOptions = {}): Promise<GetStatusResponse__Output> {
    return codecs.statusRes.decode(await this.unary('GetStatus', buf(codecs.empty.encode({})), opts));
  }

  /** Starts a request and returns at once with its id. */
  async submit(req: SubmitRequest, opts: CallOptions = {}): Promise<SubmitResponse__Output> {
    // A fresh id makes a retry on another scheduler attach instead of starting it twice.
    const request = { ...req, requestId: req.requestId || randomUUID() };
    let served = '';
    const res = await this.unary('Submit', buf(codecs.submitReq.encode(request)), {
      ...opts,
      affinityKey: request.requestId,
      onServed: (a) => (served = a),
    });
    const out = codecs.submitRes.decode(res);
    if (served) this.pool.remember(out.reqId, served);
    return out;
  }

  async get(reqId: string, opts: CallOptions = {}): Promise<SchedulerGetResponse__Output> {
    return codecs.getRes.decode(await this.unary('Get', buf(codecs.getReq.encode({ reqId })), { ...opts, affinityKey: reqId }));
  }

  /** Cancels a request; answers its status afterwards (CANCELLED, or how it had already ended). */
  async cancel(reqId: string, reason = 'cancelled by the client', opts: CallOptions = {}): Promise<CancelResponse__Output> {
    return codecs.cancelRes.decode(
      await this.unary('Cancel', buf(codecs.cancelReq.encode({ reqId, reason })), { ...opts, affinityKey: reqId }),
    );
  }

  /**
   * The result of a completed request, encoded as a file (PNG/JPEG/WebP for a picture,
   * MP4/WebM/GIF/APNG for a video). FAILED_PRECONDITION for a request that has not
   * completed, NOT_FOUND for an unknown id, INVALID_ARGUMENT for a format it cannot take.
   */
  async getResult(reqId: string, opts: ResultOptions = {}): Promise<EncodedResultFile> {
    const request = buf(codecs.resultReq.encode({ reqId, format: opts.format ?? '', quality: opts.quality ?? 0 }));
    let header: ResultHeader__Output | undefined;
    const chunks: Buffer[] = [];
    try {
      for await (const bytes of this.pool.stream(path('GetResult'), request, {
        affinityKey: reqId,
        wait: this.wait,
        ...this.metadata(),
        ...(opts.signal ? { signal: opts.signal } : {}),
      })) {
        const msg = codecs.resultRes.decode(bytes);
        if (msg.header) header = msg.header;
        else if (msg.chunk) chunks.push(Buffer.from(msg.chunk));
      }
    } catch (err) {
      throw this.unreachable(err);
    }
    if (!header) throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'the result stream ended without its header');
    const file = Buffer.concat(chunks);
    if (file.byteLength !== Number(header.sizeBytes)) {
      throw new DiffmeshError(Code.DATA_LOSS, 'INTERNAL', `the result stream ended after ${file.byteLength} of ${header.sizeBytes} bytes`);
    }
    return { header, bytes: file };
  }

  /**
   * Runs a generation and yields its events until its end (`completed`, `failed` or
   * `cancelled`); throws when no scheduler takes it. Aborting `signal` (or leaving the loop
   * early) cancels the request.
   */
  async *generate(req: GenerateRequest, opts: CallOptions = {}): AsyncGenerator<RequestEvent__Output> {
    // The id makes sending it again (to another scheduler, or after waiting) attach, not start a second one.
    const request = { ...req, requestId: req.requestId || randomUUID() };
    const waiting = new Waiting(this.wait);
    for (;;) {
      const round = { accepted: false };
      try {
        yield* this.generateRound(request, opts, round);
        return;
      } catch (err) {
        if (round.accepted || !(await this.pool.waitBeforeRetry(waiting, err, opts))) throw round.accepted ? err : this.unreachable(err);
      }
    }
  }

  /**
   * One try of a generation on each scheduler in turn; once one accepted it, its events to
   * the end (re-attaching when its stream breaks). Before acceptance, throws the last
   * scheduler's error as it came.
   */
  private async *generateRound(
    request: GenerateRequest & { requestId: string },
    opts: CallOptions,
    round: { accepted: boolean },
  ): AsyncGenerator<RequestEvent__Output> {
    const signal = opts.signal;
    const order = this.pool.candidates(request.requestId);
    if (order.length === 0) throw this.pool.noInstance();
    let lastErr: unknown;
    let last = 0;
    for (const [i, address] of order.entries()) {
      if (signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'cancelled by the client');
      try {
        for await (const event of this.session(address).events(request, {
          ...(signal ? { signal } : {}),
          traceContext: injectTraceContext(),
        })) {
          if (!round.accepted) {
            round.accepted = true;
            this.pool.remember(event.reqId, address);
          }
          last = Math.max(last, event.sequence);
          yield event;
        }
        return;
      } catch (err) {
        lastErr = err;
        const e = fromWire(err);
        if (round.accepted) {
          if (!isBreak(e) || signal?.aborted) throw e;
          this.log.warn({ reqId: request.requestId, address, reason: e.reason }, 'scheduler stream broke; re-attaching');
          // Re-attached by Watch, which never cancels: a caller that stops following (its signal,
          // or leaving the loop early) cancels the request itself.
          let ended = false;
          try {
            for await (const event of this.reattach(request.requestId, last, e, opts, request)) {
              if (isEnd(event)) ended = true;
              yield event;
            }
            ended = true;
          } finally {
            if (!ended) void this.cancel(request.requestId, 'the client stopped following').catch(() => undefined);
          }
          return;
        }
        if (!this.pool.shouldMoveOn(address, err, { affinityKey: request.requestId }, i === order.length - 1)) throw err;
      }
    }
    throw lastErr;
  }

  /**
   * Follows an existing request's events until its end (a finished request's events are
   * replayed). An unknown id fails with NOT_FOUND. Leaving the loop early or aborting
   * `signal` stops watching; the request goes on. When the stream breaks, watching moves to
   * another scheduler and continues where it was.
   */
  async *watch(reqId: string, opts: WatchOptions = {}): AsyncGenerator<RequestEvent__Output> {
    let last = opts.afterSequence ?? 0;
    try {
      for await (const e of this.watchOnce(reqId, last, opts.signal)) {
        last = Math.max(last, e.sequence);
        yield e;
      }
    } catch (err) {
      const e = fromWire(err);
      if (!isBreak(e) || opts.signal?.aborted || last === (opts.afterSequence ?? 0)) throw this.unreachable(e);
      yield* this.reattach(reqId, last, e, opts);
    }
  }

  /**
   * One Watch call (with failover, and waiting for a restarting scheduler, before its first
   * message); yields the events after `after`.
   */
  private async *watchOnce(
    reqId: string,
    after: number,
    signal: AbortSignal | undefined,
    wait: WaitPolicy = this.wait,
  ): AsyncGenerator<RequestEvent__Output> {
    // The scheduler skips what was seen (after_sequence); the filter below covers older ones.
    const stream = this.pool.stream(path('Watch'), buf(codecs.watchReq.encode({ reqId, afterSequence: after })), {
      affinityKey: reqId,
      wait,
      ...this.metadata(),
      ...(signal ? { signal } : {}),
    });
    for await (const bytes of stream) {
      for (const e of codecs.generateRes.decode(bytes).events) {
        // WatchResponse has GenerateResponse's shape. A preview carries the sequence of the
        // stored event before it (previews are not stored), so it may equal `after`.
        if (e.sequence > after || (e.preview && e.sequence === after)) yield e;
      }
    }
  }

  /**
   * Finds the request again after its stream broke: Watch on the schedulers in turn, with
   * back-off, until it answers or `reattachTimeoutMs` passes. When every scheduler that
   * answers says the request does not exist (its scheduler kept it in memory and died), a
   * request this client started is sent again under the same id.
   */
  private async *reattach(
    reqId: string,
    after: number,
    cause: DiffmeshError,
    opts: CallOptions,
    resend?: GenerateRequest,
  ): AsyncGenerator<RequestEvent__Output> {
    const deadline = Date.now() + (this.opts.reattachTimeoutMs ?? 60_000);
    let last = after;
    let lastErr: DiffmeshError = cause;
    let delay = 100;
    while (Date.now() < deadline && !opts.signal?.aborted) {
      try {
        // Waiting for a restarting scheduler, within this re-attach's own time.
        for await (const e of this.watchOnce(reqId, last, opts.signal, { ...this.wait, maxWaitMs: Math.max(0, deadline - Date.now()) })) {
          last = Math.max(last, e.sequence);
          yield e;
          if (isEnd(e)) return;
        }
        return;
      } catch (err) {
        lastErr = fromWire(err);
        if (lastErr.code === Code.NOT_FOUND && lastErr.reason === 'REQUEST_NOT_FOUND' && resend) {
          this.log.warn({ reqId }, 'no scheduler knows the request any more; sending it again under the same id');
          yield* this.generate(resend, opts);
          return;
        }
        if (!isBreak(lastErr) && lastErr.reason !== 'POOL_UNAVAILABLE') throw lastErr;
      }
      await sleep(delay, opts.signal);
      delay = Math.min(delay * 2, 2000);
    }
    if (opts.signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'cancelled by the client');
    throw this.unreachable(lastErr);
  }
}
