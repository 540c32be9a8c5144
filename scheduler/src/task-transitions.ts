/**
 * A stage task's transitions as a dispatch reports them (the README's lifecycle table): its
 * start, progress, and how each try ended, one case per kind of {@link TaskEnd}. Every change
 * is a compare-and-set on the request's record, so any scheduler sharing the store may make it,
 * and a transition that lost a race (a stage finished twice, a cancel during completion) sees
 * the winner's record and does nothing. Each move is counted and logged (debug) with the
 * {@link TaskState} names.
 */
import { Code, type DiffmeshError, type Logger, type ObjectRef, type StageResult } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import type { SchedulerLimits } from './limits.js';
import { lostInputs } from './lost-inputs.js';
import { current, keepCheckpoint, newTask, pushProgress, stageOf, timingOf } from './record-edits.js';
import type { ObserveEvents, RequestEnding } from './request-end.js';
import { isTerminalStatus, type Lease, type QueueItem, type RequestRecord, type SchedulerStore } from './storage/types.js';
import type { PreemptedAt, TaskEnd, TaskState } from './task-end.js';
import type { TaskItems } from './task-items.js';
import type { TransitionCounts } from './transition-counts.js';
import { MAX_TIMEOUT_MS } from './types.js';

/** What the dispatcher adds to a try's end: the record it last wrote, and the last step it left for the end's write. */
export interface TaskEndOptions {
  /** The request's record as the dispatch last wrote it (a hint for the write). */
  hint?: RequestRecord;
  /** The last step, when the dispatcher left it for this write (shared stores). */
  lastProgress?: { step: number; totalSteps: number };
}

/** Default bound on stage re-runs of one request caused by lost inputs. */
const MAX_RERUNS_PER_STAGE = 2;

/** How long a task may wait for its request's record before it is dropped (JetStream admits the task first). */
const ORPHAN_GRACE_MS = 30_000;

/** Tries of one stage lost with their instance or scheduler (not failures of the task) before the request fails. */
const MAX_LOST_TRIES = 10;

export interface TaskTransitionsOptions {
  store: SchedulerStore;
  tensors: TensorStore;
  log: Logger;
  limits: SchedulerLimits;
  items: TaskItems;
  ending: RequestEnding;
  observe: ObserveEvents;
  counts: TransitionCounts;
  /** A task was queued by this scheduler (stranded-task checks, preemption). */
  onEnqueued?: (item: QueueItem) => void;
}

export class TaskTransitions {
  constructor(private readonly opts: TaskTransitionsOptions) {}

  /**
   * A leased task is about to go to `instanceId`. Returns the record with the
   * `stage_started` event, or undefined when the task is stale (its request ended or moved
   * on); the caller then calls {@link repair}.
   */
  async started(lease: Lease, pool: string, instanceId: string, hint?: RequestRecord): Promise<RequestRecord | undefined> {
    const { item } = lease;
    let before = 0;
    const rec = await this.opts.store.update(
      item.reqId,
      (r) => {
        if (!current(r, item)) return false;
        before = r.events.length;
        const ctx = r.state.context;
        // A try whose lease ran out (its scheduler died) was lost: this is the next one.
        if (r.startedBy !== undefined && r.startedBy !== lease.token) {
          r.attempt += 1;
          r.lostTries = (r.lostTries ?? 0) + 1;
          ctx.retryCount += 1;
        }
        r.startedBy = lease.token;
        const now = Date.now();
        const timing = timingOf(r, item.stageIndex);
        timing.instanceId = instanceId;
        timing.attempts = r.attempt;
        timing.startedAt = now;
        ctx.status = 'running';
        ctx.updatedAt = now;
        r.state.step = 0;
        r.state.totalSteps = 0;
        const stage = stageOf(r, item.stageIndex);
        r.events.push({
          type: 'stage_started',
          reqId: ctx.reqId,
          stageIndex: item.stageIndex,
          stage,
          pool,
          instanceId,
          attempt: r.attempt,
          at: now,
        });
        return {};
      },
      hint,
    );
    if (rec) this.moved(rec, item, 'leased', 'running', before);
    return rec;
  }

