/** Worker failure recovery: lost instances and lost inputs. */
import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError, silentLogger, type StageHandler, type StageResult, type StageTask } from '@diffmesh/core';
import { createTensorStore } from '@diffmesh/tensor-client';
import { HeldInstance, end, newScheduler, outcome } from './fixtures/stages.js';
import { LocalInstance } from './local-instance.js';
import { PlanRegistry } from './plans/registry.js';
import { Scheduler } from './scheduler.js';
import type { ExecuteHooks } from './types.js';

/** An instance whose first task is lost with it (its stream broke), as a SIGKILLed worker's is. */
class DiesOnce extends HeldInstance {
  private dead = false;
  override execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    if (!this.dead) {
      this.dead = true;
      return Promise.reject(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `instance ${this.id}: dispatch stream ended`));
    }
    return super.execute(task, hooks);
  }
  isGone(): boolean {
    return this.dead;
  }
  available(): boolean {
    return !this.dead;
  }
}

/** An instance that drains while running its first task: it gives the task back, as a stage service whose grace ran out does. */
class DrainsOnce extends HeldInstance {
  private drained = false;
  override execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    if (!this.drained) {
      this.drained = true;
      return Promise.reject(
        new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `instance ${this.id} is shutting down; the task goes back to its queue`),
      );
    }
    return super.execute(task, hooks);
  }
}

/**
 * An instance that answers the tries of its task by a script: hand the task back (it drains),
 * lose it with its stream, fail it (retryable), then run it.
 */
class Scripted extends HeldInstance {
  private gone = false;
  constructor(
    id: string,
    private readonly script: Array<'hand-back' | 'lose' | 'fail'>,
  ) {
    super(id);
  }
  override execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    this.gone = false;
    const next = this.script.shift();
    if (next === 'hand-back') {
      return Promise.reject(new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `instance ${this.id} is shutting down`));
    }
    if (next === 'lose') {
      // Gone only for the scheduler's look at this try (a replacement under the same id, as it were).
      this.gone = true;
      return Promise.reject(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `instance ${this.id}: dispatch stream ended`));
    }
    if (next === 'fail') return Promise.reject(new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'STAGE_FAILED', 'out of memory'));
    return super.execute(task, hooks);
  }
  isGone(): boolean {
    return this.gone;
  }
}

