/**
 * A byte budget for one stream: how many bytes a writer has handed to gRPC that the
 * transport has not flushed yet. A writer acquires before `write()` and releases in the
 * write callback, so what one stream holds in memory stays under `limit` however slowly the
 * other side reads. grpc-js alone only bounds a stream by message count (16 messages before
 * `write()` returns false), which is 64 MiB at 4 MiB chunks.
 */
export class ByteBudget {
  /** Bytes acquired and not released. */
  private held = 0;
  private closed = false;
  private readonly waiters = new Set<() => void>();

  /**
   * @param limit most bytes held at once; one item larger than the limit is let through when
   *   nothing else is held, so an oversized chunk cannot deadlock the stream.
   * @param onChange called with +n / −n as bytes are acquired and released (metrics).
   */
  constructor(
    readonly limit: number,
    private readonly onChange?: (delta: number) => void,
  ) {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new RangeError(`ByteBudget: limit must be a positive integer, got ${limit}`);
  }

  /** Bytes currently held. */
  get inFlight(): number {
    return this.held;
  }

  /** Waits until `n` more bytes fit, then holds them. Rejects with the signal's reason when it aborts. */
  async acquire(n: number, signal?: AbortSignal): Promise<void> {
    while (!this.fits(n)) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const wake = (): void => {
          signal?.removeEventListener('abort', onAbort);
          this.waiters.delete(wake);
          resolve();
        };
        const onAbort = (): void => {
          this.waiters.delete(wake);
          reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
        };
        this.waiters.add(wake);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    signal?.throwIfAborted();
    if (this.closed) return;
    this.held += n;
    this.onChange?.(n);
  }

  /** Gives back `n` bytes (from a write callback). Ignored after {@link releaseAll}. */
  release(n: number): void {
    if (this.closed) return;
    const d = Math.min(n, this.held);
    this.held -= d;
    this.onChange?.(-d);
    for (const w of [...this.waiters]) w();
  }

  /** The stream is over: gives back everything still held; later releases are ignored. */
  releaseAll(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.held > 0) this.onChange?.(-this.held);
    this.held = 0;
    for (const w of [...this.waiters]) w();
  }

  private fits(n: number): boolean {
    return this.closed || this.held === 0 || this.held + n <= this.limit;
  }
}
