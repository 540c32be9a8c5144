/**
 * Fair share across tenants: a light tenant's latency while a second tenant floods the same
 * pool, under first come, first served (the scheduler's `fairShare: false`) and under
 * weighted fair queuing (the default), against the light load alone.
 *
 * One in-process scheduler (memory store) and one pool of `slots` slots whose tasks take
 * `taskMs` ± 25% (a modelled stage: a timer, no model; the same seeded durations in every
 * case), so the figures are the queueing's, not the machine's. The light tenant sends a steady
 * 20% of the pool's capacity; the heavy one sends 20 times that (400% of capacity: its backlog
 * grows for the whole run).
 *
 * Durations vary because real ones do, and because identical durations lock the slots in
 * phase: a flood that filled them within a few ms frees them within a few ms every `taskMs`,
 * and a request arriving between two such bursts waits for the next even with fair share
 * (non-preemptive: a light request can only take the next slot that frees).
 */
import { silentLogger, type StageHandler } from '@diffmesh/core';
import { LocalInstance, PlanRegistry, Scheduler, type SchedulerLimits } from '@diffmesh/scheduler';
import { createTensorStore } from '@diffmesh/tensor-client';
import { pct } from './mesh.js';

export interface FairShareOptions {
  /** Slots of the pool (one instance). Default 16. */
  slots?: number;
  /** How long a task runs on average (ms; each ± 25%). Default 200. */
  taskMs?: number;
  /** Measured seconds per case (after the warm-up). Default 10. */
  seconds?: number;
  /** Spread of task durations around `taskMs` (0.25 = ± 25%; 0 = all equal). Default 0.25. */
  jitter?: number;
  /** Unmeasured time at the start of each case, ms. Default 1000. */
  warmUpMs?: number;
}

export interface FairShareRow {
  mode: 'fcfs' | 'fair';
  heavy: boolean;
  /** Light tenant's requests measured, and their latency (submit to completed) in ms. */
  light: number;
  p50: number;
  p99: number;
  /** Heavy tenant's requests completed per second (0 when alone). */
  heavyPerSecond: number;
}

export interface FairShareResult {
  slots: number;
  taskMs: number;
  jitter: number;
  lightPerSecond: number;
  rows: FairShareRow[];
}

const MODEL = 'bench/fair';

const LIMITS: SchedulerLimits = {
  // The heavy tenant's backlog is the point: no queue bound or in-flight bound refuses it.
  maxQueueLength: 1_000_000,
  maxInFlight: 1_000_000,
  maxAttempts: 1,
  retryBackoffMs: 1,
  defaultTimeoutMs: 0,
  stageTimeoutMs: 0,
  retentionMs: 5_000,
  maxRetained: 100_000,
};

/** Runs the four cases: each mode alone and with the heavy tenant. */
export async function runFairShare(opts: FairShareOptions = {}): Promise<FairShareResult> {
  const slots = opts.slots ?? 16;
  const taskMs = opts.taskMs ?? 200;
  const seconds = opts.seconds ?? 10;
  const jitter = opts.jitter ?? 0.25;
  const warmUpMs = opts.warmUpMs ?? 1000;
  const lightPerSecond = (0.2 * slots * 1000) / taskMs;
  const rows: FairShareRow[] = [];
  for (const mode of ['fcfs', 'fair'] as const) {
    for (const heavy of [false, true]) {
      process.stderr.write(`fair-share: ${mode}, light tenant ${heavy ? 'with the heavy tenant' : 'alone'}…\n`);
      rows.push(await runCase({ mode, heavy, slots, taskMs, jitter, seconds, warmUpMs, lightPerSecond }));
    }
  }
  return { slots, taskMs, jitter, lightPerSecond, rows };
}

