/**
 * Request records and queue items as a scheduler writes them, for tests of the stores and of
 * what reaches a store (the conformance suite, NATS permission tests): no test framework here.
 */
import type { RequestContext } from '@diffmesh/core';
import { itemId, type QueueItem, type RequestRecord } from './types.js';

/** A new request record for `reqId` (status pending, stage 0 of 3). */
export function newRecord(reqId: string, opts: { priority?: number; now?: number } = {}): RequestRecord {
  const now = opts.now ?? Date.now();
  const context: RequestContext = {
    reqId,
    model: 'm1',
    params: {
      prompt: 'a red circle',
      negativePrompt: '',
      width: 64,
      height: 64,
      numFrames: 1,
      numInferenceSteps: 4,
      guidanceScale: 1,
      seed: '18446744073709551615',
      fps: 8,
    },
    executionPlan: {
      model: 'm1',
      stages: [
        { name: 'text_encoding', pool: 'enc' },
        { name: 'denoising', pool: 'dit' },
        { name: 'vae_decoding', pool: 'vae' },
      ],
    },
    currentStageIndex: 0,
    refs: {},
    status: 'pending',
    createdAt: now,
    updatedAt: now,
    priority: opts.priority ?? 0,
    timeoutMs: 0,
    retryCount: 0,
    traceContext: {},
  };
  return {
    state: { context, planName: 'm1', step: 0, totalSteps: 0, timings: [], result: {} },
    events: [{ type: 'queued', reqId, stageIndex: 0, stage: 'text_encoding', pool: 'enc', position: 0, at: now }],
    revision: 0,
    gen: 1,
    attempt: 1,
    failures: 0,
    producers: {},
    reruns: 0,
    expiresAt: 0,
  };
}

/** A queue item of pool `pool`. */
export function newItem(reqId: string, opts: Partial<QueueItem> = {}): QueueItem {
  const stageIndex = opts.stageIndex ?? 0;
  const pool = opts.pool ?? 'enc';
  return {
    id: itemId(reqId, stageIndex),
    reqId,
    stageIndex,
    gen: 1,
    createdAt: 1,
    pool,
    queue: opts.range ? `${pool}@${opts.range}` : pool,
    model: 'm1',
    priority: 0,
    enqueuedAt: Date.now(),
    tenant: 'default',
    ...opts,
  };
}
