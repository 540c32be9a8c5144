/** The Generate and Watch streams: a request's events, batched, until its end. */
import type * as grpc from '@grpc/grpc-js';
import { messageCodec, type GenerateResponse, type RequestEvent as WireRequestEvent } from '@diffmesh/protos';
import { DiffmeshError, toWire, type Tenant } from '@diffmesh/core';
import type { Scheduler } from './scheduler.js';
import { BatchWriter } from './batch-writer.js';
import { eventToWire, requireId } from './service-wire.js';

const eventMessages = messageCodec<GenerateResponse>('diffmesh.scheduler.v1.GenerateResponse');

/**
 * Streams a request's events on a call (Generate, Watch): those after sequence `after`, then
 * live ones, then the end; the request's end is written at once. `onGone` runs when the
 * client leaves before the end.
 */
export function stream(
  scheduler: Scheduler,
  reqId: string,
  after: number,
  call: grpc.ServerWritableStream<unknown, { events: WireRequestEvent[] }>,
  intervalMs: number,
  open: Set<(error: DiffmeshError) => void>,
  scope?: Tenant,
  onGone?: () => void,
): void {
  const writer = new BatchWriter<WireRequestEvent>(call, intervalMs, (events) => eventMessages.encodeReady({ events }));
  let stop: (() => void) | undefined;
  let gone = false;
  const end = (error: DiffmeshError): void => {
    open.delete(end);
    stop?.();
    writer.fail(error);
  };
  open.add(end);
  // grpc-js also reports a call it ended normally as cancelled: only one cut short counts.
  call.on('cancelled', () => {
    open.delete(end);
    if (writer.ended) return;
    gone = true;
    writer.stop();
    stop?.();
    onGone?.();
  });
  let id: string;
  try {
    id = requireId(reqId);
  } catch (err) {
    call.emit('error', toWire(err));
    return;
  }
  follow(
    scheduler,
    id,
    after,
    (event, last) => writer.add(event, last),
    () => {
      open.delete(end);
      writer.end();
    },
    scope,
  ).then(
    (s) => {
      stop = s;
      if (gone) s();
    },
    (err: unknown) => call.emit('error', toWire(err)),
  );
}

/**
 * Follows a request's events as wire events (those after sequence `after`, then live ones);
 * `end` marks the last. Resolves with a function that stops following.
 */
export function follow(
  scheduler: Scheduler,
  reqId: string,
  after: number,
  item: (event: WireRequestEvent, end: boolean) => void,
  close: () => void,
  scope?: Tenant,
): Promise<() => void> {
  return scheduler.listen(
    reqId,
    after,
    {
      item: (e, sequence, state) => {
        const end = e.type === 'completed' || e.type === 'failed' || e.type === 'cancelled';
        item(eventToWire(e, sequence, e.type === 'completed' || e.type === 'stage_finished' ? state : undefined), end);
      },
      close,
    },
    scope,
  );
}

/** Cancels a request whose client went away, unless this scheduler is shutting down. */
export function cancelQuietly(scheduler: Scheduler, reqId: string): void {
  if (scheduler.requests.durable && scheduler.state !== 'RUNNING') return;
  scheduler.cancel(reqId).catch(() => {
    // already finished and gone
  });
}