async function runCase(c: {
  mode: 'fcfs' | 'fair';
  heavy: boolean;
  slots: number;
  taskMs: number;
  jitter: number;
  seconds: number;
  warmUpMs: number;
  lightPerSecond: number;
}): Promise<FairShareRow> {
  const registry = PlanRegistry.fromEntries([
    {
      model: MODEL,
      modalities: ['text-to-image'],
      stages: [{ name: 'denoising', pool: 'dit' }],
      defaults: { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 },
      constraints: { sizeMultiple: 8, maxWidth: 512, maxHeight: 512, maxFrames: 1 },
    },
  ]);
  const warmUpMs = c.warmUpMs;
  let measureFrom = Infinity;
  let measureTo = Infinity;
  const light: number[] = [];
  let heavyDone = 0;
  const log = silentLogger();
  const s = new Scheduler({
    registry,
    store: createTensorStore({ backend: 'memory' }),
    log,
    limits: LIMITS,
    fairShare: c.mode === 'fair',
    onEvent: (e, state) => {
      if (e.type !== 'completed') return;
      const created = state.context.createdAt;
      // The light tenant's requests sent in the window; the heavy tenant's finished in it.
      if (state.context.tenant === 'light') {
        if (created >= measureFrom && created < measureTo) light.push(e.at - created);
      } else if (e.at >= measureFrom && e.at < measureTo) heavyDone += 1;
    },
  });
  s.addInstance(new LocalInstance('dit-1', 'dit', modelledStage(c.taskMs, c.jitter), c.slots, log));
  const started = performance.now();
  const sent = { light: 0, heavy: 0 };
  const rate = { light: c.lightPerSecond, heavy: c.heavy ? 20 * c.lightPerSecond : 0 };
  const submit = (tenant: 'light' | 'heavy'): void => {
    sent[tenant] += 1;
    void s.submit({ model: MODEL, params: { prompt: tenant }, tenant }).catch(() => undefined);
  };
  measureFrom = Date.now() + warmUpMs;
  measureTo = measureFrom + c.seconds * 1000;
  // Steady arrivals: every few ms, each tenant sends what its rate owes since the start.
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const elapsed = (performance.now() - started) / 1000;
      for (const tenant of ['light', 'heavy'] as const) {
        while (sent[tenant] < Math.floor(elapsed * rate[tenant])) submit(tenant);
      }
      if (Date.now() >= measureTo) {
        clearInterval(timer);
        resolve();
      }
    }, 2);
  });
  // The light tenant's last requests finish (under first come, first served they wait behind
  // the heavy backlog: wait for them, bounded).
  const expected = Math.floor(c.seconds * c.lightPerSecond) - 1;
  const deadline = Date.now() + 120_000;
  while (light.length < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await s.stop();
  light.sort((a, b) => a - b);
  return {
    mode: c.mode,
    heavy: c.heavy,
    light: light.length,
    p50: pct(light, 50),
    p99: pct(light, 99),
    heavyPerSecond: heavyDone / c.seconds,
  };
}

/**
 * A stage whose tasks take `ms` ± `jitter` (a timer; the n-th task of every run takes the same
 * time: a seeded generator), stopping early when cancelled.
 */
function modelledStage(ms: number, jitter: number): StageHandler {
  let seed = 42;
  // mulberry32: a small seeded generator, so every case sees the same durations.
  const random = (): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    stage: 'denoising',
    models: () => [],
    execute: (_task, ctx) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve({ outputs: {} }), ms * (1 - jitter + 2 * jitter * random()));
        ctx.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(ctx.signal.reason instanceof Error ? ctx.signal.reason : new Error('cancelled'));
        });
      }),
  };
}

export function formatFairShare(r: FairShareResult): string {
  const row = (mode: 'fcfs' | 'fair', heavy: boolean): FairShareRow | undefined => r.rows.find((x) => x.mode === mode && x.heavy === heavy);
  const ratio = (mode: 'fcfs' | 'fair', q: 'p50' | 'p99'): string => {
    const a = row(mode, false);
    const b = row(mode, true);
    return a && b && a[q] > 0 ? `${(b[q] / a[q]).toFixed(2)}×` : '-';
  };
  const lines = [
    `fair share — one pool of ${r.slots} slots, tasks of ${r.taskMs} ms ± ${Math.round(r.jitter * 100)}%; a light tenant at ${r.lightPerSecond.toFixed(0)} requests/s (20% of capacity),`,
    `    alone and with a heavy tenant sending 20× that (400% of capacity); latency = submit to completed (in-process scheduler, memory store)`,
    '    ordering                     light tenant     requests  p50 ms   p99 ms   heavy done/s',
    ...r.rows.map(
      (x) =>
        `    ${(x.mode === 'fcfs' ? 'first come, first served' : 'weighted fair share').padEnd(28)} ${(x.heavy ? 'with heavy' : 'alone').padEnd(15)}` +
        `  ${String(x.light).padStart(8)}  ${x.p50.toFixed(0).padStart(6)}  ${x.p99.toFixed(0).padStart(7)}  ${x.heavyPerSecond.toFixed(1).padStart(13)}`,
    ),
    `    with heavy / alone: first come, first served p50 ${ratio('fcfs', 'p50')}, p99 ${ratio('fcfs', 'p99')}; ` +
      `fair share p50 ${ratio('fair', 'p50')}, p99 ${ratio('fair', 'p99')} (target: fair share p99 ≤ 1.3×)`,
  ];
  return `${lines.join('\n')}\n`;
}
