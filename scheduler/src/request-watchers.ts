/**
 * The watchers of requests on this scheduler (`Watch`, `Generate`, `Session`): each gets a
 * request's events in order, from the sequence it asked for, then `close` after the last. A
 * change the store announces with its record is delivered at once; one made elsewhere is read
 * back (one read at a time per watcher). Previews are ephemeral: the latest of each running
 * request dispatched here is kept in memory for watchers that attach meanwhile, never stored.
 */
import type { RequestEvent, StageName, StagePreview } from '@diffmesh/core';
import { isTerminalStatus, type Lease, type RecordChange, type RequestRecord, type SchedulerStore } from './storage/types.js';

/** Follows a request's events: `item` for each (with the record it came from), then `close` after the last. */
export interface RequestListener {
  item(event: RequestEvent, sequence: number, record: RequestRecord): void;
  close(): void;
}

interface Watcher {
  listener: RequestListener;
  /** Events delivered so far (the next one has this sequence + 1). */
  delivered: number;
  /** Re-reads of the record: none, one in flight, or one in flight and another asked for after it. */
  reading: 'idle' | 'reading' | 'again';
  closed: boolean;
  /** The record of the last delivery (previews are delivered with it). */
  record?: RequestRecord;
}

/** A preview event (ephemeral: never part of a record's events). */
type PreviewEvent = Extract<RequestEvent, { type: 'preview' }>;

/** Latest previews kept for watchers that attach mid-run, at most (the oldest go first). */
const MAX_KEPT_PREVIEWS = 256;

export class RequestWatchers {
  private readonly watchers = new Map<string, Set<Watcher>>();
  /** The latest preview of each running request whose task this scheduler dispatched (see {@link preview}). */
  private readonly previews = new Map<string, PreviewEvent>();

  /** @param read the record of a request, failed first when past its deadline; NOT_FOUND when unknown. */
  constructor(
    private readonly store: SchedulerStore,
    private readonly read: (reqId: string) => Promise<RequestRecord>,
    private readonly needsRead: (rec: RequestRecord) => boolean,
  ) {}

  /**
   * Follows a request's events after sequence `after` (0 = from the first): those so far,
   * then live ones, then `close` after the last. NOT_FOUND when unknown or forgotten.
   * Resolves with a function that stops following.
   */
  async listen(reqId: string, after: number, listener: RequestListener): Promise<() => void> {
    const w: Watcher = { listener, delivered: Math.max(0, after), reading: 'idle', closed: false };
    let set = this.watchers.get(reqId);
    if (!set) {
      set = new Set();
      this.watchers.set(reqId, set);
    }
    set.add(w);
    const stop = (): void => {
      w.closed = true;
      this.drop(reqId, w);
    };
    // A store in this process answers at once (every Generate and Session request follows its events).
    let rec = this.store.peek?.(reqId);
    if (!rec || this.needsRead(rec)) {
      try {
        rec = await this.read(reqId);
      } catch (err) {
        stop();
        throw err;
      }
    }
    this.deliver(reqId, w, rec);
    const latest = this.previews.get(reqId);
    if (latest) deliverPreview(w, latest);
    return stop;
  }

  /** A change of any request (from the store's `onChange`). */
  changed(c: RecordChange): void {
    if (c.terminal) this.previews.delete(c.reqId);
    const set = this.watchers.get(c.reqId);
    if (!set) return;
    for (const w of [...set]) {
      if (c.record) this.deliver(c.reqId, w, c.record);
      else this.refresh(c.reqId, w);
    }
  }

  /**
   * A preview from a running task (params `preview`): at once to the request's watchers on
   * this scheduler (the one dispatching the task), and kept until the request ends. A watcher
   * on another scheduler sharing the store sees none (they cost the durable backends nothing).
   */
  preview(lease: Lease, stage: StageName, totalSteps: number, preview: StagePreview): void {
    const { reqId, stageIndex } = lease.item;
    const event: PreviewEvent = { type: 'preview', reqId, stageIndex, stage, totalSteps, ...preview, at: Date.now() };
    // Map order is recency: the least recently previewed request goes first when full.
    this.previews.delete(reqId);
    if (this.previews.size >= MAX_KEPT_PREVIEWS) this.previews.delete(this.previews.keys().next().value as string);
    this.previews.set(reqId, event);
    for (const w of this.watchers.get(reqId) ?? []) deliverPreview(w, event);
  }

  private drop(reqId: string, w: Watcher): void {
    const s = this.watchers.get(reqId);
    s?.delete(w);
    if (s?.size === 0) this.watchers.delete(reqId);
  }

  private deliver(reqId: string, w: Watcher, rec: RequestRecord): void {
    if (w.closed) return;
    w.record = rec;
    const events = rec.events;
    while (w.delivered < events.length && !w.closed) {
      w.delivered += 1;
      w.listener.item(events[w.delivered - 1], w.delivered, rec);
    }
    if (!w.closed && isTerminalStatus(rec.state.context.status) && w.delivered >= events.length) {
      w.closed = true;
      this.drop(reqId, w);
      w.listener.close();
    }
  }

  /** Re-reads a record for a watcher that heard of a change made elsewhere (one read at a time). */
  private refresh(reqId: string, w: Watcher): void {
    if (w.reading !== 'idle') {
      w.reading = 'again';
      return;
    }
    w.reading = 'reading';
    void this.store
      .read(reqId)
      .then((rec) => {
        if (rec) this.deliver(reqId, w, rec);
      })
      .catch(() => undefined)
      .finally(() => {
        const again = w.reading === 'again';
        w.reading = 'idle';
        if (again && !w.closed) this.refresh(reqId, w);
      });
  }
}

/** Hands a preview to a watcher, numbered as the last event it has (previews take no sequence of their own). */
function deliverPreview(w: Watcher, e: PreviewEvent): void {
  if (w.closed || !w.record || isTerminalStatus(w.record.state.context.status)) return;
  w.listener.item(e, w.delivered, w.record);
}
