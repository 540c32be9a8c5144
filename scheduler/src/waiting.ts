/** A task waiting in one of a pool's queues, as dispatch sees it. */
export interface WaitingTask {
  /** Its id in its queue (`reqId#stageIndex`). */
  readonly id: string;
  readonly reqId: string;
  /** Key of the queue that holds it. */
  readonly queue: string;
  /** Version range an instance must satisfy to run it (its queue's; none = any). */
  readonly range: string | undefined;
  /** The model the request asked for. */
  readonly model: string;
  /** Larger goes first. */
  readonly priority: number;
  /** Arrival order, across all queues. */
  readonly seq: number;
}

/**
 * A pool's waiting tasks across its queues, in dispatch order: larger priority first, then
 * arrival. A pool has a queue per version range, and each queue knows only its own head,
 * which a free instance may not be able to run (a range or a model it does not serve): so
 * dispatch walks this order to find the best task each free instance can take. The queues
 * still hold the tasks and bound their length.
 */
export class WaitingOrder {
  private readonly list: WaitingTask[] = [];

  get size(): number {
    return this.list.length;
  }

  /** The task at `index` in dispatch order. */
  at(index: number): WaitingTask | undefined {
    return this.list[index];
  }

  /** Every task, in dispatch order (a copy). */
  values(): WaitingTask[] {
    return [...this.list];
  }

  add(task: WaitingTask): void {
    this.list.splice(this.position(task), 0, task);
  }

  /** Removes a task; false when it is not here. */
  remove(task: WaitingTask): boolean {
    const i = this.position(task);
    if (this.list[i] !== task) return false;
    this.list.splice(i, 1);
    return true;
  }

  removeAt(index: number): void {
    this.list.splice(index, 1);
  }

  /** Index of the first task that does not go before `task`. */
  private position(task: WaitingTask): number {
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (goesBefore(this.list[mid], task)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

function goesBefore(a: WaitingTask, b: WaitingTask): boolean {
  return a.priority > b.priority || (a.priority === b.priority && a.seq < b.seq);
}