  /** Progress of a running task (a shared store gets it throttled: see `ProgressWriter`). */
  async progress(
    lease: Lease,
    step: number,
    totalSteps: number,
    opts: { hint?: RequestRecord; checkpoint?: Record<string, ObjectRef> } = {},
  ): Promise<RequestRecord | undefined> {
    const { item } = lease;
    let before = 0;
    let replaced: ObjectRef[] = [];
    const rec = await this.opts.store.update(
      item.reqId,
      (r) => {
        if (!current(r, item) || r.startedBy !== lease.token) return false;
        before = r.events.length;
        pushProgress(r, item.stageIndex, step, totalSteps);
        replaced = opts.checkpoint ? keepCheckpoint(r, opts.checkpoint) : [];
        return {};
      },
      opts.hint,
    );
    if (rec) {
      this.opts.observe(rec, before);
      if (replaced.length > 0) void this.opts.ending.deleteObjects(item.reqId, replaced, false);
    } else if (opts.checkpoint) {
      // Too late (the request ended or moved on): the checkpoint is not needed.
      void this.opts.ending.deleteObjects(item.reqId, Object.values(opts.checkpoint), false);
    }
    return rec;
  }

  /**
   * A try of a leased task ended, as the dispatcher classified it (`classifyTaskEnd` in
   * `task-end.ts`, which lists the kinds): one case per kind. A new kind gets its case here.
   */
  async taskEnded(lease: Lease, end: TaskEnd, opts: TaskEndOptions = {}): Promise<void> {
    switch (end.kind) {
      case 'completed':
        return this.completed(lease, end.result, opts);
      case 'superseded':
        // Someone else runs it now: what this try left behind is reaped by TTL.
        return;
      case 'refused':
        return this.requeue(lease, false);
      case 'handed-back':
        return this.requeue(lease, true);
      case 'preempted':
        return this.preempted(lease, end.at);
      case 'request-ended':
        return this.abandon(lease);
      case 'lost':
        return this.retry(lease, end.error, 'lost');
      case 'failed': {
        if (end.inputsMayBeLost && (await this.rerunLostInputs(lease))) return;
        if (end.retryable) return this.retry(lease, end.error, 'failed');
        return this.fail(lease, end.error);
      }
      default: {
        const unhandled: never = end;
        throw new Error(`unhandled task end ${JSON.stringify(unhandled)}`);
      }
    }
  }

  /** A task finished: the request moves on to its next stage, or completes. */
  private async completed(lease: Lease, result: StageResult, opts: TaskEndOptions): Promise<void> {
    const { item } = lease;
    const { outputs } = result;
    let before = 0;
    let next: QueueItem | undefined;
    let checkpoints: ObjectRef[] = [];
    const rec = await this.opts.store.update(
      item.reqId,
      (r) => {
        if (!current(r, item)) return false;
        before = r.events.length;
        next = undefined;
        // The last step, when the dispatcher left it for this write (shared stores).
        const last = opts.lastProgress;
        if (last && (r.state.step < last.step || r.state.totalSteps !== last.totalSteps))
          pushProgress(r, item.stageIndex, last.step, last.totalSteps);
        // The stage is done: its checkpoints go.
        checkpoints = Object.values(r.checkpoint ?? {});
        delete r.checkpoint;
        const now = finishStage(r, item.stageIndex, result);
        const n = item.stageIndex + 1;
        if (n < r.state.context.executionPlan.stages.length) {
          r.gen += 1;
          newTask(r);
          next = this.opts.items.queued(r, n, now);
          return { ack: lease, enqueue: next };
        }
        completeRequest(r, outputs, now, this.opts.limits.retentionMs);
        return { ack: lease };
      },
      opts.hint,
    );
    const { ending } = this.opts;
    if (!rec) {
      // Someone else moved the request on (or it ended): what this try made is not needed.
      void ending.deleteObjects(item.reqId, Object.values(outputs), false);
      await this.repair(lease, 'running');
      return;
    }
    this.moved(rec, item, 'running', 'done', before);
    if (checkpoints.length > 0) void ending.deleteObjects(item.reqId, checkpoints, false);
    if (next) {
      this.opts.onEnqueued?.(next);
      return;
    }
    // Completed: the intermediates go; the outputs stay for the client (their TTL reaps them).
    const keep = new Set(Object.values(outputs).map((r) => r.objectId));
    const intermediates = Object.values(rec.state.context.refs).filter((r) => !keep.has(r.objectId));
    void ending.deleteObjects(item.reqId, intermediates, false);
  }

