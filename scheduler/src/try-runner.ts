/**
 * Runs a try that has started (its `stage_started` written): the queue-wait and dispatch
 * spans, the task as the instance gets it, its progress and previews while it runs, and its
 * answer, classified in one place (`classifyTaskEnd`) and recorded by `TaskTransitions`.
 */
import { trace } from '@opentelemetry/api';
import {
  ATTR,
  SPAN,
  SpanKind,
  asDiffmeshError,
  diffmeshTracer,
  extractTraceContext,
  injectTraceContext,
  recordError,
  type Logger,
  type OtelContext,
  type Span,
  type StageProgress,
  type StageResult,
  type StageTask,
} from '@diffmesh/core';
import { deadlineOf, type Deadlines } from './deadlines.js';
import type { SchedulerLimits } from './limits.js';
import { ProgressWriter } from './progress-writer.js';
import type { RequestWatchers } from './request-watchers.js';
import type { QueueItem, RequestRecord } from './storage/types.js';
import { classifyTaskEnd, type TaskEnd, type TaskEndKind } from './task-end.js';
import type { TaskCosts } from './task-cost.js';
import type { TaskTransitions } from './task-transitions.js';
import type { TaskTry } from './task-try.js';
import type { TenantQuotas } from './tenant-quotas.js';
import { MAX_TIMEOUT_MS } from './types.js';

export interface TryRunnerOptions {
  transitions: TaskTransitions;
  watchers: RequestWatchers;
  deadlines: Deadlines;
  costs: TaskCosts;
  quotas: TenantQuotas;
  limits: SchedulerLimits;
  log: Logger;
  /** See `DispatcherOptions.progressIntervalMs`. */
  progressIntervalMs: number;
  /** The try's answer is recorded (or could not be): its slot is free again. */
  onDone: (t: TaskTry) => void;
}

/** The dispatch span's outcome for each kind of end (a table: a new kind must be given one); a timed-out try's is `timeout`. */
const SPAN_OUTCOME: Readonly<Record<TaskEndKind, { outcome: string; error: boolean }>> = {
  completed: { outcome: 'ok', error: false },
  superseded: { outcome: 'superseded', error: false },
  refused: { outcome: 'failed', error: true },
  'handed-back': { outcome: 'handed-back', error: false },
  preempted: { outcome: 'preempted', error: false },
  'request-ended': { outcome: 'cancelled', error: true },
  lost: { outcome: 'failed', error: true },
  failed: { outcome: 'failed', error: true },
};

type Answer = { result: StageResult } | { rejected: unknown };

export class TryRunner {
  constructor(private readonly opts: TryRunnerOptions) {}

  /** Sends the try's task to its instance and records its answer; `onDone` follows. */
  run(t: TaskTry, rec: RequestRecord): void {
    const { item } = t.lease;
    const { instance } = t.slot;
    const ctx = rec.state.context;
    const stage = ctx.executionPlan.stages[item.stageIndex];
    const parent = extractTraceContext(ctx.traceContext);
    queueWaitSpan(rec, item, parent);
    const span = this.dispatchSpan(t, rec, parent);
    const task = stageTask(rec, item, injectTraceContext(trace.setSpan(parent, span)));
    t.record = rec;
    // A try that resumed from a checkpoint runs part of the stage: its time is no sample of the whole.
    const resumed = rec.checkpoint !== undefined && Object.keys(rec.checkpoint).length > 0;
    const cancel = t.running(Math.min(MAX_TIMEOUT_MS, this.opts.limits.stageTimeoutMs));
    this.opts.quotas.taskStarted(item.tenant, t.cost);
    const progress = new ProgressWriter(t, this.opts.transitions, this.opts.log, this.opts.progressIntervalMs);
    instance
      .execute(task, { cancel, preempt: t.preempt.signal, onProgress: (p) => this.progressed(t, rec, progress, p) })
      .then(
        (result) => this.answered(t, span, { result }, progress, resumed),
        (rejected: unknown) => this.answered(t, span, { rejected }, progress, resumed),
      )
      .catch((err: unknown) => this.opts.log.warn({ reqId: ctx.reqId, stage: stage.name, err }, 'could not record the outcome of a task'))
      .finally(() => {
        cancel.dispose();
        this.opts.quotas.taskEnded(item.tenant, t.cost);
        this.opts.onDone(t);
      });
  }

  /** A step (and perhaps previews, a checkpoint, or where a preempted try stopped) reported by the instance. */
  private progressed(t: TaskTry, rec: RequestRecord, progress: ProgressWriter, p: StageProgress): void {
    const { lease } = t;
    const stage = rec.state.context.executionPlan.stages[lease.item.stageIndex].name;
    // Previews go to live watchers at once (never stored, so never throttled).
    for (const v of p.previews ?? []) if (!t.muted) this.opts.watchers.preview(lease, stage, p.totalSteps, v);
    t.stepped(p.step, p.totalSteps);
    if (rec.state.context.deadline && t.why !== 'request-ended') this.checkLate(t, rec);
    // Where a preempted task stopped rides with its requeue (one write, nothing lost).
    if (p.preempted && t.why === 'preempted' && t.preemption) {
      t.preemption = { ...t.preemption, step: p.step, totalSteps: p.totalSteps, ...(p.checkpoint ? { checkpoint: p.checkpoint } : {}) };
    } else progress.write(p.step, p.totalSteps, p.checkpoint);
  }

