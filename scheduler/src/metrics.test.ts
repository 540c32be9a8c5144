import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '@diffmesh/core';
import { PlanRegistry } from './plans/registry.js';
import { entry, gate, handler, log, newScheduler, outcome } from './fixtures/stages.js';
import { LocalInstance } from './local-instance.js';
import { SchedulerMetrics } from './metrics.js';

/** The labelled series of metric `name` in Prometheus text. */
const series = (text: string, name: string): string[] => text.split('\n').filter((l) => l.startsWith(`${name}{`));

describe('SchedulerMetrics', async () => {
  it('labels requests with their plan entry (the pattern), not each model name the pattern accepts', async () => {
    const registry = PlanRegistry.fromEntries([entry({ model: 'm1' }), entry({ pattern: 'pat/*' })]);
    let metrics: SchedulerMetrics | undefined;
    const s = newScheduler({ maxAttempts: 1 }, { registry, onEvent: (e, state) => metrics?.observe(e, state) });
    metrics = new SchedulerMetrics(s);
    const held = gate();
    const run = handler(async (task) => {
      if (task.params.prompt === 'hold') await held.wait;
      return { outputs: {} };
    });
    s.addInstance(new LocalInstance('enc-1', 'enc', run, 4, log));
    const ids: string[] = [];
    for (const model of ['pat/a', 'pat/b', 'pat/c', 'm1']) ids.push((await s.submit({ model, params: { prompt: 'x' } })).context.reqId);
    for (const id of ids) expect(await outcome(s, id)).toBe('completed');
    const cancelled = (await s.submit({ model: 'pat/d', params: { prompt: 'hold' } })).context.reqId;
    await s.cancel(cancelled);
    expect(await outcome(s, cancelled)).toBe('cancelled');
    held.release();

    const text = await metrics.registry.metrics();
    expect(series(text, 'diffmesh_requests_submitted_total')).toEqual([
      'diffmesh_requests_submitted_total{model="pat/*"} 4',
      'diffmesh_requests_submitted_total{model="m1"} 1',
    ]);
    expect(series(text, 'diffmesh_requests_completed_total')).toEqual([
      'diffmesh_requests_completed_total{model="pat/*"} 3',
      'diffmesh_requests_completed_total{model="m1"} 1',
    ]);
    expect(series(text, 'diffmesh_requests_cancelled_total')).toEqual(['diffmesh_requests_cancelled_total{model="pat/*"} 1']);
    expect(text).not.toMatch(/model="pat\/[a-d]"/);
  });
});

describe('SchedulerMetrics: tenants', async () => {
  it('labels queue waits and refusals with the tenant, tenants outside the tenants config as other', async () => {
    let metrics: SchedulerMetrics | undefined;
    const s = newScheduler(
      {},
      {
        tenants: { weight: () => 1, limits: (t) => (t === 'acme' ? { requestsPerMinute: 1 } : {}) },
        onEvent: (e, state) => metrics?.observe(e, state),
        onRefused: (tenant, err) => metrics?.refused(tenant, err),
      },
    );
    metrics = new SchedulerMetrics(s, { isTenant: (t) => t === 'acme' });
    s.addInstance(
      new LocalInstance(
        'enc-1',
        'enc',
        handler(async () => ({ outputs: {} })),
        4,
        log,
      ),
    );
    for (const tenant of ['acme', 'stranger']) {
      expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'x' }, tenant })).context.reqId)).toBe('completed');
    }
    await expect(s.submit({ model: 'm1', params: { prompt: 'x' }, tenant: 'acme' })).rejects.toMatchObject({ reason: 'TENANT_QUOTA' });

    const text = await metrics.registry.metrics();
    expect(series(text, 'diffmesh_queue_wait_seconds_count')).toEqual([
      'diffmesh_queue_wait_seconds_count{pool="enc",tenant="acme"} 1',
      'diffmesh_queue_wait_seconds_count{pool="enc",tenant="other"} 1',
    ]);
    expect(series(text, 'diffmesh_admissions_refused_total')).toEqual([
      'diffmesh_admissions_refused_total{tenant="acme",reason="TENANT_QUOTA"} 1',
    ]);
    expect(text).not.toMatch(/stranger/);
  });
});

describe('SchedulerMetrics: transitions', async () => {
  it('counts the moves of tasks and tries: a retried try and a cancelled one', async () => {
    const s = newScheduler({ maxAttempts: 3, retryBackoffMs: 1 });
    const metrics = new SchedulerMetrics(s);
    const held = gate();
    let calls = 0;
    const run = handler(async (task, hooks) => {
      calls += 1;
      if (calls === 1) throw new DiffmeshError(Code.UNAVAILABLE, 'STAGE_FAILED', 'flaky');
      if (task.params.prompt === 'hold') {
        await Promise.race([held.wait, new Promise((resolve) => hooks.signal.addEventListener('abort', resolve))]);
        throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'stopped');
      }
      return { outputs: {} };
    });
    s.addInstance(new LocalInstance('enc-1', 'enc', run, 1, log));
    expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId)).toBe('completed');
    const cancelled = (await s.submit({ model: 'm1', params: { prompt: 'hold' } })).context.reqId;
    while (calls < 3) await new Promise((r) => setTimeout(r, 5));
    await s.cancel(cancelled);
    expect(await outcome(s, cancelled)).toBe('cancelled');
    held.release();
    while (s.runningTasks() > 0) await new Promise((r) => setTimeout(r, 5));

    const text = await metrics.registry.metrics();
    expect(series(text, 'diffmesh_scheduler_transitions_total').sort()).toEqual(
      [
        // The failed try goes back to its queue, the next one completes; the cancelled request's task is dropped.
        'diffmesh_scheduler_transitions_total{machine="task",from="leased",to="running"} 3',
        'diffmesh_scheduler_transitions_total{machine="task",from="running",to="queued"} 1',
        'diffmesh_scheduler_transitions_total{machine="task",from="running",to="done"} 1',
        'diffmesh_scheduler_transitions_total{machine="task",from="running",to="dropped"} 1',
        'diffmesh_scheduler_transitions_total{machine="try",from="starting",to="running"} 3',
        'diffmesh_scheduler_transitions_total{machine="try",from="running",to="answered"} 2',
        'diffmesh_scheduler_transitions_total{machine="try",from="running",to="stopping(request-ended)"} 1',
        'diffmesh_scheduler_transitions_total{machine="try",from="stopping(request-ended)",to="answered"} 1',
        'diffmesh_scheduler_transitions_total{machine="try",from="answered",to="done"} 3',
      ].sort(),
    );
  });
});