  /**
   * A try that did not count as one goes back in its place at once. A refused one (never ran)
   * is the same try again; a handed-back one ran (and may have left a checkpoint), so the next
   * is another try, and the request's history shows it waits in the queue again. Neither uses
   * up a try of any budget.
   */
  private async requeue(lease: Lease, ran: boolean): Promise<void> {
    const { item } = lease;
    let before = 0;
    const rec = await this.opts.store.update(item.reqId, (r) => {
      if (!current(r, item) || r.startedBy !== lease.token) return false;
      r.startedBy = undefined;
      before = r.events.length;
      if (ran) {
        r.attempt += 1;
        this.opts.items.queued(r, item.stageIndex, Date.now());
      }
      return { release: { lease, delayMs: 0 } };
    });
    if (rec) this.moved(rec, item, 'running', 'queued', before);
    else await this.repair(lease, 'running');
  }

  /**
   * Re-runs the stage that made an input of the task that is gone (and the stages after it);
   * false when none is gone, or it cannot (an input of the request itself, or too many re-runs).
   */
  private async rerunLostInputs(lease: Lease): Promise<boolean> {
    const { item } = lease;
    const seen = await this.opts.store.read(item.reqId);
    const lost = seen && current(seen, item) ? await lostInputs(this.opts.tensors, seen) : [];
    if (lost.length === 0) return false;
    let before = 0;
    let rerun: QueueItem | undefined;
    const rec = await this.opts.store.update(item.reqId, (r) => {
      if (!current(r, item)) return false;
      const producer = Math.min(...lost.map((n) => r.producers[n] ?? Infinity));
      if (!Number.isFinite(producer) || r.reruns >= MAX_RERUNS_PER_STAGE * r.state.context.executionPlan.stages.length) return false;
      before = r.events.length;
      forgetFrom(r, producer);
      rerun = this.opts.items.queued(r, producer, Date.now());
      return { ack: lease, enqueue: rerun };
    });
    if (!rec || !rerun) return false;
    this.opts.log.warn(
      { reqId: item.reqId, stage: stageOf(rec, item.stageIndex), lost, rerun: rerun.stageIndex },
      'inputs lost; re-running the stage that made them',
    );
    this.moved(rec, item, 'running', 'dropped', before);
    this.opts.onEnqueued?.(rerun);
    return true;
  }

  /**
   * Tries the task again. A `failed` try counts against `maxAttempts` and waits a back-off; a
   * `lost` one (lost with its instance: not the task's failure) is tried again at once, up to
   * `MAX_LOST_TRIES` (in case the task is what kills its instances). Past its bound the request
   * fails.
   */
  private async retry(lease: Lease, error: DiffmeshError, how: 'failed' | 'lost'): Promise<void> {
    const { item } = lease;
    const { store, limits, log } = this.opts;
    let before = 0;
    let delay = 0;
    const rec = await store.update(item.reqId, (r) => {
      if (!current(r, item)) return false;
      const failures = r.failures + (how === 'failed' ? 1 : 0);
      const lostTries = (r.lostTries ?? 0) + (how === 'lost' ? 1 : 0);
      if (how === 'failed' ? failures >= limits.maxAttempts : lostTries > MAX_LOST_TRIES) return false;
      before = r.events.length;
      delay = how === 'lost' ? 0 : Math.min(MAX_TIMEOUT_MS, limits.retryBackoffMs * 2 ** Math.max(0, failures - 1));
      r.failures = failures;
      r.lostTries = lostTries;
      r.attempt += 1;
      r.startedBy = undefined;
      r.state.context.retryCount += 1;
      return { release: { lease, delayMs: delay } };
    });
    if (rec) {
      log.warn(
        { reqId: item.reqId, stage: stageOf(rec, item.stageIndex), attempt: rec.attempt - 1, reason: error.reason, delay },
        'stage failed; retrying',
      );
      this.moved(rec, item, 'running', 'queued', before);
      return;
    }
    await this.fail(lease, error);
  }

