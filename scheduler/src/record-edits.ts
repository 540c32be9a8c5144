/**
 * Reading and editing a request record inside a change (`SchedulerStore.update`): the small
 * steps every transition shares (is this task still the request's current one, the stage's
 * timing, a progress event, a checkpoint kept). Pure: no I/O, no state of their own.
 */
import type { ObjectRef, StageName } from '@diffmesh/core';
import { isTerminalStatus, type QueueItem, type RequestRecord } from './storage/types.js';
import type { StageTiming } from './types.js';

/** True when `item` is the request's current task and the request has not ended. */
export function current(r: RequestRecord, item: Pick<QueueItem, 'stageIndex' | 'gen'>): boolean {
  return !isTerminalStatus(r.state.context.status) && r.state.context.currentStageIndex === item.stageIndex && r.gen === item.gen;
}

/** True when both records hold the same objects (by id). */
export function sameRefs(a: RequestRecord, b: RequestRecord): boolean {
  const ka = Object.values(a.state.context.refs)
    .map((r) => r.objectId)
    .sort();
  const kb = Object.values(b.state.context.refs)
    .map((r) => r.objectId)
    .sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i]);
}

/**
 * Keeps a try's checkpoint objects on the record: the latest of each name is kept, and the
 * older ones it replaces are returned (to be deleted once the change is written).
 */
export function keepCheckpoint(r: RequestRecord, checkpoint: Record<string, ObjectRef>): ObjectRef[] {
  const replaced: ObjectRef[] = [];
  for (const [name, ref] of Object.entries(checkpoint)) {
    const old = r.checkpoint?.[name];
    if (old && old.objectId !== ref.objectId) replaced.push(old);
  }
  r.checkpoint = { ...r.checkpoint, ...checkpoint };
  return replaced;
}

/** Records a progress event of stage `stageIndex` in a record being changed. */
export function pushProgress(r: RequestRecord, stageIndex: number, step: number, totalSteps: number): void {
  r.state.step = step;
  r.state.totalSteps = totalSteps;
  r.events.push({
    type: 'progress',
    reqId: r.state.context.reqId,
    stageIndex,
    stage: stageOf(r, stageIndex),
    step,
    totalSteps,
    at: Date.now(),
  });
}

export function stageOf(r: RequestRecord, stageIndex: number): StageName {
  return r.state.context.executionPlan.stages[stageIndex].name;
}

export function poolOf(r: RequestRecord, stageIndex: number): string {
  return r.state.context.executionPlan.stages[stageIndex]?.pool ?? '';
}

/** The timing of stage `stageIndex`, added when the stage has none yet. */
export function timingOf(r: RequestRecord, stageIndex: number): StageTiming {
  let t = r.state.timings.find((x) => x.stageIndex === stageIndex);
  if (!t) {
    const stage = r.state.context.executionPlan.stages[stageIndex];
    t = { stageIndex, stage: stage.name, pool: stage.pool, instanceId: '', attempts: 0, queuedAt: 0, startedAt: 0, finishedAt: 0 };
    r.state.timings.push(t);
  }
  return t;
}

/** A new task of the request (its next stage, or a stage re-run): its tries are counted from none. */
export function newTask(r: RequestRecord): void {
  r.attempt = 1;
  r.failures = 0;
  r.lostTries = 0;
}
