/**
 * What the four backends of the storage port have in common, in one place: telling listeners
 * of changes ({@link StoreEvents}: `onChange`, `onQueue`, announcing a record written here),
 * whether a free slot can take an item ({@link fitsAny}), the order key of a priority
 * ({@link priorityKey}), the position a `queued` event reports ({@link setPosition}), and the
 * compare-and-set loop of the shared backends' `update` ({@link casLoop}).
 *
 * Redis does its fit and order checks inside Lua scripts (the same rules, in Lua); the rest
 * of each backend is what is really its own (SQL, Lua, streams).
 */
import {
  isTerminalStatus,
  type LeaseFit,
  type Mutation,
  type QueueEffects,
  type QueueItem,
  type RecordChange,
  type RequestRecord,
} from './types.js';

/**
 * The listeners of one store: record changes (`onChange`) and pools where an item may have
 * become available (`onQueue`). A backend keeps one and forwards its `onChange`/`onQueue` to
 * it; what it learns from other processes (polls, pub/sub) it hands to {@link change} and
 * {@link queue}.
 */
export class StoreEvents {
  private readonly changeListeners = new Set<(c: RecordChange) => void>();
  private readonly queueListeners = new Set<(pool: string) => void>();

  onChange(listener: (change: RecordChange) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onQueue(listener: (pool: string) => void): () => void {
    this.queueListeners.add(listener);
    return () => this.queueListeners.delete(listener);
  }

  /** Tells the change listeners of a change (one made elsewhere comes without its record). */
  change(change: RecordChange): void {
    for (const l of this.changeListeners) l(change);
  }

  /**
   * A record this process wrote: its change (with the record, so no one needs to read it),
   * then each pool where the write made an item available.
   */
  announce(record: RequestRecord, pools: readonly string[] = []): void {
    if (this.changeListeners.size > 0) this.change(changeOf(record));
    for (const p of pools) this.queue(p);
  }

  /** An item may have become available in `pool`. */
  queue(pool: string): void {
    for (const l of this.queueListeners) l(pool);
  }

  /**
   * {@link queue} once an item released with a back-off of `delayMs` may be taken again.
   * `keepAlive`: the timer keeps the process alive (memory: a retry waiting out its back-off
   * is work in flight, with nothing else to keep an embedded caller's process running).
   */
  later(pool: string, delayMs: number, keepAlive = false): void {
    if (delayMs <= 0) return;
    const t = setTimeout(() => this.queue(pool), delayMs);
    if (!keepAlive) t.unref();
  }
}

/** The change a write of `record` in this process makes. */
export function changeOf(record: RequestRecord): RecordChange {
  return {
    reqId: record.state.context.reqId,
    revision: record.revision,
    terminal: isTerminalStatus(record.state.context.status),
    record,
  };
}

/** True when one of `fits` (a free slot's queue keys and models) can take an item of `queue` and `model`. */
export function fitsAny(item: { queue: string; model: string }, fits: readonly LeaseFit[]): boolean {
  for (const f of fits) if (f.queues.includes(item.queue) && (!f.models || f.models.includes(item.model))) return true;
  return false;
}

/**
 * The order key of a priority for stores that order by string (redis' sorted-set members,
 * JetStream's subjects): larger priorities sort first (int32 range, clamped, inverted and
 * zero-padded to 10 digits).
 */
export function priorityKey(priority: number): string {
  const p = Math.max(-2147483648, Math.min(2147483647, Math.trunc(priority)));
  return String(2147483647 - p).padStart(10, '0');
}

/** Sets the `queued` event of `item` (the record's last event) to the tasks waiting ahead of it. */
export function setPosition(record: RequestRecord, item: QueueItem, waiting: number): void {
  const last = record.events.at(-1);
  if (last?.type === 'queued' && last.stageIndex === item.stageIndex) last.position = waiting;
}

/** What a compare-and-set write answered: written, the record changed meanwhile, or the record is gone. */
export type CasWrite = 'written' | 'conflict' | 'gone';

/**
 * The compare-and-set loop of a shared backend's `update` (redis, JetStream): runs `mutate` on
 * `first` (a copy of the caller's hint, which saves a read) or else on a fresh read, sets the
 * record's next `revision`, and `write`s it with `expected`, the revision it was read at; on a
 * conflict (someone else wrote meanwhile) it runs `mutate` again on a fresh read. Resolves
 * with the record written and its effects, or undefined when the request is unknown or gone,
 * or `mutate` returned false.
 */
export async function casLoop(
  read: () => Promise<RequestRecord | undefined>,
  mutate: (record: RequestRecord) => Mutation,
  write: (record: RequestRecord, effects: QueueEffects, expected: number) => Promise<CasWrite>,
  first?: RequestRecord,
): Promise<{ record: RequestRecord; effects: QueueEffects } | undefined> {
  for (let next = first; ; next = undefined) {
    const record = next ?? (await read());
    if (!record) return undefined;
    const effects = mutate(record);
    if (effects === false) return undefined;
    const expected = record.revision;
    record.revision = expected + 1;
    const res = await write(record, effects, expected);
    if (res === 'written') return { record, effects };
    if (res === 'gone') return undefined;
  }
}