describe('worker failure recovery', () => {
  it('gives a task handed back many times its full budget of lost and failed tries', async () => {
    // 12 hand-backs (more than the 10 lost tries a stage may have), then 10 lost tries and 1
    // failed try (maxAttempts 2): hand-backs use up neither budget, so the request completes.
    const script = [...Array<'hand-back'>(12).fill('hand-back'), ...Array<'lose'>(10).fill('lose'), 'fail' as const];
    const s = newScheduler({ maxAttempts: 2, retryBackoffMs: 1 });
    const instance = new Scripted('enc-scripted', script);
    s.addInstance(instance);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => instance.tasks.length, { timeout: 5000 }).toBe(1);
    expect(instance.tasks[0].attempt).toBe(1 + 12 + 10 + 1);
    instance.finish(0);
    expect(await outcome(s, id)).toBe('completed');
    const started = [];
    for await (const e of s.watch(id)) if (e.type === 'stage_started') started.push(e.attempt);
    expect(started).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
  });

  it('fails the request at the 11th try lost with its instance, however many hand-backs came before', async () => {
    const script = [...Array<'hand-back'>(3).fill('hand-back'), ...Array<'lose'>(11).fill('lose')];
    const s = newScheduler({ maxAttempts: 2, retryBackoffMs: 1 });
    const instance = new Scripted('enc-scripted', script);
    s.addInstance(instance);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    expect(await outcome(s, id)).toBe('TRANSPORT');
    expect(instance.tasks).toHaveLength(0);
  });

  it('puts a task a draining instance gave back in its queue at once, as the next try, without using up a try', async () => {
    const s = newScheduler({ maxAttempts: 1, retryBackoffMs: 60_000 });
    const draining = new DrainsOnce('enc-draining');
    s.addInstance(draining);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => draining.tasks.length, { timeout: 5000 }).toBe(1);
    expect(draining.tasks[0].attempt).toBe(2);
    draining.finish(0);
    expect(await outcome(s, id)).toBe('completed');
    const history: string[] = [];
    for await (const e of s.watch(id)) history.push(e.type === 'stage_started' ? `started ${e.attempt}` : e.type);
    expect(history).toEqual(['queued', 'started 1', 'queued', 'started 2', 'stage_finished', 'completed']);
    expect((await s.get(id)).context.retryCount).toBe(0);
  });

  it('puts the task of an instance that died back in its queue at once, without using up a try', async () => {
    const s = newScheduler({ maxAttempts: 1, retryBackoffMs: 60_000 });
    const dying = new DiesOnce('enc-dying');
    s.addInstance(dying);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => s.instances('enc').length).toBe(1);
    s.removeInstance('enc-dying');
    const healthy = new HeldInstance('enc-2');
    s.addInstance(healthy);
    await expect.poll(() => healthy.tasks.length, { timeout: 5000 }).toBe(1);
    expect(healthy.tasks[0].attempt).toBe(2);
    healthy.finish(0);
    expect(await outcome(s, id)).toBe('completed');
    expect((await s.get(id)).context.retryCount).toBe(1);
  });

  it('re-runs the stage that made an input lost with its node, instead of failing the request', async () => {
    const store = createTensorStore({ backend: 'memory' });
    const registry = PlanRegistry.fromEntries([
      {
        model: 'm1',
        modalities: ['text-to-image'],
        stages: [
          { name: 'text_encoding', pool: 'enc' },
          { name: 'denoising', pool: 'dit' },
        ],
        defaults: { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 },
        constraints: { sizeMultiple: 8, maxWidth: 512, maxHeight: 512, maxFrames: 1 },
      },
    ]);
    const s = new Scheduler({
      registry,
      store,
      log: silentLogger(),
      limits: {
        maxQueueLength: 10,
        maxInFlight: 10,
        maxAttempts: 1,
        retryBackoffMs: 1,
        defaultTimeoutMs: 0,
        stageTimeoutMs: 0,
        retentionMs: 60_000,
      },
    });
    let encodings = 0;
    const encoder: StageHandler = {
      stage: 'text_encoding',
      models: () => [],
      async execute(task) {
        encodings += 1;
        const ref = await store.put({
          requestId: task.reqId,
          name: 'prompt_embeds',
          data: new Uint8Array([encodings]),
          shape: [1],
          dtype: 'uint8',
        });
        return { outputs: { prompt_embeds: ref } };
      },
    };
    let denoisings = 0;
    const denoiser: StageHandler = {
      stage: 'denoising',
      models: () => [],
      async execute(task) {
        denoisings += 1;
        // The first time, the node holding the embeddings is gone with them.
        if (denoisings === 1) await store.delete(task.inputs.prompt_embeds);
        const { data } = await store.get(task.inputs.prompt_embeds);
        const ref = await store.put({ requestId: task.reqId, name: 'latents', data: new Uint8Array(data), shape: [1], dtype: 'uint8' });
        return { outputs: { latents: ref } };
      },
    };
    s.addInstance(new LocalInstance('enc-1', 'enc', encoder, 1, silentLogger()));
    s.addInstance(new LocalInstance('dit-1', 'dit', denoiser, 1, silentLogger()));
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    const last = await end(s, id);
    expect(last.type).toBe('completed');
    expect(encodings).toBe(2);
    expect(denoisings).toBe(2);
    // The result was made from the re-run's embeddings.
    const { data } = await store.get((await s.get(id)).result.latents);
    expect([...data]).toEqual([2]);
    const kinds: string[] = [];
    for await (const e of s.watch(id)) if (e.type === 'queued') kinds.push(`${e.type}:${e.stageIndex}`);
    expect(kinds).toEqual(['queued:0', 'queued:1', 'queued:0', 'queued:1']);
  });

  it("hands a stage the checkpoint an earlier try kept, as the next try's input, and deletes it when the stage is done", async () => {
    const store = createTensorStore({ backend: 'memory' });
    const registry = PlanRegistry.fromEntries([
      {
        model: 'm1',
        modalities: ['text-to-image'],
        stages: [{ name: 'denoising', pool: 'dit' }],
        defaults: { width: 64, height: 64, numFrames: 1, steps: 4, guidanceScale: 1, fps: 8 },
        constraints: { sizeMultiple: 8, maxWidth: 512, maxHeight: 512, maxFrames: 1 },
      },
    ]);
    const s = new Scheduler({
      registry,
      store,
      log: silentLogger(),
      limits: {
        maxQueueLength: 10,
        maxInFlight: 10,
        maxAttempts: 3,
        retryBackoffMs: 1,
        defaultTimeoutMs: 0,
        stageTimeoutMs: 0,
        retentionMs: 60_000,
      },
    });
    const startedAt: number[] = [];
    let checkpointId = '';
    const denoiser: StageHandler = {
      stage: 'denoising',
      models: () => [],
      async execute(task, ctx) {
        // Resume after the step the checkpoint holds (its one byte), else from the start.
        const from = task.inputs.checkpoint ? (await store.get(task.inputs.checkpoint)).data[0] : 0;
        startedAt.push(from);
        for (let step = from + 1; step <= 4; step += 1) {
          if (step === 3 && task.attempt === 1) {
            const ref = await store.put({
              requestId: task.reqId,
              name: 'checkpoint',
              data: new Uint8Array([2]),
              shape: [1],
              dtype: 'uint8',
            });
            checkpointId = ref.objectId;
            ctx.onProgress({ step: 2, totalSteps: 4, checkpoint: { checkpoint: ref } });
            throw new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'the worker went away');
          }
          ctx.onProgress({ step, totalSteps: 4 });
        }
        const latents = await store.put({ requestId: task.reqId, name: 'latents', data: new Uint8Array([9]), shape: [1], dtype: 'uint8' });
        return { outputs: { latents } };
      },
    };
    s.addInstance(new LocalInstance('dit-1', 'dit', denoiser, 1, silentLogger()));
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    expect((await end(s, id)).type).toBe('completed');
    expect(startedAt).toEqual([0, 2]);
    expect((await s.get(id)).timings[0].attempts).toBe(2);
    await expect
      .poll(() =>
        store.stat(checkpointId).then(
          () => 'kept',
          () => 'deleted',
        ),
      )
      .toBe('deleted');
  });
});
