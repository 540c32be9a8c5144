/** One-at-a-time file operations per object id. */

/**
 * Runs the file operations of one id (a put's publication, a delete's or an expiry's removal,
 * a Touch's new expiry) one after another, so that the files and the store's index agree.
 */
export class IdLocks {
  private readonly tails = new Map<string, Promise<unknown>>();

  /**
   * Runs `fn` once every earlier operation on the files of `id` has finished, and before any
   * later one starts.
   */
  run<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(id) ?? Promise.resolve();
    const run = previous.then(fn);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(id, settled);
    void settled.then(() => {
      if (this.tails.get(id) === settled) this.tails.delete(id);
    });
    return run;
  }

  /** Settles when the operations on `id` queued so far have; undefined when none is. */
  pending(id: string): Promise<unknown> | undefined {
    return this.tails.get(id);
  }
}
