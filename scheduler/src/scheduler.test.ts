import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError, silentLogger, type StageHandler, type StageName, type StageTask, type RequestEvent } from '@diffmesh/core';
import { PlanRegistry } from './plans/registry.js';
import { createTensorStore, type TensorStore } from '@diffmesh/tensor-client';
import { messageCodec } from '@diffmesh/protos';
import { LocalInstance } from './local-instance.js';
import { Scheduler, type SchedulerLimits } from './scheduler.js';
import { eventToWire, statusResponse } from './service.js';
import { HeldInstance, end as lastEvent, newScheduler, outcome } from './fixtures/stages.js';
import type { StageInstance } from './types.js';

const registry = PlanRegistry.fromEntries([
  {
    model: 'test/model',
    modalities: ['text-to-image'],
    stages: [
      { name: 'text_encoding', pool: 'enc' },
      { name: 'denoising', pool: 'dit' },
      { name: 'vae_decoding', pool: 'vae' },
    ],
    defaults: { width: 64, height: 64, numFrames: 1, steps: 4, guidanceScale: 1, fps: 8 },
    constraints: { sizeMultiple: 8, maxWidth: 512, maxHeight: 512, maxFrames: 1 },
  },
]);

const limits: SchedulerLimits = {
  maxQueueLength: 100,
  maxInFlight: 100,
  maxAttempts: 3,
  retryBackoffMs: 1,
  defaultTimeoutMs: 0,
  stageTimeoutMs: 0,
  retentionMs: 60_000,
};

/** A stage that stores a small object and can be held, failed or observed per call. */
class TestStage implements StageHandler {
  calls: StageTask[] = [];
  gate: Promise<void> = Promise.resolve();
  failures: DiffmeshError[] = [];
  constructor(
    readonly stage: StageName,
    private readonly store: TensorStore,
    private readonly steps = 1,
  ) {}
  models(): string[] {
    return [];
  }
  async execute(task: StageTask, ctx: Parameters<StageHandler['execute']>[1]) {
    this.calls.push(task);
    const failure = this.failures.shift();
    if (failure) throw failure;
    for (let i = 1; i <= this.steps; i += 1) {
      await this.gate;
      ctx.signal.throwIfAborted();
      ctx.onProgress({ step: i, totalSteps: this.steps });
    }
    const ref = await this.store.put({
      requestId: task.reqId,
      name: this.stage,
      data: new Uint8Array([task.stageIndex]),
      shape: [1],
      dtype: 'uint8',
    });
    return { outputs: { [this.stage]: ref } };
  }
}

function setup(opts: { capacity?: number; limits?: Partial<SchedulerLimits>; pools?: StageName[]; recentRequests?: number } = {}) {
  const store = createTensorStore({ backend: 'memory' });
  const log = silentLogger();
  const scheduler = new Scheduler({
    registry,
    store,
    log,
    limits: { ...limits, ...opts.limits },
    ...(opts.recentRequests !== undefined ? { recentRequests: opts.recentRequests } : {}),
  });
  const stages = {
    text_encoding: new TestStage('text_encoding', store),
    denoising: new TestStage('denoising', store, 3),
    vae_decoding: new TestStage('vae_decoding', store),
  };
  const pools: Record<string, StageName> = { enc: 'text_encoding', dit: 'denoising', vae: 'vae_decoding' };
  for (const [pool, stage] of Object.entries(pools)) {
    if (opts.pools && !opts.pools.includes(stage)) continue;
    scheduler.addInstance(new LocalInstance(`${pool}-1`, pool, stages[stage as keyof typeof stages], opts.capacity ?? 1, log));
  }
  return { scheduler, store, stages };
}

