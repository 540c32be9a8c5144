/**
 * A request's stage task as a queue item, and queueing it inside a change of the record (the
 * `queued` event, the stage's timing, the request's current stage).
 */
import { DEFAULT_TENANT } from '@diffmesh/core';
import { timingOf } from './record-edits.js';
import { itemId, type QueueItem, type RequestRecord, type SchedulerStore } from './storage/types.js';
import type { TaskCosts } from './task-cost.js';

export class TaskItems {
  constructor(
    private readonly store: SchedulerStore,
    private readonly costs: TaskCosts,
  ) {}

  /** The queue item of stage `stageIndex` of the request as the record has it now. */
  itemFor(r: RequestRecord, stageIndex: number, enqueuedAt: number): QueueItem {
    const ctx = r.state.context;
    const stage = ctx.executionPlan.stages[stageIndex];
    return {
      id: itemId(ctx.reqId, stageIndex),
      reqId: ctx.reqId,
      stageIndex,
      gen: r.gen,
      createdAt: ctx.createdAt,
      pool: stage.pool,
      queue: stage.version ? `${stage.pool}@${stage.version}` : stage.pool,
      ...(stage.version ? { range: stage.version } : {}),
      model: ctx.model,
      priority: ctx.priority,
      enqueuedAt,
      tenant: ctx.tenant ?? DEFAULT_TENANT,
      cost: this.costs.estimate(stage.pool, ctx.model, stage.name, ctx.params),
      ...(ctx.deadline ? { deadline: ctx.deadline } : {}),
    };
  }

  /** Queues stage `stageIndex` of a record being changed: the `queued` event, timing and state. */
  queued(r: RequestRecord, stageIndex: number, now: number): QueueItem {
    const ctx = r.state.context;
    const stage = ctx.executionPlan.stages[stageIndex];
    const item = this.itemFor(r, stageIndex, now);
    ctx.currentStageIndex = stageIndex;
    ctx.updatedAt = now;
    const timing = timingOf(r, stageIndex);
    timing.queuedAt = timing.queuedAt || now;
    r.events.push({
      type: 'queued',
      reqId: ctx.reqId,
      stageIndex,
      stage: stage.name,
      pool: stage.pool,
      position: this.store.waiting(item.queue),
      at: now,
    });
    return item;
  }
}
