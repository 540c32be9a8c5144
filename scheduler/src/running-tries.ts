/** The tries this scheduler runs, by request and by pool, and who waits for none to be left (drain). */
import type { TaskTry } from './task-try.js';

export class RunningTries {
  private readonly all = new Set<TaskTry>();
  private readonly byReq = new Map<string, Set<TaskTry>>();
  private idle = new Set<() => void>();

  get size(): number {
    return this.all.size;
  }

  [Symbol.iterator](): IterableIterator<TaskTry> {
    return this.all.values();
  }

  add(t: TaskTry): void {
    this.all.add(t);
    const reqId = t.lease.item.reqId;
    let set = this.byReq.get(reqId);
    if (!set) {
      set = new Set();
      this.byReq.set(reqId, set);
    }
    set.add(t);
  }

  /** Forgets a try; false when it was not here. The last one gone wakes {@link whenIdle}'s waiters. */
  delete(t: TaskTry): boolean {
    if (!this.all.delete(t)) return false;
    const reqId = t.lease.item.reqId;
    const set = this.byReq.get(reqId);
    set?.delete(t);
    if (set?.size === 0) this.byReq.delete(reqId);
    if (this.all.size === 0) {
      const waiting = [...this.idle];
      this.idle.clear();
      for (const done of waiting) done();
    }
    return true;
  }

  /** Tries of one request (at most a few: one per scheduler that took its task). */
  ofRequest(reqId: string): Iterable<TaskTry> {
    return this.byReq.get(reqId) ?? [];
  }

  /** Tries running on instances of `pool`. */
  inPool(pool: string): TaskTry[] {
    return [...this.all].filter((t) => t.slot.instance.pool === pool);
  }

  /** Calls `done` once no try is left (at once when none is); returns a function that stops waiting. */
  whenIdle(done: () => void): () => void {
    if (this.all.size === 0) {
      done();
      return () => undefined;
    }
    this.idle.add(done);
    return () => this.idle.delete(done);
  }
}
