/**
 * A request's lifecycle over the storage port, in parts along its state machine:
 * {@link Admission} (validated and accepted, or refused), {@link RequestWatchers} (its events
 * to those who follow it), {@link TaskTransitions} (what its tasks' tries report: started,
 * progress, each way a try ends), {@link Deadlines} (its timeout and deadline) and
 * {@link RequestEnding} (cancelled, failed or timed out; its objects deleted). This module
 * wires them over one store and follows the store's changes for them.
 */
import type { DiffmeshError, Logger, RequestEvent } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import { Admission } from './admission.js';
import { Deadlines, expiredError, pastDeadline } from './deadlines.js';
import type { InstanceSlots } from './instances.js';
import type { SchedulerLimits } from './limits.js';
import { LocalRequests } from './local-requests.js';
import type { PlanRegistry } from './plans/registry.js';
import { notFound, RequestEnding } from './request-end.js';
import { RequestWatchers } from './request-watchers.js';
import type { RecentRequests } from './retention.js';
import { isTerminalStatus, type QueueItem, type RecordChange, type RequestRecord, type SchedulerStore } from './storage/types.js';
import type { TaskCosts } from './task-cost.js';
import { TaskItems } from './task-items.js';
import { TaskTransitions } from './task-transitions.js';
import type { TenantQuotas } from './tenant-quotas.js';
import type { TransitionCounts } from './transition-counts.js';
import type { RequestState } from './types.js';

export interface LifecycleOptions {
  store: SchedulerStore;
  registry: PlanRegistry;
  tensors: TensorStore;
  log: Logger;
  limits: SchedulerLimits;
  instances: InstanceSlots;
  recent: RecentRequests;
  /** Sees every event this scheduler writes (metrics, audit); must not throw. */
  onEvent?: (event: RequestEvent, state: RequestState) => void;
  /** A task was queued by this scheduler (stranded-task checks, preemption). */
  onEnqueued?: (item: QueueItem) => void;
  /** A request was refused at admission (metrics); must not throw. */
  onRefused?: (tenant: string, error: DiffmeshError) => void;
  /** Task cost estimates (fair share and quotas). */
  costs: TaskCosts;
  /** Tenant limits at admission. */
  quotas: TenantQuotas;
  /** Where the tasks' and tries' moves are counted. */
  counts: TransitionCounts;
}

/**
 * Every change is a compare-and-set on the request's record, so any scheduler sharing the
 * store may make it, and a transition that lost a race sees the winner's record and does
 * nothing.
 */
export class RequestLifecycle {
  readonly admission: Admission;
  readonly watchers: RequestWatchers;
  readonly transitions: TaskTransitions;
  readonly deadlines: Deadlines;
  readonly ending: RequestEnding;
  /** The requests accepted here and not yet ended (their spans and timers). */
  readonly local: LocalRequests;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly opts: LifecycleOptions) {
    const { store, log, limits } = opts;
    const observe = (rec: RequestRecord, from: number): void => this.observe(rec, from);
    const end = this.end.bind(this);
    this.ending = new RequestEnding({ store, tensors: opts.tensors, log, retentionMs: limits.retentionMs, observe });
    this.deadlines = new Deadlines({ limits, costs: opts.costs, end });
    this.local = new LocalRequests(store, opts.quotas, opts.recent);
    const items = new TaskItems(store, opts.costs);
    const onEnqueued = opts.onEnqueued;
    this.admission = new Admission({
      ...opts,
      local: this.local,
      deadlines: this.deadlines,
      items,
      observe,
      end,
      ...(onEnqueued ? { onEnqueued } : {}),
    });
    this.watchers = new RequestWatchers(
      store,
      (reqId) => this.record(reqId),
      (rec) => !isTerminalStatus(rec.state.context.status) && pastDeadline(rec),
    );
    this.transitions = new TaskTransitions({
      store,
      tensors: opts.tensors,
      log,
      limits,
      items,
      ending: this.ending,
      observe,
      counts: opts.counts,
      ...(onEnqueued ? { onEnqueued } : {}),
    });
  }

  start(): void {
    this.unsubscribe ??= this.opts.store.onChange((c) => this.changed(c));
  }

  /** Stops following the store; ends the spans and timers of local requests. */
  stop(): void {
    this.admission.stopIntake();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.local.stop();
  }

  /** The record of a request; NOT_FOUND when unknown or forgotten. A request past its deadline is failed first. */
  async record(reqId: string): Promise<RequestRecord> {
    let rec = await this.opts.store.read(reqId);
    if (!rec) throw notFound(reqId);
    if (!isTerminalStatus(rec.state.context.status) && pastDeadline(rec)) {
      rec = (await this.end(reqId, { type: 'failed', error: expiredError(rec) }).catch(() => rec)) ?? rec;
    }
    return rec;
  }

  /** Ends a request that has not ended (see {@link RequestEnding.end}). */
  end(...args: Parameters<RequestEnding['end']>): ReturnType<RequestEnding['end']> {
    return this.ending.end(...args);
  }

  private changed(c: RecordChange): void {
    this.watchers.changed(c);
    if (c.record) {
      this.opts.recent.update(c.record);
      this.opts.quotas.moved(c.reqId, c.record.state.context.currentStageIndex);
    }
    if (c.terminal) this.local.ended(c.reqId, c.record);
  }

  /** Hands the events this scheduler wrote to the observer. */
  private observe(rec: RequestRecord, from: number): void {
    const onEvent = this.opts.onEvent;
    if (!onEvent) return;
    for (let i = from; i < rec.events.length; i += 1) {
      try {
        onEvent(rec.events[i], rec.state);
      } catch (err) {
        this.opts.log.warn({ err }, 'event observer failed');
      }
    }
  }
}
