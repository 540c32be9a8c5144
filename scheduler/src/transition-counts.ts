/**
 * Counts of the moves of the scheduler's two state machines: a stage task's (`TaskState`, the
 * README's lifecycle table, moved by `TaskTransitions`) and a try's on this scheduler
 * (`TryState`, moved by `TaskTry.transition`). `SchedulerMetrics` serves them as
 * `diffmesh_scheduler_transitions_total{machine,from,to}`.
 */

/** The two machines counted. */
export type Machine = 'task' | 'try';

/** One counted move: how many times `machine` went from `from` to `to` here. */
export interface TransitionCount {
  machine: Machine;
  from: string;
  to: string;
  count: number;
}

export class TransitionCounts {
  /** machine → from → to → count (no key strings built per move). */
  private readonly counts = new Map<Machine, Map<string, Map<string, number>>>();

  count(machine: Machine, from: string, to: string): void {
    let byFrom = this.counts.get(machine);
    if (!byFrom) {
      byFrom = new Map();
      this.counts.set(machine, byFrom);
    }
    let byTo = byFrom.get(from);
    if (!byTo) {
      byTo = new Map();
      byFrom.set(from, byTo);
    }
    byTo.set(to, (byTo.get(to) ?? 0) + 1);
  }

  /** Every move counted so far. */
  all(): TransitionCount[] {
    const out: TransitionCount[] = [];
    for (const [machine, byFrom] of this.counts)
      for (const [from, byTo] of byFrom) for (const [to, count] of byTo) out.push({ machine, from, to, count });
    return out;
  }
}
