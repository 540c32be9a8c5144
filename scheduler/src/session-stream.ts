/**
 * The Session RPC: many requests on one long-lived bidirectional stream (see the README's
 * `Session`).
 */
import type * as grpc from '@grpc/grpc-js';
import {
  messageCodec,
  type RequestEvent as WireRequestEvent,
  type SessionAnswer,
  type SessionRequest__Output,
  type SessionResponse,
} from '@diffmesh/protos';
import { Code, DiffmeshError, errorDetailToWire, requestStatusToWire, traceContextFromMetadata, type Tenant } from '@diffmesh/core';
import type { Scheduler } from './scheduler.js';
import { BatchWriter } from './batch-writer.js';
import { cancelQuietly, follow } from './event-streams.js';
import { requireId, submit } from './service-wire.js';

const sessionMessages = messageCodec<SessionResponse>('diffmesh.scheduler.v1.SessionResponse');

type SessionItem = { answer: SessionAnswer; event?: undefined } | { event: WireRequestEvent; answer?: undefined };

function encodeSession(items: SessionItem[]): Buffer {
  const answers: SessionAnswer[] = [];
  const events: WireRequestEvent[] = [];
  for (const i of items) {
    if (i.answer) answers.push(i.answer);
    else if (i.event) events.push(i.event);
  }
  return sessionMessages.encodeReady({ answers, events });
}

/**
 * The Session RPC: many requests on one stream. Each `generate` is submitted and answered
 * with its request id (or its error), then its events follow; each `cancel` is answered with
 * the request's status. Ends after the client's half-close once every followed request has
 * ended; a client that goes away cancels its unfinished requests.
 */
export function session(
  scheduler: Scheduler,
  call: grpc.ServerDuplexStream<SessionRequest__Output, SessionResponse>,
  intervalMs: number,
  sessions: Set<() => void>,
  streams: Set<(error: DiffmeshError) => void>,
  tenant: Tenant,
): void {
  new SessionStream(scheduler, call, intervalMs, sessions, streams, tenant);
}

class SessionStream {
  private readonly writer: BatchWriter<SessionItem>;
  /** Requests followed, each by the function that stops following it. */
  private readonly open = new Map<string, () => void>();
  private halfClosed = false;
  /** Requests being admitted (an input image checked and stored, the request stored): answered before the session ends. */
  private admitting = 0;
  private readonly halfClose = (): void => {
    this.halfClosed = true;
    this.endIfIdle();
  };
  /** The scheduler drained with requests of this session unfinished (they go on elsewhere). */
  private readonly fail = (error: DiffmeshError): void => {
    this.forget();
    this.halfClosed = true;
    for (const stop of this.open.values()) stop();
    this.open.clear();
    this.writer.fail(error);
  };

  constructor(
    private readonly scheduler: Scheduler,
    private readonly call: grpc.ServerDuplexStream<SessionRequest__Output, SessionResponse>,
    intervalMs: number,
    private readonly sessions: Set<() => void>,
    private readonly streams: Set<(error: DiffmeshError) => void>,
    private readonly tenant: Tenant,
  ) {
    this.writer = new BatchWriter<SessionItem>(call, intervalMs, encodeSession);
    sessions.add(this.halfClose);
    streams.add(this.fail);
    call.on('data', (msg: SessionRequest__Output) => void this.message(msg));
    call.on('end', this.halfClose);
    call.on('error', () => {
      // The client's side broke; 'cancelled' follows and cleans up.
    });
    call.on('cancelled', () => this.cancelled());
  }

  /** An acceptance rides with the request's next events (at once on a quiet stream, else with the next batch); a refusal is the end of its request and goes out at once. */
  private answer(a: SessionAnswer): void {
    this.writer.add({ answer: a }, a.error !== undefined);
  }

  private forget(): void {
    this.sessions.delete(this.halfClose);
    this.streams.delete(this.fail);
  }

  private endIfIdle(): void {
    if (this.halfClosed && this.open.size === 0 && this.admitting === 0) {
      this.forget();
      this.writer.end();
    }
  }

  private async message(msg: SessionRequest__Output): Promise<void> {
    const tag = msg.tag;
    // Counted until answered: the session does not end before its requests are answered.
    this.admitting += 1;
    try {
      if (msg.generate) await this.generate(tag, msg);
      else if (msg.cancel) {
        const reqId = requireId(msg.cancel.reqId);
        this.answer({ tag, reqId, status: requestStatusToWire((await this.scheduler.cancel(reqId, this.tenant)).context.status) });
      } else {
        throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'action: a session message needs generate or cancel', {
          metadata: { field: 'action' },
        });
      }
    } catch (err) {
      this.answer({ tag, error: errorDetailToWire(err) });
    } finally {
      this.admitting -= 1;
      this.endIfIdle();
    }
  }

  private async generate(tag: SessionRequest__Output['tag'], msg: SessionRequest__Output): Promise<void> {
    // A session told to end (endSessions: the scheduler drains) may end before it could
    // answer or follow another request: refuse it rather than run it unseen.
    if (this.halfClosed) {
      throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'scheduler is shutting down; this session takes no new requests', {
        retryAfterMs: 1000,
      });
    }
    const traceContext = Object.keys(msg.traceContext).length > 0 ? msg.traceContext : traceContextFromMetadata(this.call.metadata);
    const reqId = (await submit(this.scheduler, msg.generate!, traceContext, this.tenant)).context.reqId;
    // The client went away while the request was being stored: its request goes too.
    if (this.writer.ended) {
      cancelQuietly(this.scheduler, reqId);
      return;
    }
    this.answer({ tag, reqId });
    // A request id sent twice in one session is followed once.
    if (this.open.has(reqId)) return;
    let closed = false;
    this.open.set(reqId, () => undefined);
    const stop = await follow(
      this.scheduler,
      reqId,
      0,
      (event, end) => this.writer.add({ event }, end),
      () => {
        closed = true;
        this.open.delete(reqId);
        this.endIfIdle();
      },
    );
    if (!closed && this.open.has(reqId)) this.open.set(reqId, stop);
    else if (!closed) stop();
  }

  /** The client went away: its unfinished requests are cancelled. */
  private cancelled(): void {
    this.forget();
    if (this.writer.ended) return;
    this.writer.stop();
    for (const [reqId, stop] of this.open) {
      stop();
      cancelQuietly(this.scheduler, reqId);
    }
    this.open.clear();
  }
}
