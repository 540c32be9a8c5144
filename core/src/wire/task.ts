import type { Task, Task__Output } from '@diffmesh/protos';
import { Code, DiffmeshError } from '../errors/index.js';
import type { StageTask } from '../stage-task.js';
import {
  objectRefsFromWire,
  objectRefsToWire,
  paramsFromWire,
  paramsToWire,
  stageNameFromWire,
  stageNameToWire,
  timestampFromWire,
  timestampToWire,
} from './convert.js';

/** A stage task as the Work stream and Execute carry it. */
export function taskToWire(t: StageTask): Task {
  return {
    reqId: t.reqId,
    stageIndex: t.stageIndex,
    stage: stageNameToWire(t.stage),
    attempt: t.attempt,
    model: t.model,
    params: paramsToWire(t.params),
    inputs: objectRefsToWire(t.inputs),
    ...(t.deadline > 0 ? { deadline: timestampToWire(t.deadline) } : {}),
    traceContext: t.traceContext,
    ...(t.lastStage ? { lastStage: true } : {}),
    ...(t.tenant ? { tenant: t.tenant } : {}),
  };
}

/** The stage task of a wire Task; a missing task is INVALID_ARGUMENT naming `task`. */
export function taskFromWire(t: Task__Output | null | undefined): StageTask {
  if (!t) throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'task: is required', { metadata: { field: 'task' } });
  return {
    reqId: t.reqId,
    stageIndex: t.stageIndex,
    stage: stageNameFromWire(t.stage),
    attempt: t.attempt,
    model: t.model,
    params: paramsFromWire(t.params),
    inputs: objectRefsFromWire(t.inputs),
    deadline: t.deadline ? timestampFromWire(t.deadline) : 0,
    traceContext: { ...t.traceContext },
    ...(t.lastStage ? { lastStage: true } : {}),
    ...(t.tenant ? { tenant: t.tenant } : {}),
  };
}
