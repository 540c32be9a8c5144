import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { startLocalMesh } from '@diffmesh/cli';
import { schedulerStub, type SchedulerStub } from '@diffmesh/client';
import { HealthChecker, paramsToWire, silentLogger, type GenerationParams } from '@diffmesh/core';
import { buildTestModelDir, defaultModelsRoot } from '@diffmesh/models';
import { loadDiffmeshProtos, type GenerateResponse__Output, type StageServiceClient } from '@diffmesh/protos';
import { pct } from './mesh.js';

/** What one way of running models does to a dit-svc while a long call runs. */
export interface LongRunRow {
  /** `--runner-threads` of the dit-svc: 0 = model runs on its main thread (before), 1 = in a runner thread. */
  runnerThreads: number;
  /** Median denoiser call, ms (the request's denoising time over its calls). */
  callMs: number;
  /** The dit-svc's event-loop delay over the request (monitorEventLoopDelay via its /metrics), p99 and max, ms. */
  loopP99Ms: number;
  loopMaxMs: number;
  /** gRPC health checks sent one after another during the request: p50 / p99 / max, ms. */
  healthP50Ms: number;
  healthP99Ms: number;
  healthMaxMs: number;
  healthChecks: number;
  /** From the Cancel call to the request's `cancelled` event, ms. */
  cancelToEventMs: number;
  /** From the Cancel call to the dit-svc having no task in flight (its Describe), ms. */
  cancelToTaskEndMs: number;
  /** Times discovery reported the dit-svc down during the run. */
  discoveryDowns: number;
  /** Requests that failed (the dispatch stream dropped by its keepalive, the instance removed). */
  failures: string[];
}

/**
 * A dit-svc serving an SD directory whose UNet call takes seconds (sd1-slow with `products`
 * extra 2048² matrix products per call), through a mesh of processes, with model runs on its
 * main thread (`--runner-threads 0`, what every stage did before runner threads) and in a
 * runner thread, side by side in one run.
 */
