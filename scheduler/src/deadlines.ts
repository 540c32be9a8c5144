/**
 * A request's deadline and timeout: what they are (the earlier of the two ends the request),
 * the errors they end it with, and, under the `refuse` deadline policy, the estimates that
 * refuse a request at admission or fail a running one early (see the README's "Preemption and
 * deadlines"). Estimates come from the run times this scheduler measured (`task-cost.ts`).
 */
import { Code, DiffmeshError, invalidParameter, type ExecutionPlan, type RequestContext } from '@diffmesh/core';
import type { SchedulerLimits } from './limits.js';
import type { Outcome } from './request-end.js';
import type { RequestRecord } from './storage/types.js';
import type { TaskCosts } from './task-cost.js';
import { MAX_TIMEOUT_MS } from './types.js';

/** The request's deadline (ms since the epoch): its timeout's end or its own deadline, whichever comes first; 0 = none. */
export function deadlineOf(r: RequestRecord): number {
  const ctx = r.state.context;
  const timeout = ctx.timeoutMs > 0 ? ctx.createdAt + ctx.timeoutMs : 0;
  const own = ctx.deadline ?? 0;
  return timeout && own ? Math.min(timeout, own) : timeout || own;
}

/** True when the request's {@link deadlineOf} has passed. */
export function pastDeadline(r: RequestRecord): boolean {
  const d = deadlineOf(r);
  return d > 0 && Date.now() >= d;
}

/** The error of a request whose own deadline passed. */
export function deadlineError(deadline: number): DiffmeshError {
  return new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `request deadline ${new Date(deadline).toISOString()} passed`);
}

export function timeoutError(timeoutMs: number): DiffmeshError {
  return new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `request timed out after ${timeoutMs} ms`);
}

/** The error of a request past {@link deadlineOf}: its own deadline's, or its timeout's. */
export function expiredError(r: RequestRecord): DiffmeshError {
  const ctx = r.state.context;
  return ctx.deadline && deadlineOf(r) === ctx.deadline ? deadlineError(ctx.deadline) : timeoutError(ctx.timeoutMs);
}

/** When a request just accepted ends unless it finished: its timeout, or its deadline when that comes first. */
export function endsIn(timeoutMs: number, deadline: number | undefined, now: number): { ms: number; error: DiffmeshError } | undefined {
  const untilDeadline = deadline ? Math.max(0, deadline - now) : Infinity;
  const ms = Math.min(timeoutMs > 0 ? timeoutMs : Infinity, untilDeadline);
  if (!Number.isFinite(ms)) return undefined;
  return { ms, error: ms === untilDeadline ? deadlineError(deadline!) : timeoutError(timeoutMs) };
}

/** A request's deadline as given: a whole number of ms since the epoch, in the future, within the longest timeout. */
export function checkDeadline(deadline: number | undefined): number | undefined {
  if (deadline === undefined || deadline === 0) return undefined;
  const now = Date.now();
  if (!Number.isFinite(deadline) || deadline < 0) {
    throw invalidParameter('deadline', `must be a time (ms since the epoch), got ${deadline}`);
  }
  if (deadline <= now) {
    throw invalidParameter('deadline', `is in the past (${new Date(deadline).toISOString()}, now ${new Date(now).toISOString()})`);
  }
  if (deadline - now > MAX_TIMEOUT_MS) {
    throw invalidParameter(
      'deadline',
      `must be within ${MAX_TIMEOUT_MS} ms (about 24 days) from now, got ${new Date(deadline).toISOString()}`,
    );
  }
  return Math.round(deadline);
}

/** DEADLINE_EXCEEDED / DEADLINE_UNREACHABLE: the estimate (and what it is made of) against the time left. */
function unreachable(estimateMs: number, leftMs: number, parts: string, when: 'admission' | 'running'): DiffmeshError {
  const what = when === 'admission' ? 'cannot finish by its deadline' : 'will not finish by its deadline';
  return new DiffmeshError(
    Code.DEADLINE_EXCEEDED,
    'DEADLINE_UNREACHABLE',
    `request ${what}: estimated ${Math.round(estimateMs)} ms (${parts || 'measured run times'}) with ${Math.max(0, Math.round(leftMs))} ms left`,
    { metadata: { field: 'deadline', estimate_ms: String(Math.round(estimateMs)), left_ms: String(Math.max(0, Math.round(leftMs))) } },
  );
}

/** Where a running try is, for {@link Deadlines.checkRunning}. */
export interface TrySpeed {
  /** performance.now() when the try started. */
  startedAt: number;
  /** The first step it reported, and the last, of `totalSteps`. */
  firstStep: number;
  step: number;
  totalSteps: number;
}