async function events(scheduler: Scheduler, reqId: string): Promise<RequestEvent[]> {
  const out: RequestEvent[] = [];
  for await (const e of scheduler.watch(reqId)) out.push(e);
  return out;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('Scheduler', async () => {
  it('walks a request through its plan and reports every stage', async () => {
    const { scheduler, store } = setup();
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: 'hi' } });
    const evs = await events(scheduler, context.reqId);
    expect(evs.map((e) => e.type)).toEqual([
      'queued',
      'stage_started',
      'progress',
      'stage_finished',
      'queued',
      'stage_started',
      'progress',
      'progress',
      'progress',
      'stage_finished',
      'queued',
      'stage_started',
      'progress',
      'stage_finished',
      'completed',
    ]);
    const state = await scheduler.get(context.reqId);
    expect(state.context.status).toBe('completed');
    expect(state.timings.map((t) => t.stage)).toEqual(['text_encoding', 'denoising', 'vae_decoding']);
    expect(state.timings.every((t) => t.finishedAt >= t.startedAt && t.startedAt >= t.queuedAt)).toBe(true);
    // Intermediates are deleted; the final output stays for the client.
    await expect(store.stat(state.context.refs.text_encoding.objectId)).rejects.toMatchObject({ code: Code.NOT_FOUND });
    await expect(store.stat(state.result.vae_decoding.objectId)).resolves.toBeDefined();
  });

  it('passes earlier outputs to later stages as refs', async () => {
    const { scheduler, stages } = setup();
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: 'hi' } });
    await events(scheduler, context.reqId);
    expect(Object.keys(stages.vae_decoding.calls[0].inputs).sort()).toEqual(['denoising', 'text_encoding']);
  });

  it('runs larger priorities first and FIFO within a priority on a one-slot pool', async () => {
    const { scheduler, stages } = setup({ pools: ['text_encoding', 'denoising', 'vae_decoding'] });
    const hold = deferred();
    stages.text_encoding.gate = hold.promise;
    const first = await scheduler.submit({ model: 'test/model', params: { prompt: 'first' } });
    const order: Array<[string, number]> = [
      ['p0-a', 0],
      ['p5-a', 5],
      ['p0-b', 0],
      ['p9', 9],
      ['p5-b', 5],
      ['neg', -1],
    ];
    const ids = new Map<string, string>();
    for (const [name, priority] of order) {
      ids.set((await scheduler.submit({ model: 'test/model', params: { prompt: name }, priority })).context.reqId, name);
    }
    hold.resolve();
    await Promise.all([first.context.reqId, ...ids.keys()].map((id) => events(scheduler, id)));
    const ran = stages.text_encoding.calls.map((t) => t.params.prompt);
    expect(ran).toEqual(['first', 'p9', 'p5-a', 'p5-b', 'p0-a', 'p0-b', 'neg']);
  });

  it('rejects a request at once when a pool has no instance, naming the pool', async () => {
    const { scheduler } = setup({ pools: ['text_encoding', 'vae_decoding'] });
    await expect(scheduler.submit({ model: 'test/model', params: { prompt: 'x' } })).rejects.toThrow(
      expect.objectContaining({ code: Code.UNAVAILABLE, reason: 'POOL_UNAVAILABLE', message: expect.stringContaining('"dit"') }),
    );
  });

  it('answers QUEUE_FULL with a retry hint and accepts nothing half-way', async () => {
    const { scheduler, stages } = setup({ limits: { maxQueueLength: 2 } });
    const hold = deferred();
    stages.text_encoding.gate = hold.promise;
    const accepted = [];
    for (const i of [0, 1, 2]) accepted.push(await scheduler.submit({ model: 'test/model', params: { prompt: `r${i}` } }));
    let err: unknown;
    try {
      await scheduler.submit({ model: 'test/model', params: { prompt: 'one too many' } });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'QUEUE_FULL' });
    expect((err as DiffmeshError).retryAfterMs).toBeGreaterThan(0);
    hold.resolve();
    for (const a of accepted) await events(scheduler, a.context.reqId);
    expect(stages.text_encoding.calls.map((t) => t.params.prompt)).toEqual(['r0', 'r1', 'r2']);
  });

  it('rejects invalid parameters and unknown models with the field named', async () => {
    const { scheduler } = setup();
    await expect(scheduler.submit({ model: 'nope/none', params: { prompt: 'x' } })).rejects.toThrow(
      expect.objectContaining({ code: Code.NOT_FOUND, reason: 'UNKNOWN_MODEL' }),
    );
    await expect(scheduler.submit({ model: 'test/model', params: { prompt: '  ' } })).rejects.toThrow(
      expect.objectContaining({ code: Code.INVALID_ARGUMENT, field: 'prompt' }),
    );
    await expect(scheduler.submit({ model: 'test/model', params: { prompt: 'x', width: 65 } })).rejects.toThrow(
      expect.objectContaining({ field: 'width' }),
    );
  });

  it('cancels a running stage between steps and deletes the request objects', async () => {
    const { scheduler, stages, store } = setup();
    const hold = deferred();
    stages.denoising.gate = hold.promise;
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' } });
    const seen: RequestEvent[] = [];
    const watching = (async () => {
      for await (const e of scheduler.watch(context.reqId)) {
        seen.push(e);
        if (e.type === 'stage_started' && e.stage === 'denoising') {
          await scheduler.cancel(context.reqId);
          hold.resolve();
        }
      }
    })();
    await watching;
    expect(seen.at(-1)?.type).toBe('cancelled');
    expect(seen.some((e) => e.type === 'progress' && e.stage === 'denoising')).toBe(false);
    expect((await scheduler.get(context.reqId)).context.status).toBe('cancelled');
    await new Promise((r) => setImmediate(r));
    await expect(store.stat((await scheduler.get(context.reqId)).context.refs.text_encoding.objectId)).rejects.toMatchObject({
      code: Code.NOT_FOUND,
    });
    expect(stages.vae_decoding.calls).toHaveLength(0);
  });

  it('removes a cancelled request from its queue', async () => {
    const { scheduler, stages } = setup();
    const hold = deferred();
    stages.text_encoding.gate = hold.promise;
    const a = await scheduler.submit({ model: 'test/model', params: { prompt: 'a' } });
    const b = await scheduler.submit({ model: 'test/model', params: { prompt: 'b' } });
    expect((await scheduler.queueSizes()).enc).toBe(1);
    await scheduler.cancel(b.context.reqId);
    expect((await scheduler.queueSizes()).enc).toBe(0);
    hold.resolve();
    await events(scheduler, a.context.reqId);
    expect(stages.text_encoding.calls.map((t) => t.params.prompt)).toEqual(['a']);
  });

  it('retries a retryable failure with the same task identity, then succeeds', async () => {
    const { scheduler, stages } = setup();
    stages.denoising.failures.push(new DiffmeshError(Code.UNAVAILABLE, 'POOL_UNAVAILABLE', 'instance went away'));
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' } });
    const evs = await events(scheduler, context.reqId);
    expect(evs.at(-1)?.type).toBe('completed');
    const attempts = stages.denoising.calls.map((t) => [t.reqId, t.stageIndex, t.attempt]);
    expect(attempts).toEqual([
      [context.reqId, 1, 1],
      [context.reqId, 1, 2],
    ]);
    expect((await scheduler.get(context.reqId)).context.retryCount).toBe(1);
  });

  it('fails without retry on a non-retryable error and stops after maxAttempts', async () => {
    const { scheduler, stages } = setup({ limits: { maxAttempts: 2 } });
    stages.text_encoding.failures.push(new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'bad'));
    const a = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' } });
    const evA = await events(scheduler, a.context.reqId);
    expect(evA.at(-1)).toMatchObject({ type: 'failed', error: { reason: 'INVALID_PARAMETER' } });
    expect(stages.text_encoding.calls).toHaveLength(1);

    const err = new DiffmeshError(Code.UNAVAILABLE, 'POOL_UNAVAILABLE', 'down');
    stages.denoising.failures.push(err, err, err);
    const b = await scheduler.submit({ model: 'test/model', params: { prompt: 'y' } });
    const evB = await events(scheduler, b.context.reqId);
    expect(evB.at(-1)).toMatchObject({ type: 'failed', error: { code: Code.UNAVAILABLE } });
    expect(stages.denoising.calls.filter((t) => t.reqId === b.context.reqId)).toHaveLength(2);
  });

  it('counts maxAttempts per stage: a failed try of one stage does not use up the next stage’s tries', async () => {
    const { scheduler, stages } = setup({ limits: { maxAttempts: 2 } });
    const err = new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'STAGE_FAILED', 'out of memory');
    stages.text_encoding.failures.push(err);
    stages.denoising.failures.push(err);
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' } });
    expect(await outcome(scheduler, context.reqId)).toBe('completed');
    expect(stages.denoising.calls.map((t) => t.attempt)).toEqual([1, 2]);
    expect((await scheduler.get(context.reqId)).context.retryCount).toBe(2);
  });

  it('times a request out and reports DEADLINE_EXCEEDED', async () => {
    const { scheduler, stages } = setup();
    stages.denoising.gate = new Promise(() => {}); // never finishes on its own
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' }, timeoutMs: 50 });
    const evs = await events(scheduler, context.reqId);
    expect(evs.at(-1)).toMatchObject({ type: 'failed', error: { code: Code.DEADLINE_EXCEEDED, reason: 'TIMEOUT' } });
  });

  it('returns the existing request for a repeated client request id', async () => {
    const { scheduler } = setup();
    const a = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' }, requestId: 'client-1' });
    const b = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' }, requestId: 'client-1' });
    expect(b.context.reqId).toBe('client-1');
    expect(b).toBe(a);
  });

  it('hands the client trace context to every stage task, even with tracing off', async () => {
    const { scheduler, stages } = setup();
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const { context } = await scheduler.submit({
      model: 'test/model',
      params: { prompt: 'x' },
      traceContext: { traceparent, tracestate: 'v=1' },
    });
    expect(context.traceContext).toEqual({ traceparent, tracestate: 'v=1' });
    await events(scheduler, context.reqId);
    for (const stage of Object.values(stages)) {
      expect(stage.calls.map((t) => t.traceContext)).toEqual([{ traceparent, tracestate: 'v=1' }]);
    }
    // Without one (and no tracer), tasks carry none rather than a made-up context.
    const other = await scheduler.submit({
      model: 'test/model',
      params: { prompt: 'y' },
      traceContext: { traceparent: 'not-a-traceparent' },
    });
    await events(scheduler, other.context.reqId);
    expect(stages.vae_decoding.calls[1].traceContext).toEqual({});
  });
});

