import type * as grpc from '@grpc/grpc-js';
import {
  SERVICE_NAMES,
  messageCodec,
  type GenerateRequest,
  type RequestEvent__Output,
  type SessionAnswer__Output,
  type SessionRequest,
  type SessionResponse__Output,
} from '@diffmesh/protos';
import { Code, DiffmeshError, errorDetailFromWire, fromWire } from '@diffmesh/core/client';

const SESSION_PATH = `/${SERVICE_NAMES.scheduler}/Session`;
const requests = messageCodec<SessionRequest>('diffmesh.scheduler.v1.SessionRequest');
const responses = messageCodec<object, SessionResponse__Output>('diffmesh.scheduler.v1.SessionResponse');

/** What a request started on a session reports. */
export interface SessionRequestHandlers {
  /** The scheduler accepted the request under this id. */
  accepted?(reqId: string): void;
  /** One of the request's events, in order; the last is `completed`, `failed` or `cancelled`. */
  event(event: RequestEvent__Output): void;
  /**
   * The request was rejected (its answer carried the error a Generate call would have
   * failed with) or the session broke before its end (UNAVAILABLE and the like).
   * Nothing follows it.
   */
  error(err: DiffmeshError): void;
}

export interface SessionRequestOptions {
  /** Cancels the request when it aborts. */
  signal?: AbortSignal;
  /** W3C trace context of the caller's span for this request. */
  traceContext?: Record<string, string>;
}

/** A request started on a session. */
export interface SessionRequestHandle {
  /** Asks the scheduler to cancel the request (its `cancelled` event follows). */
  cancel(reason?: string): void;
}

interface Pending {
  handlers: SessionRequestHandlers;
  reqId?: string;
  done: boolean;
  cancelReason?: string;
  unlisten?: () => void;
}

/** The options of {@link SchedulerSession}. */
export interface SchedulerSessionOptions {
  /** Metadata sent when the stream opens (e.g. authorization). */
  metadata?: () => grpc.Metadata;
}

/**
 * Many generation requests over one `SchedulerService.Session` stream instead of a call
 * each. The stream opens with the first request and stays open; when it breaks, the
 * requests still on it get the error and the next request opens a new one.
 */
export class SchedulerSession {
  private call: grpc.ClientDuplexStream<Buffer, Buffer> | undefined;
  private nextTag = 1;
  private readonly unanswered = new Map<number, Pending>();
  private readonly requests = new Map<string, Pending[]>();
  private closed = false;

  constructor(
    private readonly client: grpc.Client,
    private readonly options: SchedulerSessionOptions = {},
  ) {}

  /** Requests sent and not yet ended. */
  get active(): number {
    let n = this.unanswered.size;
    for (const list of this.requests.values()) n += list.length;
    return n;
  }

