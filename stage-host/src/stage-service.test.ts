import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, type ExecuteResponse__Output, type StageServiceClient } from '@diffmesh/protos';
import { Code, DiffmeshError, silentLogger, fromWire, taskToWire, type StageHandler, type StageTask } from '@diffmesh/core';
import { StageServiceConfigSchema, startStageService, type RunningStageService } from './stage-process.js';
import type { OnnxStageDeps } from './onnx-stage.js';

// A stage service over a fake denoiser (no models): each task runs `numInferenceSteps`
// "steps", reports a model run per step, fails when the prompt says so, and waits for
// `release()` when the prompt is "hold", or until it is stopped when it is "endless".
let release: () => void = () => undefined;
let held = new Promise<void>((resolve) => (release = resolve));

function fakeDenoiser(deps: OnnxStageDeps): StageHandler {
  return {
    stage: 'denoising',
    models: () => [],
    async execute(task, ctx) {
      const total = task.params.numInferenceSteps;
      if (task.params.prompt === 'hold') await held;
      // Runs until stopped, then fails with an error of its own.
      if (task.params.prompt === 'endless')
        await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped'))));
      for (let step = 1; step <= total; step += 1) {
        ctx.signal.throwIfAborted();
        deps.metrics?.modelRun(0.002);
        deps.metrics?.denoiseBatch?.(2);
        ctx.onProgress({ step, totalSteps: total });
      }
      if (task.params.prompt === 'fail') throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'boom');
      return { outputs: {} };
    },
  };
}

function task(prompt: string, steps: number, stageIndex = 1): StageTask {
  return {
    reqId: `req-${prompt}-${stageIndex}`,
    stageIndex,
    stage: 'denoising',
    attempt: 1,
    model: 'test/model',
    params: {
      prompt,
      negativePrompt: '',
      width: 64,
      height: 64,
      numFrames: 1,
      numInferenceSteps: steps,
      guidanceScale: 5,
      seed: '1',
      fps: 8,
    },
    inputs: {},
    deadline: 0,
    traceContext: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
  };
}

let svc: RunningStageService;
let client: StageServiceClient;
beforeAll(async () => {
  svc = await startStageService({
    name: 'dit-svc',
    version: '0.1.0',
    config: StageServiceConfigSchema.parse({ pool: 'dit-test', modelsDirs: ['/nonexistent'], capacity: 2, progressIntervalMs: 0 }),
    log: silentLogger(),
    createHandler: fakeDenoiser,
    metricsListen: '127.0.0.1:0',
  });
  client = new (loadDiffmeshProtos().diffmesh.stage.v1.StageService)(svc.address, grpc.credentials.createInsecure());
});
afterAll(async () => {
  client?.close();
  await svc?.stop(1000);
});

function execute(t: StageTask): Promise<ExecuteResponse__Output[]> {
  const call = client.Execute({ task: taskToWire(t) });
  const out: ExecuteResponse__Output[] = [];
  return new Promise((resolve, reject) => {
    call.on('data', (m: ExecuteResponse__Output) => out.push(m));
    call.on('error', (err) => reject(fromWire(err)));
    call.on('end', () => resolve(out));
  });
}

async function scrape(): Promise<string> {
  const res = await fetch(svc.metricsUrl!);
  expect(res.status).toBe(200);
  return res.text();
}

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : NaN;
}

