import { describe, expect, it } from 'vitest';
import { PlanRegistry, type StageResult, type StageTask } from '@diffmesh/runtime';
import { HeldInstance, entry, newScheduler, outcome } from './fixtures/stages.js';
import { TaskRefused, type ExecuteHooks } from './types.js';

/** Refuses its first task without running it, as an instance behind a breaker may. */
class RefusesOnce extends HeldInstance {
  refusals = 0;
  override execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    if (this.refusals === 0) {
      this.refusals += 1;
      return Promise.reject(new TaskRefused('breaker is half-open'));
    }
    return super.execute(task, hooks);
  }
}

describe('dispatch', () => {
  it('puts a task an instance refused back in its queue without using up a try', async () => {
    const s = newScheduler({ maxAttempts: 1 });
    const inst = new RefusesOnce('enc-1');
    s.addInstance(inst);
    const id = s.submit({ model: 'm1', params: { prompt: 'x' } }).context.reqId;
    await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(1);
    inst.finish(0);
    expect(await outcome(s, id)).toBe('completed');
    expect(inst.refusals).toBe(1);
    expect(s.get(id).timings[0].attempts).toBe(1);
    expect(s.get(id).context.retryCount).toBe(0);
  });

  it('takes the best task across a pool\'s queues: priority first, then arrival, pinned or not', async () => {
    const registry = PlanRegistry.fromEntries([entry({ model: 'm1' }), entry({ model: 'pinned' }, 'enc', '>=1.0.0')]);
    const s = newScheduler({}, { registry });
    const inst = new HeldInstance('enc-1');
    s.addInstance(inst);
    const submit = (model: string, prompt: string, priority = 0) => s.submit({ model, params: { prompt }, priority }).context.reqId;
    const ids = [submit('m1', 'a'), submit('m1', 'b'), submit('pinned', 'c'), submit('m1', 'd'), submit('pinned', 'e', 100)];
    for (let i = 0; i < ids.length; i += 1) {
      await expect.poll(() => inst.tasks.length, { timeout: 10_000 }).toBe(i + 1);
      inst.finish(i);
    }
    for (const id of ids) expect(await outcome(s, id)).toBe('completed');
    expect(inst.tasks.map((t) => t.params.prompt)).toEqual(['a', 'e', 'b', 'c', 'd']);
  });
});
