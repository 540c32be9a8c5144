import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Scheduler } from './scheduler.js';
import type { DiffmeshError, RequestEvent } from '@diffmesh/core';
import type { RequestState } from './types.js';
import { DEFAULT_TENANT } from './fair-share.js';
import { TASK_STATES } from './task-end.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** Distinct tenant labels kept when the tenants are not listed; the rest are `other`. */
const MAX_TENANT_LABELS = 32;

/** Options of {@link SchedulerMetrics}. */
export interface SchedulerMetricsOptions {
  /**
   * True for the tenants of the tenants config: the `tenant` label takes these (and `default`),
   * any other tenant is `other`. Without it the first 32 tenants seen get their own label.
   */
  isTenant?: (tenant: string) => boolean;
}

/**
 * The scheduler's Prometheus metrics. Counters and histograms follow request events;
 * gauges (queue depth, worker slots, breakers) are read from the scheduler when scraped.
 */
export class SchedulerMetrics {
  readonly registry = new Registry();
  private readonly submitted: Counter<'model'>;
  private readonly completed: Counter<'model'>;
  private readonly failed: Counter<'model' | 'reason'>;
  private readonly cancelled: Counter<'model'>;
  private readonly requestLatency: Histogram<'model'>;
  private readonly stageLatency: Histogram<'stage' | 'pool'>;
  private readonly queueWait: Histogram<'pool' | 'tenant'>;
  private readonly refusals: Counter<'tenant' | 'reason'>;
  private readonly preemptions: Counter<'pool'>;
  private readonly adapterDispatches: Counter<'pool' | 'held'>;
  /** Tenants seen that have their own label (without `isTenant`), bounded. */
  private readonly tenantLabels = new Set<string>([DEFAULT_TENANT]);
  private readonly isTenant: ((tenant: string) => boolean) | undefined;

  constructor(scheduler: Scheduler, opts: SchedulerMetricsOptions = {}) {
    this.isTenant = opts.isTenant;
    const r = this.registry;
    collectDefaultMetrics({ register: r, prefix: 'diffmesh_scheduler_' });
    this.submitted = new Counter({
      name: 'diffmesh_requests_submitted_total',
      help: 'Requests accepted',
      labelNames: ['model'],
      registers: [r],
    });
    this.completed = new Counter({
      name: 'diffmesh_requests_completed_total',
      help: 'Requests completed',
      labelNames: ['model'],
      registers: [r],
    });
    this.failed = new Counter({
      name: 'diffmesh_requests_failed_total',
      help: 'Requests failed',
      labelNames: ['model', 'reason'],
      registers: [r],
    });
    this.preemptions = new Counter({
      name: 'diffmesh_scheduler_preemptions_total',
      help: 'Running tasks that gave their slot to a more urgent task at a step boundary',
      labelNames: ['pool'],
      registers: [r],
    });
    this.cancelled = new Counter({
      name: 'diffmesh_requests_cancelled_total',
      help: 'Requests cancelled',
      labelNames: ['model'],
      registers: [r],
    });
    this.requestLatency = new Histogram({
      name: 'diffmesh_request_latency_seconds',
      help: 'Accepted to completed',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers: [r],
    });
    this.stageLatency = new Histogram({
      name: 'diffmesh_stage_latency_seconds',
      help: 'Stage run time on an instance',
      labelNames: ['stage', 'pool'],
      buckets: LATENCY_BUCKETS,
      registers: [r],
    });
    this.queueWait = new Histogram({
      name: 'diffmesh_queue_wait_seconds',
      help: 'Time a stage task waited in its pool queue',
      labelNames: ['pool', 'tenant'],
      buckets: LATENCY_BUCKETS,
      registers: [r],
    });
    this.refusals = new Counter({
      name: 'diffmesh_admissions_refused_total',
      help: 'Requests refused at admission, by tenant and reason (TENANT_QUOTA, QUEUE_FULL, …)',
      labelNames: ['tenant', 'reason'],
      registers: [r],
    });
    this.adapterDispatches = new Counter({
      name: 'diffmesh_scheduler_adapter_dispatches_total',
      help: 'Tasks with LoRA adapters sent to an instance that held them all (held="true") or had to load one (held="false")',
      labelNames: ['pool', 'held'],
      registers: [r],
    });
    serveGauges(r, scheduler);
  }

  /** Scheduler `onAdapterDispatch` hook. */
  adapterDispatch(pool: string, held: boolean): void {
    const h = held ? 'true' : 'false';
    this.series(this.adapterDispatches, `${pool}\u0000${h}`, { pool, held: h }).inc();
  }

  /**
   * The series of `metric` for `labels`, bound once per distinct `key` (a labelled call
   * hashes its labels every time; this runs several times per request).
   */
  private series<T extends { labels(l: Record<string, string>): unknown }>(
    metric: T,
    key: string,
    labels: Record<string, string>,
  ): ReturnType<T['labels']> {
    type C = ReturnType<T['labels']>;
    let byKey = this.bound.get(metric);
    if (!byKey) {
      byKey = new Map();
      this.bound.set(metric, byKey);
    }
    let child = byKey.get(key) as C | undefined;
    if (!child) {
      // Bounded by the label values that exist: models, stages and pools.
      child = metric.labels(labels) as C;
      byKey.set(key, child);
    }
    return child;
  }

