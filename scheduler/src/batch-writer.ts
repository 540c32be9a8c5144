/** Batched writes of a server stream's messages (Generate, Watch, Session). */
import type * as grpc from '@grpc/grpc-js';
import { preEncoded } from '@diffmesh/protos';
import { DiffmeshError, toWire } from '@diffmesh/core';

/**
 * Writes a server stream's messages in batches: what was added since the last message goes
 * together, at most one message per `intervalMs` (`StreamOptions.eventIntervalMs` of the service),
 * and never in the turn of the event loop that added it, so the stage dispatch an event
 * announces goes out first. An `urgent` item (an answer, a request's end) goes out on the
 * next turn. A client that reads slowly gets what piled up in one message after `drain`.
 */
export class BatchWriter<T> {
  private pending: T[] = [];
  private urgent = false;
  private ending = false;
  /** The call ends with this error instead of OK. */
  private failure: DiffmeshError | undefined;
  private done = false;
  private draining = false;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private lastWrite = -Infinity;

  constructor(
    private readonly call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>,
    private readonly intervalMs: number,
    private readonly encode: (items: T[]) => Buffer,
  ) {}

  add(item: T, urgent = false): void {
    if (this.done) return;
    this.pending.push(item);
    if (urgent) this.urgent = true;
    this.schedule();
  }

  /** Ends the call once everything added so far is written. */
  end(): void {
    if (this.done) return;
    this.ending = true;
    this.urgent = true;
    this.schedule();
  }

  /** Ends the call with `error` once everything added so far is written (unless it is ending already). */
  fail(error: DiffmeshError): void {
    if (this.done || this.ending) return;
    this.failure = error;
    this.end();
  }

  /** Writes nothing more (the client is gone). */
  stop(): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
  }

  get ended(): boolean {
    return this.done;
  }

  private schedule(): void {
    if (this.immediate || this.draining) return;
    const wait = this.urgent ? 0 : this.lastWrite + this.intervalMs - performance.now();
    if (wait > 0) {
      this.timer ??= setTimeout(this.flush, wait);
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.immediate = setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.timer = undefined;
    this.immediate = undefined;
    if (this.done || this.draining) return;
    this.urgent = false;
    if (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      this.lastWrite = performance.now();
      if (!this.call.write(preEncoded(this.encode(batch)))) {
        this.draining = true;
        this.call.once('drain', () => {
          this.draining = false;
          if (this.ending) this.urgent = true;
          if (this.pending.length > 0 || this.ending) this.schedule();
        });
        return;
      }
    }
    if (this.ending) {
      this.done = true;
      if (this.failure) this.call.emit('error', toWire(this.failure));
      else this.call.end();
    }
  };
}