  /** The task failed for good: its request fails (unless it ended or moved on meanwhile). */
  private async fail(lease: Lease, error: DiffmeshError): Promise<void> {
    const { item } = lease;
    const now = await this.opts.store.read(item.reqId);
    if (!now || !current(now, item)) {
      await this.abandon(lease, now);
      return;
    }
    if (error.code === Code.INTERNAL && error.reason === 'INTERNAL') this.opts.log.error({ reqId: item.reqId, err: error }, 'stage failed');
    await this.opts.ending.end(item.reqId, { type: 'failed', error }, { ack: lease });
    this.count(item, 'running', 'dropped');
  }

  /**
   * The task's request ended or moved on while it ran: the task's leftovers go with the
   * request's (when it ended), and its item is dealt with by {@link repair}.
   */
  private async abandon(lease: Lease, seen?: RequestRecord): Promise<void> {
    const now = seen ?? (await this.opts.store.read(lease.item.reqId));
    if (now && isTerminalStatus(now.state.context.status)) void this.opts.ending.deleteObjects(lease.item.reqId, [], true);
    await this.repair(lease, 'running');
  }

  /**
   * A running task gave its slot to a more urgent one at a step boundary (see `preemption.ts`):
   * the `preempted` event; the checkpoint where it stopped becomes the stage's (the next try
   * resumes from it); the task goes back to its place in its queue at once as the next try,
   * which counts neither as a failure nor as a lost try.
   */
  private async preempted(lease: Lease, how: PreemptedAt): Promise<void> {
    const { item } = lease;
    let before = 0;
    let replaced: ObjectRef[] = [];
    const rec = await this.opts.store.update(item.reqId, (r) => {
      if (!current(r, item) || r.startedBy !== lease.token) return false;
      before = r.events.length;
      replaced = how.checkpoint ? keepCheckpoint(r, how.checkpoint) : [];
      if (how.step > 0) pushProgress(r, item.stageIndex, how.step, how.totalSteps);
      const now = Date.now();
      const { pool, instanceId, step, totalSteps, reason } = how;
      const stage = stageOf(r, item.stageIndex);
      r.events.push({
        type: 'preempted',
        reqId: r.state.context.reqId,
        stageIndex: item.stageIndex,
        stage,
        pool,
        instanceId,
        attempt: r.attempt,
        step,
        totalSteps,
        reason,
        at: now,
      });
      r.startedBy = undefined;
      r.attempt += 1;
      this.opts.items.queued(r, item.stageIndex, now);
      return { release: { lease, delayMs: 0 } };
    });
    const { ending } = this.opts;
    if (rec) {
      this.moved(rec, item, 'running', 'queued', before);
      this.opts.log.info({ reqId: item.reqId, pool: item.pool, step: how.step, reason: how.reason }, 'preempted task queued again');
      if (replaced.length > 0) void ending.deleteObjects(item.reqId, replaced, false);
      return;
    }
    // Ended or moved on meanwhile: the checkpoint is not needed.
    if (how.checkpoint) void ending.deleteObjects(item.reqId, Object.values(how.checkpoint), false);
    await this.repair(lease, 'running');
  }