/** A remote-looking instance that never gets work here: a breaker state and availability to report. */
function fakeRemote(id: string, pool: string, breaker: 'open' | 'half-open' | 'closed'): StageInstance {
  return {
    id,
    pool,
    stage: 'denoising',
    nodeId: 'node-b',
    version: '1.2.3',
    capacity: 2,
    models: ['test/model'],
    address: '10.0.0.7:7001',
    available: () => breaker !== 'open',
    breakerState: () => breaker,
    execute: () => new Promise(() => {}),
  };
}

describe('Scheduler status', async () => {
  it('keeps the latest requests newest first, bounded, running ones included and live', async () => {
    const { scheduler, stages } = setup({ recentRequests: 3 });
    const hold = deferred();
    stages.text_encoding.gate = hold.promise;
    const ids: string[] = [];
    for (const p of ['r0', 'r1', 'r2', 'r3', 'r4'])
      ids.push((await scheduler.submit({ model: 'test/model', params: { prompt: p } })).context.reqId);
    // A repeated client id is the same request, not a new entry.
    const again = await scheduler.submit({ model: 'test/model', params: { prompt: 'r4' }, requestId: ids[4] });
    expect(again.context.reqId).toBe(ids[4]);
    let recent = scheduler.recentRequests();
    expect(recent.map((r) => r.context.reqId)).toEqual([ids[4], ids[3], ids[2]]);
    expect(recent.map((r) => r.context.params.prompt)).toEqual(['r4', 'r3', 'r2']);
    expect(recent.map((r) => r.context.status)).toEqual(['pending', 'pending', 'pending']);
    hold.resolve();
    for (const id of ids) await events(scheduler, id);
    recent = scheduler.recentRequests();
    expect(recent.map((r) => r.context.status)).toEqual(['completed', 'completed', 'completed']);
    expect(recent[0].timings.map((t) => t.stage)).toEqual(['text_encoding', 'denoising', 'vae_decoding']);
    // A copy: callers cannot change the scheduler's list.
    recent.length = 0;
    expect(scheduler.recentRequests()).toHaveLength(3);
    // 0 keeps none.
    const none = setup({ recentRequests: 0 }).scheduler;
    await events(none, (await none.submit({ model: 'test/model', params: { prompt: 'x' } })).context.reqId);
    expect(none.recentRequests()).toEqual([]);
  });

  it('keeps a summary of a request past its retention: timings and status, not its objects', async () => {
    const { scheduler } = setup({ limits: { retentionMs: 20 } });
    const long = 'x'.repeat(500);
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: long } });
    await events(scheduler, context.reqId);
    expect(Object.keys(scheduler.recentRequests()[0].result)).toEqual(['vae_decoding']);
    await new Promise((r) => setTimeout(r, 60));
    await expect(scheduler.get(context.reqId)).rejects.toThrow(expect.objectContaining({ reason: 'REQUEST_NOT_FOUND' }));
    const [kept] = scheduler.recentRequests();
    expect(kept.context).toMatchObject({ reqId: context.reqId, status: 'completed', refs: {}, params: { prompt: 'x'.repeat(200) } });
    expect(kept.result).toEqual({});
    expect(kept.timings.map((t) => t.stage)).toEqual(['text_encoding', 'denoising', 'vae_decoding']);
  });

  it('forgets the oldest finished requests beyond maxRetained, before their retention ends', async () => {
    const { scheduler } = setup({ limits: { maxRetained: 2 } });
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: `p${i}` } });
      await events(scheduler, context.reqId);
      ids.push(context.reqId);
    }
    for (const id of ids.slice(0, 2))
      await expect(scheduler.get(id)).rejects.toThrow(expect.objectContaining({ reason: 'REQUEST_NOT_FOUND' }));
    for (const id of ids.slice(2)) expect((await scheduler.get(id)).context.status).toBe('completed');
    // Still listed as recent, as summaries.
    expect(scheduler.recentRequests().map((r) => r.context.reqId)).toEqual([...ids].reverse());
  });

  it('reports every pool with its stage, queue depth, and instances with load, breaker and availability', async () => {
    const { scheduler, stages } = setup();
    // Another pool, so they never get this test's work.
    scheduler.addInstance(fakeRemote('dit-b', 'dit-remote', 'open'));
    scheduler.addInstance(fakeRemote('dit-a', 'dit-remote', 'half-open'));
    const hold = deferred();
    stages.text_encoding.gate = hold.promise;
    const ids: string[] = [];
    for (const i of [0, 1, 2]) ids.push((await scheduler.submit({ model: 'test/model', params: { prompt: `p${i}` } })).context.reqId);
    const pools = await scheduler.pools();
    expect(pools.map((p) => p.pool)).toEqual(['dit', 'dit-remote', 'enc', 'vae']);
    const enc = pools.find((p) => p.pool === 'enc')!;
    expect(enc).toMatchObject({ stage: 'text_encoding', queued: 2 });
    expect(enc.instances.map((i) => ({ id: i.instance.id, active: i.active, available: i.available, breaker: i.breaker }))).toEqual([
      { id: 'enc-1', active: 1, available: true, breaker: undefined },
    ]);
    expect(pools.find((p) => p.pool === 'dit')).toMatchObject({
      stage: 'denoising',
      queued: 0,
      instances: [{ active: 0, available: true }],
    });
    const remote = pools.find((p) => p.pool === 'dit-remote')!;
    expect(remote).toMatchObject({ stage: 'denoising', queued: 0 });
    expect(remote.instances.map((i) => [i.instance.id, i.breaker, i.available])).toEqual([
      ['dit-a', 'half-open', true],
      ['dit-b', 'open', false],
    ]);
    // A draining instance is listed, unavailable, until its tasks finish.
    scheduler.retireInstance('enc-1');
    expect((await scheduler.pools()).find((p) => p.pool === 'enc')!.instances[0]).toMatchObject({ retiring: true, available: false });
    scheduler.addInstance(new LocalInstance('enc-2', 'enc', stages.text_encoding, 1, silentLogger()));
    hold.resolve();
    for (const id of ids) await events(scheduler, id);
    // enc-1 left once its task was done; a pool without instances keeps its stage from the plans.
    expect((await scheduler.pools()).find((p) => p.pool === 'enc')!.instances.map((i) => i.instance.id)).toEqual(['enc-2']);
    scheduler.removeInstance('enc-2');
    expect((await scheduler.pools()).find((p) => p.pool === 'enc')).toEqual({
      pool: 'enc',
      stage: 'text_encoding',
      queued: 0,
      instances: [],
    });
  });

  it('answers GetStatus with wire values: breaker states, identity, prompts cut to 200 characters', async () => {
    const { scheduler } = setup();
    scheduler.addInstance(fakeRemote('dit-b', 'dit', 'open'));
    const long = `${'é'.repeat(150)}${'🎨'.repeat(100)}`;
    const { context } = await scheduler.submit({ model: 'test/model', params: { prompt: long } });
    await events(scheduler, context.reqId);
    const failing = setup().scheduler;
    // Read as a client reads it: encoded as the proto message (what the gRPC call sends), then decoded.
    type Status = {
      schedulerId: string;
      version: string;
      inFlight: number;
      pools: Array<{
        pool: string;
        stage: string;
        instances: Array<{ id: string; breaker: string; available: boolean; address: string; nodeId: string; version: string }>;
      }>;
      recentRequests: Array<{
        reqId: string;
        model: string;
        status: string;
        prompt: string;
        timings: Array<{ stage: string }>;
        error?: { reason: string };
      }>;
    };
    const codec = messageCodec<object, Status>('diffmesh.scheduler.v1.GetStatusResponse');
    const status = async (s: Scheduler): Promise<Status> =>
      codec.decode(codec.encode(await statusResponse(s, { instanceId: 'scheduler-1', version: '0.1.0' })));
    const res = await status(scheduler);
    expect(res).toMatchObject({ schedulerId: 'scheduler-1', version: '0.1.0', inFlight: 0 });
    const dit = res.pools.find((p) => p.pool === 'dit')!;
    expect(dit.stage).toBe('STAGE_NAME_DENOISING');
    expect(dit.instances.map((i) => [i.id, i.breaker, i.available, i.address, i.nodeId, i.version])).toEqual([
      ['dit-1', 'BREAKER_STATE_UNSPECIFIED', true, '', 'local', '0.0.0'],
      ['dit-b', 'BREAKER_STATE_OPEN', false, '10.0.0.7:7001', 'node-b', '1.2.3'],
    ]);
    const [recent] = res.recentRequests;
    expect(recent).toMatchObject({ reqId: context.reqId, model: 'test/model', status: 'REQUEST_STATUS_COMPLETED' });
    expect([...recent.prompt]).toHaveLength(200);
    expect(recent.prompt).toBe(`${'é'.repeat(150)}${'🎨'.repeat(50)}`);
    expect(recent.timings.map((t) => t.stage)).toEqual(['STAGE_NAME_TEXT_ENCODING', 'STAGE_NAME_DENOISING', 'STAGE_NAME_VAE_DECODING']);

    // A failed request carries its error.
    failing.removeInstance('vae-1');
    failing.addInstance(fakeRemote('vae-x', 'vae', 'closed'));
    const f = await failing.submit({ model: 'test/model', params: { prompt: 'x' }, timeoutMs: 30 });
    await events(failing, f.context.reqId);
    const [failed] = (await status(failing)).recentRequests;
    expect(failed).toMatchObject({ status: 'REQUEST_STATUS_FAILED', error: { reason: 'ERROR_REASON_TIMEOUT' } });
  });
});

