/**
 * Groups work items that share a key (same model and tensor shape) into one call. Items
 * submitted while a batch for their key is running wait for the next batch, so under load
 * every model run carries as many requests as are ready — at step granularity for the
 * denoiser, which is how requests at different steps share one run.
 */
export class MicroBatcher<I, O> {
  private readonly pending = new Map<string, Pending<I, O>[]>();
  private readonly running = new Set<string>();

  /**
   * @param runBatch runs one batch; must return one output per item, in order.
   * @param maxBatch the most items in one call.
   */
  constructor(
    private readonly runBatch: (key: string, items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
  ) {
    if (!Number.isInteger(maxBatch) || maxBatch < 1) throw new RangeError('maxBatch must be a positive integer');
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
      if (!this.running.has(key)) {
        this.running.add(key);
        // Let items submitted in the same tick join the first batch.
        setImmediate(() => void this.drain(key));
      }
    });
  }

  private async drain(key: string): Promise<void> {
    try {
      for (;;) {
        const list = (this.pending.get(key) ?? []).filter((p) => {
          if (p.signal?.aborted) {
            p.reject(p.signal.reason);
            return false;
          }
          return true;
        });
        if (list.length === 0) break;
        const batch = list.splice(0, this.maxBatch);
        this.pending.set(key, list);
        try {
          const outs = await this.runBatch(
            key,
            batch.map((p) => p.item),
          );
          batch.forEach((p, i) => p.resolve(outs[i]));
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.pending.delete(key);
      this.running.delete(key);
    }
  }
}

interface Pending<I, O> {
  item: I;
  resolve(o: O): void;
  reject(e: unknown): void;
  signal: AbortSignal | undefined;
}
