/**
 * Step-boundary preemption: which running task gives its slot to a more urgent waiting one.
 *
 * A waiting task is more urgent than a running one when its priority is larger, or, at the
 * same priority, when its deadline is at risk (it would miss it waiting for the first slot to
 * free by itself) and comes before the running task's. The running task stops at its next step
 * boundary with a checkpoint there (no step is lost), goes back to its queue in its place, and
 * resumes from the checkpoint with the same result.
 *
 * Bounds: a task is preempted only after it has run `minRunMs` in its current try and
 * reported a step of progress in it (so a resumed task always moves on before it can be
 * preempted again), only while it has steps left, and once per try.
 */

/** A running task, as the choice sees it. */
export interface RunningTask {
  priority: number;
  /** Ms since the epoch; 0 = none. */
  deadline: number;
  /** Steps done and total, as last reported (0 of 0 before the first report). */
  step: number;
  totalSteps: number;
  /** Ms it has run in this try. */
  ranMs: number;
  /** It reported a step in this try. */
  progressed: boolean;
  /** Already asked to stop (or ending). */
  stopping: boolean;
  /** Its instance can run the waiting task (model, version). */
  fits: boolean;
}

/** A waiting task, as the choice sees it. */
export interface WaitingTask {
  priority: number;
  /** Ms since the epoch; 0 = none. */
  deadline: number;
  /** Its deadline is at risk without a slot now (see {@link deadlineAtRisk}). */
  atRisk: boolean;
}

/** Why `waiting` may take `running`'s slot, or undefined when it may not (whatever the bounds). */
export function urgency(waiting: WaitingTask, running: Pick<RunningTask, 'priority' | 'deadline'>): string | undefined {
  if (waiting.priority > running.priority) return `priority ${waiting.priority} > ${running.priority}`;
  if (
    waiting.priority === running.priority &&
    waiting.atRisk &&
    waiting.deadline > 0 &&
    (running.deadline === 0 || running.deadline > waiting.deadline)
  ) {
    return 'deadline at risk';
  }
  return undefined;
}

/** A running task that may be preempted now, given the bounds. */
export function preemptible(t: RunningTask, minRunMs: number): boolean {
  return !t.stopping && t.fits && t.progressed && t.totalSteps > 1 && t.step < t.totalSteps && t.ranMs >= minRunMs;
}

/**
 * The running task to preempt for `waiting`: among the preemptible ones it is more urgent than,
 * the lowest priority, then the one with the most steps left (its run is the longest to wait
 * for), then the latest deadline. `later` is true when none qualifies now but one it is more
 * urgent than will once it has run long enough (ask again soon).
 */
export function chooseVictim<T extends RunningTask>(
  waiting: WaitingTask,
  running: readonly T[],
  minRunMs: number,
): { victim?: T; reason?: string; later: boolean } {
  let best: T | undefined;
  let reason: string | undefined;
  let later = false;
  for (const t of running) {
    const why = urgency(waiting, t);
    if (!why || t.stopping || !t.fits) continue;
    if (!preemptible(t, minRunMs)) {
      if (t.totalSteps === 0 || t.step < t.totalSteps) later = true;
      continue;
    }
    if (!best || before(t, best)) {
      best = t;
      reason = why;
    }
  }
  return best ? { victim: best, reason: reason!, later } : { later };
}

function before(a: RunningTask, b: RunningTask): boolean {
  if (a.priority !== b.priority) return a.priority < b.priority;
  const left = a.totalSteps - a.step - (b.totalSteps - b.step);
  if (left !== 0) return left > 0;
  return (a.deadline || Infinity) > (b.deadline || Infinity);
}

/**
 * Whether a waiting task with `deadline` misses it unless it gets a slot now: its own run
 * (`runMs`, estimated) would end past the deadline if it started when the soonest running task
 * ends by itself (`soonestFreeMs` from now). Unknown estimates count as no risk.
 */
export function deadlineAtRisk(now: number, deadline: number, runMs: number | undefined, soonestFreeMs: number | undefined): boolean {
  if (deadline <= 0 || runMs === undefined || soonestFreeMs === undefined) return false;
  return now + soonestFreeMs + runMs > deadline;
}