  /** Submits a request on the session; `handlers` get its answer and events. */
  start(req: GenerateRequest, handlers: SessionRequestHandlers, opts: SessionRequestOptions = {}): SessionRequestHandle {
    const pending: Pending = { handlers, done: false };
    const handle: SessionRequestHandle = { cancel: (reason) => this.cancel(pending, reason ?? 'cancelled by the client') };
    if (this.closed) {
      queueMicrotask(() => handlers.error(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'the scheduler session is closed')));
      return handle;
    }
    if (opts.signal) {
      const signal = opts.signal;
      if (signal.aborted) {
        queueMicrotask(() => handlers.error(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'request cancelled before it was sent')));
        return handle;
      }
      const onAbort = (): void => handle.cancel('cancelled by the client');
      signal.addEventListener('abort', onAbort, { once: true });
      pending.unlisten = () => signal.removeEventListener('abort', onAbort);
    }
    const tag = this.takeTag();
    this.unanswered.set(tag, pending);
    this.open().write(
      Buffer.from(requests.encode({ tag, generate: req, ...(opts.traceContext ? { traceContext: opts.traceContext } : {}) })),
    );
    return handle;
  }

  /** Submits a request and yields its events until its end; throws its error. */
  async *events(req: GenerateRequest, opts: SessionRequestOptions = {}): AsyncGenerator<RequestEvent__Output> {
    const queue: RequestEvent__Output[] = [];
    let failure: DiffmeshError | undefined;
    let ended = false;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      wake?.();
      wake = undefined;
    };
    const handle = this.start(
      req,
      {
        event: (e) => {
          queue.push(e);
          if (isEnd(e)) ended = true;
          notify();
        },
        error: (err) => {
          failure = err;
          ended = true;
          notify();
        },
      },
      opts,
    );
    try {
      for (;;) {
        while (queue.length > 0) yield queue.shift()!;
        if (failure) throw failure;
        if (ended) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      // A consumer that stops early cancels the request.
      if (!ended) handle.cancel('the client stopped reading');
    }
  }

  /**
   * Closes the session: no new requests; the stream ends once the ones on it have ended.
   * Resolves then.
   */
  close(): Promise<void> {
    this.closed = true;
    const call = this.call;
    if (!call) return Promise.resolve();
    return new Promise((resolve) => {
      call.once('status', () => resolve());
      call.end();
    });
  }

  private takeTag(): number {
    let tag = this.nextTag;
    while (this.unanswered.has(tag)) tag = (tag % 0xffffffff) + 1;
    this.nextTag = (tag % 0xffffffff) + 1;
    return tag;
  }

  private cancel(pending: Pending, reason: string): void {
    if (pending.done) return;
    if (pending.reqId === undefined) {
      // Unanswered yet: cancelled when the answer names the request.
      pending.cancelReason = reason;
      return;
    }
    this.call?.write(Buffer.from(requests.encode({ tag: this.takeTag(), cancel: { reqId: pending.reqId, reason } })));
  }

  private open(): grpc.ClientDuplexStream<Buffer, Buffer> {
    if (this.call) return this.call;
    const metadata = this.options.metadata?.();
    const call = metadata
      ? this.client.makeBidiStreamRequest<Buffer, Buffer>(SESSION_PATH, same, same, metadata)
      : this.client.makeBidiStreamRequest<Buffer, Buffer>(SESSION_PATH, same, same);
    this.call = call;
    call.on('data', (bytes: Buffer) => this.receive(responses.decode(bytes)));
    call.on('error', (err) => {
      const e = fromWire(err);
      // The session never cancels its own call: a cancelled stream was cut by the server
      // (a forced shutdown) and the requests on it may succeed on another try.
      this.broken(
        call,
        e.code === Code.CANCELLED ? new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `the scheduler cut the session: ${e.message}`) : e,
      );
    });
    call.on('end', () => this.broken(call, new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'the scheduler ended the session')));
    return call;
  }

  private receive(msg: SessionResponse__Output): void {
    for (const a of msg.answers) this.answer(a);
    for (const e of msg.events) {
      const list = this.requests.get(e.reqId);
      if (!list) continue;
      const end = isEnd(e);
      if (end) this.requests.delete(e.reqId);
      for (const p of list) {
        if (end) this.finish(p);
        p.handlers.event(e);
      }
    }
  }

  private answer(a: SessionAnswer__Output): void {
    const pending = this.unanswered.get(a.tag);
    if (!pending) return; // the answer to a cancel
    this.unanswered.delete(a.tag);
    if (a.error || !a.reqId) {
      this.finish(pending);
      pending.handlers.error(
        a.error
          ? errorDetailFromWire(a.error)
          : new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'the scheduler answered without a request id'),
      );
      return;
    }
    pending.reqId = a.reqId;
    const list = this.requests.get(a.reqId);
    if (list) list.push(pending);
    else this.requests.set(a.reqId, [pending]);
    pending.handlers.accepted?.(a.reqId);
    if (pending.cancelReason !== undefined) this.cancel(pending, pending.cancelReason);
  }

  private finish(pending: Pending): void {
    pending.done = true;
    pending.unlisten?.();
  }

  /** The stream ended or broke: every request still on it gets `err`. */
  private broken(call: grpc.ClientDuplexStream<Buffer, Buffer>, err: DiffmeshError): void {
    if (this.call !== call) return;
    this.call = undefined;
    const left = [...this.unanswered.values(), ...[...this.requests.values()].flat()];
    this.unanswered.clear();
    this.requests.clear();
    for (const p of left) {
      if (p.done) continue;
      this.finish(p);
      p.handlers.error(err);
    }
  }
}

const same = (b: Buffer): Buffer => b;

function isEnd(e: RequestEvent__Output): boolean {
  return Boolean(e.completed || e.failed || e.cancelled);
}
