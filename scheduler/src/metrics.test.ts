import { describe, expect, it } from 'vitest';
import { PlanRegistry } from './plans/registry.js';
import { entry, gate, handler, log, newScheduler, outcome } from './fixtures/stages.js';
import { LocalInstance } from './local-instance.js';
import { SchedulerMetrics } from './metrics.js';

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
    const series = (name: string) => text.split('\n').filter((l) => l.startsWith(`${name}{`));
    expect(series('diffmesh_requests_submitted_total')).toEqual([
      'diffmesh_requests_submitted_total{model="pat/*"} 4',
      'diffmesh_requests_submitted_total{model="m1"} 1',
    ]);
    expect(series('diffmesh_requests_completed_total')).toEqual([
      'diffmesh_requests_completed_total{model="pat/*"} 3',
      'diffmesh_requests_completed_total{model="m1"} 1',
    ]);
    expect(series('diffmesh_requests_cancelled_total')).toEqual(['diffmesh_requests_cancelled_total{model="pat/*"} 1']);
    expect(text).not.toMatch(/model="pat\/[a-d]"/);
  });
});