describe('event messages', async () => {
  it('encode directly (as Generate and Watch send them) exactly as the converting encoder would, for every kind', async () => {
    const { scheduler } = setup();
    const ok = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' } });
    const seen = await events(scheduler, ok.context.reqId);
    const okState = await scheduler.get(ok.context.reqId);
    const failing = setup({ pools: ['text_encoding', 'denoising'] });
    failing.scheduler.addInstance(fakeRemote('vae-x', 'vae', 'closed'));
    const failed = await failing.scheduler.submit({ model: 'test/model', params: { prompt: 'x' }, timeoutMs: 30 });
    const failedEvents = await events(failing.scheduler, failed.context.reqId);
    const failedState = await failing.scheduler.get(failed.context.reqId);
    const kinds = new Set([...seen, ...failedEvents].map((e) => e.type));
    expect([...kinds].sort()).toEqual(['completed', 'failed', 'progress', 'queued', 'stage_finished', 'stage_started']);
    const codec = messageCodec<object, { events: Array<Record<string, unknown>> }>('diffmesh.scheduler.v1.GenerateResponse');
    const wire = {
      events: [
        ...seen.map((e, i) => eventToWire(e, i + 1, okState)),
        ...failedEvents.map((e, i) => eventToWire(e, i + 1, failedState)),
        eventToWire({ type: 'cancelled', reqId: 'r', at: 1 }, 1),
      ],
    };
    const direct = codec.decode(codec.encodeReady(wire));
    expect(direct).toStrictEqual(codec.decode(codec.encode(wire)));
    expect(direct.events.at(-2)).toMatchObject({ failed: { error: { code: 'DEADLINE_EXCEEDED', reason: 'ERROR_REASON_TIMEOUT' } } });
    expect(direct.events.find((e) => e.stageStarted)).toMatchObject({ stageStarted: { stage: 'STAGE_NAME_TEXT_ENCODING' } });
    // Each stage's task is queued in turn, and the event says which.
    const queued = seen.flatMap((e, i) => (e.type === 'queued' ? [direct.events[i]] : []));
    expect(queued.map((e) => e.queued)).toEqual([
      expect.objectContaining({ stageIndex: 0, stage: 'STAGE_NAME_TEXT_ENCODING' }),
      expect.objectContaining({ stageIndex: 1, stage: 'STAGE_NAME_DENOISING' }),
      expect.objectContaining({ stageIndex: 2, stage: 'STAGE_NAME_VAE_DECODING' }),
    ]);
  });
});