  /** Fails a running request early when its measured speed says it ends past its deadline. */
  private checkLate(t: TaskTry, rec: RequestRecord): void {
    const steps = t.steps;
    if (!steps || t.state === 'starting') return;
    const speed = { startedAt: t.startedAt, firstStep: steps.first, step: steps.step, totalSteps: steps.total };
    void this.opts.deadlines
      .checkRunning(t, rec, t.lease.item.stageIndex, speed)
      ?.catch((err: unknown) => this.opts.log.debug({ err }, 'could not check a deadline'));
  }

  /** The instance answered: the span ends with the try's outcome, and the end is recorded. */
  private async answered(t: TaskTry, span: Span, answer: Answer, progress: ProgressWriter, resumed: boolean): Promise<void> {
    t.transition('answered');
    const { item } = t.lease;
    const stage = t.record!.state.context.executionPlan.stages[item.stageIndex].name;
    const end = classifyTaskEnd(answer, t.seen(stage));
    endSpan(span, end, t.cancel?.timedOut() === true, answer);
    if ('result' in answer) {
      const ctx = t.record!.state.context;
      if (!resumed) this.opts.costs.observe(item.pool, ctx.model, stage, ctx.params, performance.now() - t.startedAt);
      // On a shared store the last step rides with the stage's end (one write less); the
      // memory store has written every step already.
      return this.opts.transitions.taskEnded(t.lease, end, progress.endOptions());
    }
    return this.opts.transitions.taskEnded(t.lease, end);
  }

  private dispatchSpan(t: TaskTry, rec: RequestRecord, parent: OtelContext): Span {
    const { item } = t.lease;
    const { instance } = t.slot;
    const ctx = rec.state.context;
    return diffmeshTracer().startSpan(
      SPAN.dispatch,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR.requestId]: ctx.reqId,
          [ATTR.model]: ctx.model,
          [ATTR.pool]: instance.pool,
          [ATTR.stage]: ctx.executionPlan.stages[item.stageIndex].name,
          [ATTR.stageIndex]: item.stageIndex,
          [ATTR.attempt]: rec.attempt,
          [ATTR.instanceId]: instance.id,
          [ATTR.nodeId]: instance.nodeId,
          ...(t.adapters
            ? {
                [ATTR.adapters]: t.adapters.names.length,
                [ATTR.adaptersHeld]: t.adapters.held === t.adapters.names.length,
                [ATTR.adaptersReported]: t.adapters.reported,
              }
            : {}),
        },
      },
      parent,
    );
  }
}

/** The queue wait, as one span from when the task was queued (perhaps by another scheduler). */
function queueWaitSpan(rec: RequestRecord, item: QueueItem, parent: OtelContext): void {
  const ctx = rec.state.context;
  const stage = ctx.executionPlan.stages[item.stageIndex];
  const timing = rec.state.timings.find((x) => x.stageIndex === item.stageIndex);
  diffmeshTracer()
    .startSpan(
      SPAN.queueWait,
      {
        startTime: timing?.queuedAt || item.enqueuedAt,
        attributes: {
          [ATTR.requestId]: ctx.reqId,
          [ATTR.pool]: stage.pool,
          [ATTR.stage]: stage.name,
          [ATTR.stageIndex]: item.stageIndex,
          [ATTR.attempt]: rec.attempt,
          [ATTR.outcome]: 'ok',
        },
      },
      parent,
    )
    .end();
}

/** The task as its instance gets it. */
function stageTask(rec: RequestRecord, item: QueueItem, traceContext: StageTask['traceContext']): StageTask {
  const ctx = rec.state.context;
  return {
    reqId: ctx.reqId,
    stageIndex: item.stageIndex,
    stage: ctx.executionPlan.stages[item.stageIndex].name,
    attempt: rec.attempt,
    model: ctx.model,
    params: ctx.params,
    // A later try also gets what earlier tries of the stage kept (a checkpoint to resume from).
    inputs: { ...ctx.refs, ...rec.checkpoint },
    deadline: deadlineOf(rec),
    // Its outputs are the request's result: tensor stores may keep them durably.
    ...(item.stageIndex === ctx.executionPlan.stages.length - 1 ? { lastStage: true } : {}),
    // The instance continues the trace from the dispatch span.
    traceContext,
    ...(ctx.tenant ? { tenant: ctx.tenant } : {}),
  };
}

/** Ends the dispatch span with the try's outcome (and, for a preempted try, where it stopped). */
function endSpan(span: Span, end: TaskEnd, timedOut: boolean, answer: Answer): void {
  const { outcome, error } = SPAN_OUTCOME[end.kind];
  span.setAttribute(ATTR.outcome, timedOut && outcome !== 'ok' && outcome !== 'preempted' ? 'timeout' : outcome);
  if (end.kind === 'preempted') {
    span.addEvent('diffmesh.preempted', {
      'diffmesh.preempt.reason': end.at.reason,
      [ATTR.step]: end.at.step,
      [ATTR.stepCount]: end.at.totalSteps,
    });
  }
  if (error && 'rejected' in answer) recordError(span, 'error' in end ? end.error : asDiffmeshError(answer.rejected));
  span.end();
}
