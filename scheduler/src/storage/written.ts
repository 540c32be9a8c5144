import { decodeRecord } from './codec.js';
import { isTerminalStatus, type QueueItem, type RequestRecord } from './types.js';

/** Records kept at most (the oldest written go first); a running request is rewritten every stage. */
const MAX_RECORDS = 10_000;

/**
 * What a shared store wrote lately, so that it need not read or re-encode it:
 *
 * - per unfinished request, the record object it last wrote (or admitted): a lease of an item
 *   that write made hands it to the dispatcher ({@link forItem}, `Lease.record`), which then
 *   starts the task from it instead of reading the record back (one round trip less per task);
 * - per record object written, its stored text: a hint given back to `update` is copied by
 *   decoding that text ({@link copy}) instead of encoding the record again.
 *
 * A record kept here may be stale when another scheduler changed the request since: the
 * compare-and-set of the next update finds out and reads it, as with any hint. A change
 * announced by another process with a newer revision drops the request's record at once.
 */
export class WrittenRecords {
  private readonly byId = new Map<string, RequestRecord>();
  private readonly texts = new WeakMap<RequestRecord, string>();

  /** After `record` was stored as `text` (with its new `revision`). */
  wrote(record: RequestRecord, text: string): void {
    const reqId = record.state.context.reqId;
    this.texts.set(record, text);
    this.byId.delete(reqId);
    if (isTerminalStatus(record.state.context.status)) return;
    this.byId.set(reqId, record);
    if (this.byId.size > MAX_RECORDS) this.byId.delete(this.byId.keys().next().value as string);
  }

  /** The record that made `item` (its `gen`), as this store last wrote it; undefined when unknown. */
  forItem(item: QueueItem): RequestRecord | undefined {
    const r = this.byId.get(item.reqId);
    return r && r.gen === item.gen ? r : undefined;
  }

  /** Another process changed the request to `revision`: a record of an older revision kept here is stale. */
  changed(reqId: string, revision: number): void {
    const r = this.byId.get(reqId);
    if (r && !(r.revision >= revision)) this.byId.delete(reqId);
  }

  /** A deep copy of `record` (its revision included): from its stored text when this store wrote it, else undefined. */
  copy(record: RequestRecord): RequestRecord | undefined {
    const text = this.texts.get(record);
    if (text === undefined) return undefined;
    const copy = decodeRecord(text);
    copy.revision = record.revision;
    return copy;
  }
}
