/** Follows an {@link EventLog} synchronously. */
export interface EventLogListener<T> {
  item(item: T): void;
  close(): void;
}

/**
 * An append-only list of events with any number of readers: each reader gets every event
 * from the start, then live ones, and finishes when the log closes. Used for Watch, so a
 * client that connects late still sees the whole story of a request.
 */
export class EventLog<T> {
  private readonly items: T[] = [];
  private closed = false;
  private readonly waiters = new Set<() => void>();
  private readonly listeners = new Set<EventLogListener<T>>();

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    for (const l of this.listeners) l.item(item);
    this.wake();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const l of this.listeners) l.close();
    this.listeners.clear();
    this.wake();
  }

  /**
   * Calls `listener` synchronously: first for every event so far, then for each new one as it
   * is pushed, then `close` once. The cheap way to follow a log (no promise per event); the
   * returned function stops listening.
   */
  listen(listener: EventLogListener<T>): () => void {
    for (const item of this.items) listener.item(item);
    if (this.closed) {
      listener.close();
      return () => {};
    }
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  get length(): number {
    return this.items.length;
  }

  /** Events from the first; ends at close or when `signal` aborts. */
  async *subscribe(signal?: AbortSignal): AsyncGenerator<T> {
    let i = 0;
    for (;;) {
      while (i < this.items.length) {
        yield this.items[i];
        i += 1;
      }
      if (this.closed || signal?.aborted) return;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.waiters.delete(done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        this.waiters.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}
