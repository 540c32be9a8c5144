/**
 * The cancellation of one unit of work (a stage task, a scheduler dispatch): an optional
 * deadline, callbacks run when it is cancelled, and an `AbortSignal` made only when someone
 * asks for it.
 *
 * Hot paths make one per unit of work. On Node 20 an AbortController costs a DOMException
 * per reason-less abort and EventTarget bookkeeping per listener; a no-op or fast stage
 * never looks at its signal, so it should not pay for one.
 */
export class Cancellation {
  private controller: AbortController | undefined;
  private callbacks: Array<(reason: unknown) => void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private cancelled = false;
  private expired = false;
  private why: unknown;

  /**
   * @param timeoutMs cancels itself with `onTimeout()`'s error after this long; 0 = never.
   */
  constructor(timeoutMs = 0, onTimeout: () => unknown = () => new Error(`timed out after ${timeoutMs} ms`)) {
    if (timeoutMs > 0) {
      this.timer = setTimeout(() => {
        this.expired = true;
        this.cancel(onTimeout());
      }, timeoutMs);
      this.timer.unref();
    }
  }

  get aborted(): boolean {
    return this.cancelled;
  }

  /** Why it was cancelled (undefined while it is not). */
  get reason(): unknown {
    return this.why;
  }

  /** True when the deadline (not a caller) cancelled it. */
  timedOut(): boolean {
    return this.expired;
  }

  /** A signal that aborts with this cancellation (made on first use; already aborted if it is). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.cancelled) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /** Cancels (once): the signal aborts and the callbacks run with `reason`. */
  cancel(reason: unknown): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.why = reason;
    this.clearTimer();
    this.controller?.abort(reason);
    const callbacks = this.callbacks;
    this.callbacks = undefined;
    if (callbacks) for (const fn of callbacks) fn(reason);
  }

  /** Runs `fn` once when cancelled (now, if it already is); the returned function unregisters it. */
  onCancel(fn: (reason: unknown) => void): () => void {
    if (this.cancelled) {
      fn(this.why);
      return () => {};
    }
    (this.callbacks ??= []).push(fn);
    return () => {
      const i = this.callbacks?.indexOf(fn) ?? -1;
      if (i !== -1) this.callbacks!.splice(i, 1);
    };
  }

  /** The work ended: stops the deadline timer and drops the callbacks. */
  dispose(): void {
    this.clearTimer();
    this.callbacks = undefined;
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
