/**
 * The end of a request that has not ended: Cancel, a timeout or deadline, a task failed for
 * good, a stranded task. Its objects are deleted first (a cancelled or failed request's
 * objects are gone before its end is announced), then the end is written with the removal of
 * its queued task, as one compare-and-set.
 */
import { Code, DiffmeshError, codeName, type Logger, type ObjectRef } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import { poolOf, sameRefs } from './record-edits.js';
import { isTerminalStatus, itemId, type QueueEffects, type RequestRecord, type SchedulerStore } from './storage/types.js';
import type { RequestState } from './types.js';

/** How a request ends. */
export type Outcome = { type: 'failed'; error: DiffmeshError } | { type: 'cancelled' };

/** Hands the events a change wrote (from index `from`) to the scheduler's observer. */
export type ObserveEvents = (rec: RequestRecord, from: number) => void;

export interface RequestEndingOptions {
  store: SchedulerStore;
  tensors: TensorStore;
  log: Logger;
  /** How long a finished record stays readable. */
  retentionMs: number;
  observe: ObserveEvents;
}

export function notFound(reqId: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'REQUEST_NOT_FOUND', `request "${reqId}" not found`, { metadata: { field: 'req_id' } });
}

export class RequestEnding {
  constructor(private readonly opts: RequestEndingOptions) {}

  /** Cancels a request: its queued task goes, its running stage stops, its objects are deleted. */
  async cancel(reqId: string): Promise<RequestState> {
    const rec = await this.end(reqId, { type: 'cancelled' });
    if (!rec) throw notFound(reqId);
    return rec.state;
  }

  /**
   * Ends a request that has not ended: deletes its objects, then writes the end. Returns the
   * record as it ended (by this call or an earlier one); undefined when unknown.
   */
  async end(reqId: string, outcome: Outcome, effects: QueueEffects = {}): Promise<RequestRecord | undefined> {
    const { store } = this.opts;
    for (let tries = 0; ; tries += 1) {
      const seen = await store.read(reqId);
      if (!seen) return undefined;
      if (isTerminalStatus(seen.state.context.status)) {
        if (effects.ack) await store.apply({ ack: effects.ack });
        return seen;
      }
      await this.deleteObjects(reqId, [...Object.values(seen.state.context.refs), ...Object.values(seen.checkpoint ?? {})], true);
      let before = 0;
      const rec = await store.update(reqId, (r) => {
        if (isTerminalStatus(r.state.context.status)) return false;
        // New objects since the deletion (a stage finished meanwhile): delete those first.
        if (r.revision !== seen.revision && tries < 5 && sameRefs(r, seen) === false) return false;
        before = r.events.length;
        this.writeEnd(r, outcome);
        const stage = r.state.context.currentStageIndex;
        return { ...effects, remove: { pool: poolOf(r, stage), id: itemId(reqId, stage) } };
      });
      if (rec) {
        this.opts.observe(rec, before);
        return rec;
      }
    }
  }

  /** The end in a record being changed: status, error, retention and the last event. */
  private writeEnd(r: RequestRecord, outcome: Outcome): void {
    const ctx = r.state.context;
    const now = Date.now();
    ctx.updatedAt = now;
    r.expiresAt = now + this.opts.retentionMs;
    r.startedBy = undefined;
    if (outcome.type === 'cancelled') {
      ctx.status = 'cancelled';
      r.events.push({ type: 'cancelled', reqId: ctx.reqId, at: now });
      return;
    }
    const e = outcome.error;
    const error = { code: e.code, reason: e.reason, message: e.message, ...(e.field ? { field: e.field } : {}) };
    ctx.status = 'failed';
    ctx.error = { ...error, code: codeName(e.code) };
    r.events.push({ type: 'failed', reqId: ctx.reqId, error, at: now });
  }

  /**
   * Deletes a request's objects where they live (each ref names its owner). `wholeRequest`
   * also asks the store to drop anything else it holds for the request (objects a stage
   * stored before it was stopped); TTLs reap what no one knows about.
   */
  async deleteObjects(reqId: string, refs: ObjectRef[], wholeRequest: boolean): Promise<void> {
    const { tensors } = this.opts;
    const results = await Promise.allSettled([
      ...refs.map((r) => tensors.delete(r)),
      ...(wholeRequest ? [tensors.deleteRequest(reqId)] : []),
    ]);
    const failed = results.filter((r) => r.status === 'rejected');
    if (failed.length > 0) {
      this.opts.log.warn({ reqId, failed: failed.length, err: failed[0].reason }, 'could not delete some request objects');
    }
  }
}