export async function runLongRuns(opts: { products?: number; steps?: number } = {}): Promise<LongRunRow[]> {
  const root = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-long-'));
  const rows: LongRunRow[] = [];
  try {
    const dir = path.join(root, 'sd1-slow');
    await buildTestModelDir('sd1-slow', dir, { extraWork: { size: 2048, products: opts.products ?? 30 } });
    const id = await realpath(dir);
    for (const runnerThreads of [0, 1]) rows.push(await measure(id, runnerThreads, opts.steps ?? 4));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
  return rows;
}

async function measure(model: string, runnerThreads: number, steps: number): Promise<LongRunRow> {
  const mesh = await startLocalMesh({
    modelsDirs: [defaultModelsRoot()],
    models: [model],
    modelDirectories: [model],
    log: silentLogger(),
    stageArgs: ['--runner-threads', String(runnerThreads), '--progress-interval-ms', '0'],
  });
  const client = schedulerStub(mesh.schedulerAddress);
  const dit = mesh.supervisor.get('dit-svc-1');
  if (!dit?.address) throw new Error('no dit-svc-1 in the mesh');
  const health = new HealthChecker(dit.address);
  const stage = new (loadDiffmeshProtos().diffmesh.stage.v1.StageService)(dit.address, grpc.credentials.createInsecure());
  const instance = (await mesh.discovery.instances()).find((i) => i.id === 'dit-svc-1');
  const metricsUrl = instance?.metadata.metrics_url;
  let downs = 0;
  const off = mesh.discovery.subscribe((e) => void (e.type === 'down' && e.instance.id === 'dit-svc-1' && (downs += 1)), {
    replay: false,
  });
  let running = true;
  let probing: Promise<void> = Promise.resolve();
  try {
    const params: Partial<GenerationParams> = { prompt: 'a red cat', guidanceScale: 2, numInferenceSteps: steps, seed: '1' };
    const failures: string[] = [];
    // Loads the sessions (the first call allocates); a main thread blocked this long may lose its
    // dispatch stream to the keepalive (10 s pings, 5 s to answer), which fails the request.
    await run(client, model, { ...params, numInferenceSteps: 1 }).catch((err: unknown) => failures.push(String(err)));
    const runsBefore = metricsUrl ? await scrape(metricsUrl) : undefined; // also resets the delay histogram
    const healthMs: number[] = [];
    probing = (async () => {
      while (running) {
        const t0 = performance.now();
        await health.check('', 60_000);
        healthMs.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    let timed = { denoisingMs: NaN };
    for (let attempt = 0; attempt < 3 && !Number.isFinite(timed.denoisingMs); attempt += 1) {
      timed = await run(client, model, params).catch((err: unknown) => {
        failures.push(String(err));
        return { denoisingMs: NaN };
      });
    }
    running = false;
    await probing;
    const runsAfter = metricsUrl ? await scrape(metricsUrl) : undefined;
    const loop = runsAfter ? { p99: runsAfter.loopP99Ms, max: runsAfter.loopMaxMs } : { p99: NaN, max: NaN };
    const callMs =
      runsBefore && runsAfter
        ? ((runsAfter.runSeconds - runsBefore.runSeconds) / Math.max(1, runsAfter.runs - runsBefore.runs)) * 1000
        : NaN;
    const cancelTimes = await cancelTiming(client, stage, model, params).catch((err: unknown) => {
      failures.push(String(err));
      return { cancelToEventMs: NaN, cancelToTaskEndMs: NaN };
    });
    healthMs.sort((a, b) => a - b);
    return {
      runnerThreads,
      callMs: Number.isFinite(timed.denoisingMs) ? callMs : NaN,
      loopP99Ms: loop.p99,
      loopMaxMs: loop.max,
      healthP50Ms: pct(healthMs, 50),
      healthP99Ms: pct(healthMs, 99),
      healthMaxMs: healthMs[healthMs.length - 1],
      healthChecks: healthMs.length,
      ...cancelTimes,
      discoveryDowns: downs,
      failures,
    };
  } finally {
    running = false;
    await probing.catch(() => undefined);
    off();
    health.close();
    stage.close();
    client.close();
    await mesh.stop();
  }
}

/** Runs a request to its end; the denoising stage's time. */
function run(client: SchedulerStub, model: string, params: Partial<GenerationParams>): Promise<{ denoisingMs: number }> {
  return new Promise((resolve, reject) => {
    const call = client.Generate({ model, params: paramsToWire(params), priority: 0 });
    let started = 0;
    let denoisingMs = 0;
    call.on('data', (msg: GenerateResponse__Output) => {
      for (const e of msg.events) {
        if (e.stageStarted?.stage === 'STAGE_NAME_DENOISING') started = performance.now();
        if (e.stageFinished?.timing?.stage === 'STAGE_NAME_DENOISING') denoisingMs = performance.now() - started;
        if (e.failed) reject(new Error(`request failed: ${e.failed.error?.message}`));
      }
    });
    call.on('error', reject);
    call.on('end', () => resolve({ denoisingMs }));
  });
}

/** Cancels a long request once its first step is done; times the cancel to its event and to the task's end. */
function cancelTiming(
  client: SchedulerStub,
  stage: StageServiceClient,
  model: string,
  params: Partial<GenerationParams>,
): Promise<{ cancelToEventMs: number; cancelToTaskEndMs: number }> {
  return new Promise((resolve, reject) => {
    const call = client.Generate({ model, params: paramsToWire({ ...params, numInferenceSteps: 50 }), priority: 0 });
    let cancelAt = 0;
    let eventMs = NaN;
    let taskEnded: Promise<number> | undefined;
    call.on('data', (msg: GenerateResponse__Output) => {
      for (const e of msg.events) {
        if (!cancelAt && e.stepProgress?.stage === 'STAGE_NAME_DENOISING') {
          cancelAt = performance.now();
          const cancel = client.Cancel as (req: { reqId: string }, cb: (err: grpc.ServiceError | null) => void) => void;
          cancel.call(client, { reqId: e.reqId }, (err) => err && reject(err));
          taskEnded = untilIdle(stage).then(() => performance.now() - cancelAt);
        }
        if (e.cancelled) eventMs = performance.now() - cancelAt;
      }
    });
    call.on('error', (err) => {
      if ((err as grpc.ServiceError).code !== grpc.status.CANCELLED) reject(err instanceof Error ? err : new Error(String(err)));
    });
    call.on('end', () => {
      void (taskEnded ?? Promise.resolve(NaN)).then((taskMs) => resolve({ cancelToEventMs: eventMs, cancelToTaskEndMs: taskMs }), reject);
    });
  });
}

/** Resolves once the stage instance reports no task in flight (Describe). */
async function untilIdle(stage: StageServiceClient): Promise<void> {
  for (;;) {
    const inFlight = await new Promise<number>((resolve, reject) =>
      stage.Describe({}, { deadline: Date.now() + 60_000 }, (err, res) => (err ? reject(err) : resolve(res?.inFlight ?? 0))),
    );
    if (inFlight === 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * From the dit-svc's Prometheus metrics: its event-loop delay since the last scrape (p99 and
 * max, ms; prom-client resets it at every scrape) and its model runs so far (count, seconds).
 */
async function scrape(url: string): Promise<{ loopP99Ms: number; loopMaxMs: number; runs: number; runSeconds: number }> {
  const text = await (await fetch(url)).text();
  const value = (name: string): number => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  };
  return {
    loopP99Ms: value('diffmesh_stage_nodejs_eventloop_lag_p99_seconds') * 1000,
    loopMaxMs: value('diffmesh_stage_nodejs_eventloop_lag_max_seconds') * 1000,
    runs: value('diffmesh_model_run_seconds_count'),
    runSeconds: value('diffmesh_model_run_seconds_sum'),
  };
}

export function formatLongRuns(rows: LongRunRow[]): string {
  const f = (v: number) => (Number.isFinite(v) ? v.toFixed(v < 10 ? 1 : 0) : 'n/a');
  const lines = [
    'Long model calls (sd1-slow, CFG batch 2) through a mesh: what the dit-svc does while a call runs',
    '| model runs | call ms | event-loop delay p99 / max ms | health p50 / p99 / max ms (checks) | cancel → event ms | cancel → task ended ms | discovery downs |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.runnerThreads === 0 ? 'main thread (--runner-threads 0)' : `runner thread (--runner-threads ${r.runnerThreads})`} | ${f(r.callMs)} | ${f(r.loopP99Ms)} / ${f(r.loopMaxMs)} | ${f(r.healthP50Ms)} / ${f(r.healthP99Ms)} / ${f(r.healthMaxMs)} (${r.healthChecks}) | ${f(r.cancelToEventMs)} | ${f(r.cancelToTaskEndMs)} | ${r.discoveryDowns} |`,
    );
  }
  for (const r of rows) for (const f of r.failures) lines.push(`runner threads ${r.runnerThreads}: ${f}`);
  const [before, after] = rows;
  if (before && after) {
    lines.push(
      `health p99: ${f(before.healthP99Ms / after.healthP99Ms)}× lower with runner threads; event-loop delay p99: ${f(before.loopP99Ms / after.loopP99Ms)}× lower`,
    );
  }
  return lines.join('\n');
}