describe('drain (memory store)', async () => {
  it('lets a running request finish within the grace, and fails one still running after it with UNAVAILABLE/DRAINING', async () => {
    const finishes = newScheduler();
    const a = new HeldInstance('enc-a');
    finishes.addInstance(a);
    const done = (await finishes.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => a.tasks.length).toBe(1);
    const draining = finishes.drain(60_000);
    // Draining: no new request, but the running one may finish.
    await expect(finishes.submit({ model: 'm1', params: { prompt: 'y' } })).rejects.toMatchObject({ reason: 'DRAINING' });
    a.finish(0);
    await draining;
    expect(await outcome(finishes, done)).toBe('completed');

    const stops = newScheduler();
    const b = new HeldInstance('enc-b');
    stops.addInstance(b);
    const left = (await stops.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => b.tasks.length).toBe(1);
    await stops.drain(0);
    const end = await lastEvent(stops, left);
    expect(end).toMatchObject({ type: 'failed', error: { code: Code.UNAVAILABLE, reason: 'DRAINING' } });
    expect(end.type === 'failed' && end.error.message).toMatch(/shut down before the request finished/);
  });
});

describe('tasks longer than a lease (memory store)', () => {
  it('run once: the lease is renewed while the task runs, not handed out again', async () => {
    const s = newScheduler({ leaseMs: 300, maxAttempts: 3 });
    const held = new HeldInstance('enc-1');
    const other = new HeldInstance('enc-2');
    s.addInstance(held);
    s.addInstance(other);
    const reqId = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    await expect.poll(() => held.tasks.length + other.tasks.length).toBe(1);
    // Four leases long.
    await new Promise((r) => setTimeout(r, 1200));
    expect(held.tasks.length + other.tasks.length).toBe(1);
    (held.tasks.length === 1 ? held : other).finish(0);
    const e = await lastEvent(s, reqId);
    expect(e.type).toBe('completed');
    expect((await s.get(reqId)).timings[0]?.attempts).toBe(1);
    await s.stop();
  });
});