  private readonly bound = new Map<object, Map<string, unknown>>();
  /** The `tenant` label of a tenant: bounded by the tenants config (see {@link SchedulerMetricsOptions.isTenant}). */
  private tenantLabel(tenant: string | undefined): string {
    const t = tenant || DEFAULT_TENANT;
    if (this.isTenant) return t === DEFAULT_TENANT || this.isTenant(t) ? t : 'other';
    if (this.tenantLabels.has(t)) return t;
    if (this.tenantLabels.size >= MAX_TENANT_LABELS) return 'other';
    this.tenantLabels.add(t);
    return t;
  }

  /** Scheduler `onRefused` hook. */
  refused(tenant: string, error: DiffmeshError): void {
    const label = this.tenantLabel(tenant);
    this.series(this.refusals, `${label}\u0000${error.reason}`, { tenant: label, reason: error.reason }).inc();
  }

  /** Serves `diffmesh_scheduler_sessions`, the open Session streams, read from `count` when scraped. */
  countSessions(count: () => number): void {
    new Gauge({
      name: 'diffmesh_scheduler_sessions',
      help: 'Open Session streams (clients sending many requests on one stream)',
      registers: [this.registry],
      collect() {
        this.set(count());
      },
    });
  }

  /** Scheduler `onEvent` hook. */
  observe(e: RequestEvent, state: RequestState): void {
    // The plan entry, not the client's model name: a pattern accepts any number of names.
    const model = state.planName;
    switch (e.type) {
      case 'queued':
        if (e.stageIndex === 0 && state.timings.every((t) => t.attempts === 0)) this.series(this.submitted, model, { model }).inc();
        return;
      case 'stage_finished': {
        const pool = state.context.executionPlan.stages[e.stageIndex]?.pool ?? '';
        this.series(this.stageLatency, `${e.stage}\u0000${pool}`, { stage: e.stage, pool }).observe(e.runMs / 1000);
        const tenant = this.tenantLabel(state.context.tenant);
        this.series(this.queueWait, `${pool}\u0000${tenant}`, { pool, tenant }).observe(e.queueMs / 1000);
        return;
      }
      case 'completed':
        this.series(this.completed, model, { model }).inc();
        this.series(this.requestLatency, model, { model }).observe((e.at - state.context.createdAt) / 1000);
        return;
      case 'failed':
        this.failed.inc({ model, reason: e.error.reason });
        return;
      case 'cancelled':
        this.cancelled.inc({ model });
        return;
      case 'preempted':
        this.preemptions.inc({ pool: e.pool });
        return;
      default:
    }
  }
}

/** The gauges read from the scheduler when scraped: queue depth, worker slots, breakers, and the state machines' moves. */
function serveGauges(r: Registry, scheduler: Scheduler): void {
  new Gauge({
    name: 'diffmesh_queue_size',
    help: 'Tasks waiting per pool',
    labelNames: ['pool'],
    registers: [r],
    async collect() {
      const sizes = await scheduler.queueSizes();
      this.reset();
      for (const [pool, n] of Object.entries(sizes)) this.set({ pool }, n);
    },
  });
  const slots = (kind: 'active' | 'idle') =>
    new Gauge({
      name: `diffmesh_worker_${kind}`,
      help: kind === 'active' ? 'Busy task slots per pool' : 'Free task slots per pool',
      labelNames: ['pool'],
      registers: [r],
      collect() {
        this.reset();
        const byPool = new Map<string, number>();
        for (const { instance, active } of scheduler.instances()) {
          const v = kind === 'active' ? active : Math.max(0, instance.capacity - active);
          byPool.set(instance.pool, (byPool.get(instance.pool) ?? 0) + v);
        }
        for (const [pool, v] of byPool) this.set({ pool }, v);
      },
    });
  slots('active');
  slots('idle');
  new Gauge({
    name: 'diffmesh_breaker_state',
    help: 'Circuit breaker per stage instance: 0 closed, 1 half-open, 2 open',
    labelNames: ['instance_id', 'pool'],
    registers: [r],
    collect() {
      this.reset();
      for (const { instance } of scheduler.instances()) {
        const state = (instance as { breakerState?: () => string }).breakerState?.();
        if (!state) continue;
        this.set({ instance_id: instance.id, pool: instance.pool }, state === 'open' ? 2 : state === 'half-open' ? 1 : 0);
      }
    },
  });
  new Counter({
    name: 'diffmesh_scheduler_transitions_total',
    help: `Moves of a stage task (machine="task": ${TASK_STATES.join(', ')}) and of a try on this scheduler (machine="try": starting, running, stopping(why), answered, done)`,
    labelNames: ['machine', 'from', 'to'],
    registers: [r],
    collect() {
      this.reset();
      for (const { machine, from, to, count } of scheduler.transitionCounts()) this.inc({ machine, from, to }, count);
    },
  });
}
