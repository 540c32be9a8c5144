/**
 * Groups work items that share a key (same model and tensor shape) into one call. Items
 * submitted while the key's batches are running wait for the next batch, so under load
 * every model run carries as many requests as are ready — at step granularity for the
 * denoiser, which is how requests at different steps share one run. Up to `concurrency`
 * batches of one key run at once (one per runner thread of the model, so runs overlap where
 * the hardware allows); the next starts as soon as one ends.
 */
export class MicroBatcher<I, O> {
  private readonly pending = new Map<string, Pending<I, O>[]>();
  /** Batches running per key. */
  private readonly running = new Map<string, number>();
  /** Keys with a free slot whose next batch waits for the current turn to end (items of one tick go together). */
  private readonly scheduled = new Set<string>();

  /**
   * @param runBatch runs one batch; must return one output per item, in order.
   * @param maxBatch the most items in one call.
   * @param concurrency the most batches of one key running at once (default 1).
   */
  constructor(
    private readonly runBatch: (key: string, items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
    private readonly concurrency = 1,
  ) {
    if (!Number.isInteger(maxBatch) || maxBatch < 1) throw new RangeError('maxBatch must be a positive integer');
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be a positive integer');
  }

  /**
   * Queues `item`; resolves with its output. An item whose signal aborts is answered with the
   * abort reason at once: dropped if its batch has not started, left out of the answer if it
   * has (the other items of that batch get theirs).
   */
  submit(key: string, item: I, signal?: AbortSignal): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let settled = false;
      const onAbort = (): void => {
        settled = true;
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle =
        <A extends unknown[]>(fn: (...a: A) => void) =>
        (...a: A): void => {
          signal?.removeEventListener('abort', onAbort);
          if (settled) return;
          settled = true;
          fn(...a);
        };
      const entry: Pending<I, O> = { item, resolve: settle(resolve), reject: settle(reject), signal };
      const list = this.pending.get(key) ?? [];
      list.push(entry);
      this.pending.set(key, list);
      // A free slot takes a batch once this turn is over, so the items submitted in the same
      // tick go together; with every slot busy, the next run to end takes what waits.
      if ((this.running.get(key) ?? 0) < this.concurrency && !this.scheduled.has(key)) {
        this.scheduled.add(key);
        setImmediate(() => {
          this.scheduled.delete(key);
          this.fill(key);
        });
      }
    });
  }

  /** Starts batches of `key` while it has items waiting and a free slot. */
  private fill(key: string): void {
    for (;;) {
      const running = this.running.get(key) ?? 0;
      if (running >= this.concurrency) return;
      const list = (this.pending.get(key) ?? []).filter((p) => {
        if (p.signal?.aborted) {
          p.reject(p.signal.reason);
          return false;
        }
        return true;
      });
      if (list.length === 0) {
        this.pending.delete(key);
        return;
      }
      const batch = list.splice(0, this.maxBatch);
      if (list.length > 0) this.pending.set(key, list);
      else this.pending.delete(key);
      this.running.set(key, running + 1);
      void this.runOne(key, batch);
    }
  }

  private async runOne(key: string, batch: Pending<I, O>[]): Promise<void> {
    try {
      const outs = await this.runBatch(
        key,
        batch.map((p) => p.item),
      );
      batch.forEach((p, i) => p.resolve(outs[i]));
    } catch (err) {
      for (const p of batch) p.reject(err);
    } finally {
      const left = (this.running.get(key) ?? 1) - 1;
      if (left > 0) this.running.set(key, left);
      else this.running.delete(key);
      // The next batch starts after this turn: the items of the batch just answered come back
      // (their next step) in it, and go with those that waited. Started at once, it would take
      // only the waiting ones, and two requests a step apart would take turns for ever instead
      // of sharing runs.
      if (!this.scheduled.has(key)) {
        this.scheduled.add(key);
        setImmediate(() => {
          this.scheduled.delete(key);
          this.fill(key);
        });
      }
    }
  }
}

interface Pending<I, O> {
  item: I;
  resolve(o: O): void;
  reject(e: unknown): void;
  signal: AbortSignal | undefined;
}