export interface DeadlinesOptions {
  limits: SchedulerLimits;
  costs: TaskCosts;
  /** Ends a request (see `RequestEnding.end`). */
  end: (reqId: string, outcome: Outcome) => Promise<unknown>;
}

/** The `refuse` policy's checks: at admission, when a task is taken, and at each step of a running try. */
export class Deadlines {
  /** Tries whose check is in flight (one at a time per try). */
  private readonly checking = new WeakSet<object>();

  constructor(private readonly opts: DeadlinesOptions) {}

  private get refusing(): boolean {
    return (this.opts.limits.deadlinePolicy ?? 'refuse') === 'refuse';
  }

  /**
   * Refuses a request whose plan cannot finish by `deadline` at the run times this scheduler
   * measured (the sum of its stages' estimates; stages not measured yet count nothing). The
   * queue ahead is not counted: a request with a deadline passes tasks of its priority with
   * later or no deadlines, and may preempt.
   */
  reachable(deadline: number, model: string, plan: ExecutionPlan, params: RequestContext['params']): void {
    if (!this.refusing) return;
    let estimate = 0;
    const parts: string[] = [];
    for (const s of plan.stages) {
      const ms = this.opts.costs.estimateMs(s.pool, model, s.name, params);
      if (ms === undefined) continue;
      estimate += ms;
      parts.push(`${s.name} ${Math.round(ms)} ms`);
    }
    const left = deadline - Date.now();
    if (estimate > left) throw unreachable(estimate, left, parts.join(' + '), 'admission');
  }

  /**
   * The time a request needs from stage `stageIndex` on: that stage's rest (at `msPerStep` for
   * `stepsLeft` steps when measured in this try, else its estimate) and the later stages'
   * estimates; undefined when nothing is measured yet.
   */
  leftMs(rec: RequestRecord, stageIndex: number, msPerStep: number, stepsLeft: number): { ms: number; how: string } | undefined {
    const ctx = rec.state.context;
    let ms = 0;
    const parts: string[] = [];
    ctx.executionPlan.stages.forEach((s, i) => {
      if (i < stageIndex) return;
      const measured = i === stageIndex && msPerStep > 0;
      let est = measured ? msPerStep * stepsLeft : this.opts.costs.estimateMs(s.pool, ctx.model, s.name, ctx.params);
      if (est === undefined) return;
      // A try that resumes from a checkpoint (a preempted one) has only the steps after it left.
      const { step, totalSteps } = rec.state;
      if (i === stageIndex && msPerStep === 0 && rec.checkpoint && totalSteps > 0 && step < totalSteps) {
        est = (est * (totalSteps - step)) / totalSteps;
      }
      ms += est;
      parts.push(measured ? `${stepsLeft} ${s.name} steps at ${Math.round(msPerStep)} ms` : `${s.name} ${Math.round(est)} ms`);
    });
    return parts.length > 0 ? { ms, how: parts.join(' + ') } : undefined;
  }

  /**
   * Fails a request whose estimated finish (`leftMs` from now) passes its deadline, without
   * waiting for it; true when it did.
   */
  async failIfLate(reqId: string, deadline: number, leftMs: number, how: string): Promise<boolean> {
    if (!this.refusing || !deadline) return false;
    const left = deadline - Date.now();
    if (leftMs <= left) return false;
    await this.opts.end(reqId, { type: 'failed', error: unreachable(leftMs, left, how, 'running') });
    return true;
  }

  /** When a task is taken from its queue: fails its request now when the task would end past the deadline. */
  async lateAtStart(rec: RequestRecord, stageIndex: number): Promise<boolean> {
    const deadline = rec.state.context.deadline;
    if (!deadline) return false;
    const left = this.leftMs(rec, stageIndex, 0, 0);
    return left !== undefined && this.failIfLate(rec.state.context.reqId, deadline, left.ms, left.how);
  }

  /** At a step of a running try (its speed measured from its second step): fails its request early when it ends late. */
  checkRunning(key: object, rec: RequestRecord, stageIndex: number, speed: TrySpeed): Promise<unknown> | undefined {
    const deadline = rec.state.context.deadline;
    const { step, firstStep, totalSteps } = speed;
    if (!deadline || this.checking.has(key) || step - firstStep < 1 || step >= totalSteps) return undefined;
    // The try's first step carries its start-up (loading inputs): its speed is measured after it.
    const msPerStep = (performance.now() - speed.startedAt) / (step - firstStep + 1);
    const left = this.leftMs(rec, stageIndex, msPerStep, totalSteps - step);
    if (!left) return undefined;
    this.checking.add(key);
    return this.failIfLate(rec.state.context.reqId, deadline, left.ms, left.how).finally(() => this.checking.delete(key));
  }
}