describe('stage service metrics', () => {
  it('serves Prometheus metrics with zeroed series before any task', async () => {
    expect(svc.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const text = await scrape();
    expect(value(text, 'diffmesh_stage_in_flight{stage="denoising",pool="dit-test"}')).toBe(0);
    expect(value(text, 'diffmesh_stage_tasks_total{stage="denoising",pool="dit-test",outcome="ok"}')).toBe(0);
    expect(value(text, 'diffmesh_denoising_steps_total{pool="dit-test"}')).toBe(0);
    expect(text).toMatch(/^diffmesh_stage_process_cpu_seconds_total /m);
    const notFound = await fetch(svc.metricsUrl!.replace('/metrics', '/other'));
    expect(notFound.status).toBe(404);
  });

  it('counts tasks by outcome, their steps, durations, model runs and batch sizes', async () => {
    await execute(task('ok', 5));
    await execute(task('ok', 3, 2));
    const err = await execute(task('fail', 2)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: Code.INTERNAL });
    const wrongStage = await execute({ ...task('x', 1), stage: 'vae_decoding' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(wrongStage).toMatchObject({ code: Code.INVALID_ARGUMENT });

    const text = await scrape();
    const labels = 'stage="denoising",pool="dit-test"';
    expect(value(text, `diffmesh_stage_tasks_total{${labels},outcome="ok"}`)).toBe(2);
    expect(value(text, `diffmesh_stage_tasks_total{${labels},outcome="failed"}`)).toBe(2);
    expect(value(text, `diffmesh_stage_task_seconds_count{${labels}}`)).toBe(4);
    expect(value(text, `diffmesh_stage_in_flight{${labels}}`)).toBe(0);
    expect(value(text, 'diffmesh_denoising_steps_total{pool="dit-test"}')).toBe(5 + 3 + 2);
    expect(value(text, 'diffmesh_model_run_seconds_count{stage="denoising"}')).toBe(10);
    expect(value(text, 'diffmesh_denoise_batch_size_sum')).toBe(20);
  });

  it('counts refusals when the instance is at capacity', async () => {
    held = new Promise<void>((resolve) => (release = resolve));
    const running = [execute(task('hold', 1, 3)), execute(task('hold', 1, 4))];
    // Capacity 2: with both slots taken, a third task is refused with RESOURCE_EXHAUSTED.
    while (svc.service.load.inFlight < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    const text = await scrape();
    expect(value(text, 'diffmesh_stage_in_flight{stage="denoising",pool="dit-test"}')).toBe(2);
    const refused = await execute(task('c', 1, 5)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toMatchObject({ code: Code.RESOURCE_EXHAUSTED });
    release();
    await Promise.all(running);
    const after = await scrape();
    expect(value(after, 'diffmesh_stage_tasks_total{stage="denoising",pool="dit-test",outcome="refused"}')).toBe(1);
    expect(value(after, 'diffmesh_stage_tasks_total{stage="denoising",pool="dit-test",outcome="ok"}')).toBe(4);
    expect(value(after, 'diffmesh_stage_in_flight{stage="denoising",pool="dit-test"}')).toBe(0);
  });
});

describe('task deadlines', () => {
  it('runs a task whose deadline is further away than a Node timer reaches (about 24.8 days)', async () => {
    held = new Promise<void>((resolve) => (release = resolve));
    const running = execute({ ...task('hold', 1, 6), deadline: Date.now() + 3_000_000_000 });
    await expect.poll(() => svc.service.load.inFlight, { timeout: 10_000 }).toBe(1);
    // A deadline timer that overflowed fires after 1 ms: give it the chance to.
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const answers = await running;
    expect(answers.at(-1)?.result).toBeDefined();
  });
});

describe('the Work stream', () => {
  /** Opens a Work stream; resolves with its first answer's kind, or the error it ended with. */
  function openWork(exclusive = true): { call: grpc.ClientDuplexStream<unknown, unknown>; first: Promise<string> } {
    const md = new grpc.Metadata();
    if (exclusive) md.set('diffmesh-work', 'exclusive');
    const call = (client as unknown as { Work(md: grpc.Metadata): grpc.ClientDuplexStream<unknown, unknown> }).Work(md);
    const first = new Promise<string>((resolve) => {
      call.once('data', (m: { status?: unknown }) => resolve(m.status ? 'status' : 'other'));
      call.once('error', (err) => resolve(fromWire(err).reason));
    });
    return { call, first };
  }

  it('is held by one scheduler at a time when it asks so: another is refused with INSTANCE_HELD until the holder lets go', async () => {
    const a = openWork();
    expect(await a.first).toBe('status');
    const b = openWork();
    expect(await b.first).toBe('INSTANCE_HELD');
    const shared = openWork(false);
    expect(await shared.first).toBe('INSTANCE_HELD');
    // The holder goes away (its stream ends): the next scheduler gets the instance.
    a.call.end();
    a.call.cancel();
    await expect
      .poll(
        async () => {
          const c = openWork();
          const how = await c.first;
          c.call.end();
          c.call.cancel();
          return how;
        },
        { timeout: 5000 },
      )
      .toBe('status');
  });

  it('is shared by schedulers with queues of their own; one asking for it alone is refused meanwhile', async () => {
    // The previous test's holder may take a moment to be let go.
    let a = openWork(false);
    await expect
      .poll(
        async () => {
          if ((await a.first) === 'status') return 'status';
          a = openWork(false);
          return 'held';
        },
        { timeout: 5000 },
      )
      .toBe('status');
    const b = openWork(false);
    expect(await b.first).toBe('status');
    const c = openWork(true);
    expect(await c.first).toBe('INSTANCE_HELD');
    for (const w of [a, b]) {
      w.call.end();
      w.call.cancel();
    }
  });
});

describe('draining', () => {
  it('hands back a task still running when the grace ends: it fails with UNAVAILABLE/DRAINING, and the service stops', async () => {
    const draining = await startStageService({
      name: 'dit-svc',
      version: '0.1.0',
      config: StageServiceConfigSchema.parse({ pool: 'dit-drain', modelsDirs: ['/nonexistent'], capacity: 1 }),
      log: silentLogger(),
      createHandler: fakeDenoiser,
    });
    const c = new (loadDiffmeshProtos().diffmesh.stage.v1.StageService)(draining.address, grpc.credentials.createInsecure());
    try {
      const call = c.Execute({ task: taskToWire(task('endless', 1, 7)) });
      const answer = new Promise<DiffmeshError>((resolve) => call.on('error', (err) => resolve(fromWire(err))));
      call.on('data', () => undefined);
      await expect.poll(() => draining.service.load.inFlight, { timeout: 10_000 }).toBe(1);
      await draining.stop(50);
      const err = await answer;
      expect([err.code, err.reason]).toEqual([Code.UNAVAILABLE, 'DRAINING']);
      expect(err.message).toMatch(/goes back to its queue/);
      expect(draining.service.load.inFlight).toBe(0);
    } finally {
      c.close();
    }
  });
});