  /**
   * Deals with a leased task that is not the request's current one (the request ended or
   * moved on, perhaps half-way on a backend that applies effects one by one): makes sure the
   * current task is queued (an enqueue of a stored id is a no-op) and drops the stale one.
   * `from`: the stale task was only leased, or it ran (its try ended after the request moved on).
   */
  async repair(lease: Lease, from: TaskState = 'leased'): Promise<void> {
    const { item } = lease;
    const { store } = this.opts;
    const rec = await store.read(item.reqId);
    if (!rec) {
      // JetStream queues a request's first task before it stores the record: give it time.
      if (Date.now() - item.enqueuedAt < ORPHAN_GRACE_MS) await store.apply({ release: { lease, delayMs: 1000 } });
      else await store.apply({ ack: lease });
      return;
    }
    if (isTerminalStatus(rec.state.context.status) || current(rec, item)) {
      if (current(rec, item) && rec.startedBy === undefined) {
        await store.apply({ release: { lease, delayMs: 0 } });
        this.count(item, from, 'queued');
        return;
      }
      await store.apply({ ack: lease });
      this.count(item, from, 'dropped');
      return;
    }
    const stage = rec.state.context.currentStageIndex;
    const queuedAt = rec.state.timings.find((t) => t.stageIndex === stage)?.queuedAt || Date.now();
    await store.apply({ ack: lease, enqueue: this.opts.items.itemFor(rec, stage, queuedAt) });
    this.count(item, from, 'dropped');
  }

  /** A move written: its events go to the observer, and it is counted. */
  private moved(rec: RequestRecord, item: QueueItem, from: TaskState, to: TaskState, before: number): void {
    this.opts.observe(rec, before);
    this.count(item, from, to);
  }

  private count(item: QueueItem, from: TaskState, to: TaskState): void {
    this.opts.counts.count('task', from, to);
    if (this.opts.log.isLevelEnabled('debug'))
      this.opts.log.debug({ reqId: item.reqId, stageIndex: item.stageIndex, from, to }, 'task moved');
  }
}

/** The `stage_finished` of stage `stageIndex` in a record being changed (outputs kept, timing closed); answers the time. */
function finishStage(r: RequestRecord, stageIndex: number, result: StageResult): number {
  const { outputs, warnings } = result;
  const ctx = r.state.context;
  const now = Date.now();
  Object.assign(ctx.refs, outputs);
  for (const name of Object.keys(outputs)) r.producers[name] = stageIndex;
  const timing = timingOf(r, stageIndex);
  timing.finishedAt = now;
  ctx.updatedAt = now;
  r.startedBy = undefined;
  r.events.push({
    type: 'stage_finished',
    reqId: ctx.reqId,
    stageIndex,
    stage: stageOf(r, stageIndex),
    queueMs: timing.startedAt - timing.queuedAt,
    runMs: now - timing.startedAt,
    outputs,
    ...(warnings?.length ? { warnings } : {}),
    at: now,
  });
  return now;
}

/** The request completed with the last stage's outputs (a record being changed). */
function completeRequest(r: RequestRecord, outputs: Record<string, ObjectRef>, now: number, retentionMs: number): void {
  const ctx = r.state.context;
  ctx.status = 'completed';
  r.state.result = { ...outputs };
  r.expiresAt = now + retentionMs;
  r.events.push({ type: 'completed', reqId: ctx.reqId, outputs, at: now });
}

/** Everything made from stage `producer` on is made again (a record being changed): a new task of that stage. */
function forgetFrom(r: RequestRecord, producer: number): void {
  const ctx = r.state.context;
  for (const [name, stage] of Object.entries(r.producers)) {
    if (stage >= producer) {
      delete ctx.refs[name];
      delete r.producers[name];
    }
  }
  r.reruns += 1;
  delete r.checkpoint;
  r.gen += 1;
  newTask(r);
  r.startedBy = undefined;
  ctx.retryCount += 1;
}
