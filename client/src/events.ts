import type { RequestEvent__Output as WireRequestEventOutput } from '@diffmesh/protos';
import {
  Code,
  DiffmeshError,
  errorDetailFromWire,
  objectRefFromWire,
  objectRefsFromWire,
  stageNameFromWire,
  timestampFromWire,
  type RequestEvent,
} from '@diffmesh/core/client';

/** The domain event carried by a wire event (clients use it to follow a remote request). */
export function eventFromWire(e: WireRequestEventOutput): RequestEvent | undefined {
  const at = e.time ? timestampFromWire(e.time) : Date.now();
  const reqId = e.reqId;
  if (e.queued)
    return {
      type: 'queued',
      reqId,
      stageIndex: e.queued.stageIndex,
      // A scheduler from before QueuedEvent named its stage sends none: the first stage, as it then meant.
      stage: e.queued.stage && e.queued.stage !== 'STAGE_NAME_UNSPECIFIED' ? stageNameFromWire(e.queued.stage) : 'text_encoding',
      pool: e.queued.pool,
      position: e.queued.position,
      at,
    };
  if (e.stageStarted) {
    const s = e.stageStarted;
    return {
      type: 'stage_started',
      reqId,
      stageIndex: s.stageIndex,
      stage: stageNameFromWire(s.stage),
      pool: s.pool,
      instanceId: s.instanceId,
      attempt: s.attempt,
      at,
    };
  }
  if (e.stepProgress) {
    const p = e.stepProgress;
    return {
      type: 'progress',
      reqId,
      stageIndex: p.stageIndex,
      stage: stageNameFromWire(p.stage),
      step: p.step,
      totalSteps: p.totalSteps,
      at,
    };
  }
  if (e.stageFinished) {
    const t = e.stageFinished.timing;
    const started = t?.startedAt ? timestampFromWire(t.startedAt) : at;
    const queued = t?.enqueuedAt ? timestampFromWire(t.enqueuedAt) : started;
    const finished = t?.finishedAt ? timestampFromWire(t.finishedAt) : at;
    return {
      type: 'stage_finished',
      reqId,
      stageIndex: t?.stageIndex ?? 0,
      stage: stageNameFromWire(t?.stage),
      queueMs: started - queued,
      runMs: finished - started,
      outputs: objectRefsFromWire(e.stageFinished.outputs),
      ...(e.stageFinished.warnings?.length ? { warnings: [...e.stageFinished.warnings] } : {}),
      at,
    };
  }
  if (e.completed) {
    const outputs = Object.fromEntries(e.completed.results.map((r) => [r.name, objectRefFromWire(r)]));
    return { type: 'completed', reqId, outputs, at };
  }
  if (e.failed) {
    const err = e.failed.error ? errorDetailFromWire(e.failed.error) : new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'request failed');
    return {
      type: 'failed',
      reqId,
      error: { code: err.code, reason: err.reason, message: err.message, ...(err.field ? { field: err.field } : {}) },
      at,
    };
  }
  if (e.cancelled) return { type: 'cancelled', reqId, at };
  if (e.preview) {
    const p = e.preview;
    return {
      type: 'preview',
      reqId,
      stageIndex: p.stageIndex,
      stage: stageNameFromWire(p.stage),
      step: p.step,
      totalSteps: p.totalSteps,
      mediaType: p.mediaType,
      data: new Uint8Array(p.data),
      width: p.width,
      height: p.height,
      at,
    };
  }
  if (e.preempted) {
    const p = e.preempted;
    return {
      type: 'preempted',
      reqId,
      stageIndex: p.stageIndex,
      stage: stageNameFromWire(p.stage),
      pool: p.pool,
      instanceId: p.instanceId,
      attempt: p.attempt,
      step: p.step,
      totalSteps: p.totalSteps,
      reason: p.reason,
      at,
    };
  }
  return undefined;
}
