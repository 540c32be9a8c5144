/**
 * `previews`: what live previews cost the denoising loop, two ways.
 *
 * 1. The loop: the project's DiT model (synthetic-dit-image) runs in the embedded runtime with
 *    previews off, every 4 steps and every step, the three interleaved request by request (so
 *    drift hits them alike); the figure is the denoising stage's run time (its
 *    `stage_finished` run ms), median of `reps` requests each, and each setting's overhead
 *    against off.
 * 2. One preview alone: `latentPreview` (latent → RGB, sampling down, PNG) on latents of the
 *    sizes real models have, median of many calls. A preview is made on the stage's main
 *    thread between steps, so this is what it adds to a step; divided by a step's time it is
 *    the overhead at "every step", free of the loop's run-to-run noise.
 */
import { availableParallelism } from 'node:os';
import { startEmbedded } from '@diffmesh/cli';
import { silentLogger, type GenerationParams, type RequestEvent } from '@diffmesh/core';
import { defaultModelsRoot } from '@diffmesh/models';
import { familyProjection, latentPreview } from '@diffmesh/dit-svc';

/** One model and size. */
export interface PreviewCase {
  label: string;
  model: string;
  params: Partial<GenerationParams>;
}

export interface PreviewModeResult {
  /** 0 = off. */
  everySteps: number;
  medianMs: number;
  /** The fastest request's loop: the least disturbed by other work on the machine. */
  minMs: number;
  /** CPU time of the whole process (all threads) per request, median. */
  cpuMs: number;
  /** Min against off's min, in percent. */
  minOverheadPct: number;
  /** CPU against off's, in percent. */
  cpuOverheadPct: number;
  /** Against off, in percent. */
  overheadPct: number;
  previews: number;
  /** Mean PNG size of a preview. */
  meanBytes: number;
  width: number;
  height: number;
}

export interface PreviewCaseResult {
  label: string;
  steps: number;
  modes: PreviewModeResult[];
  /** (every-step median − off median) / previews: what one preview costs the loop. */
  msPerPreview: number;
}

/** One preview made alone. */
export interface PreviewCostResult {
  label: string;
  medianMs: number;
  width: number;
  height: number;
  bytes: number;
}

export interface PreviewBenchResult {
  threads: number;
  reps: number;
  /** Calls of each one-preview-alone case. */
  costCalls: number;
  cases: PreviewCaseResult[];
  costs: PreviewCostResult[];
}

/** Sizes of {@link runPreviewBench} other than its repetitions. */
export interface PreviewBenchOptions {
  /** Denoising steps of each request. Default 20. */
  steps?: number;
  /** Calls of each one-preview-alone case. Default 200. */
  costCalls?: number;
}

const MODES = [0, 4, 1] as const;

export const PREVIEW_CASES: PreviewCase[] = [
  { label: 'synthetic-dit-image 256×256', model: 'diffmesh/synthetic-dit-image', params: { width: 256, height: 256 } },
];

/** Latents of real models' usual sizes: [channels, h, w], the family whose factors apply, max side. */
const COST_CASES: Array<{ label: string; channels: number; h: number; w: number; kind: 'sd' | 'sdxl' | 'sd3' | 'flux'; maxSide: number }> =
  [
    { label: '4×32×32 (256 px, synthetic-dit-image)', channels: 4, h: 32, w: 32, kind: 'sd', maxSide: 256 },
    { label: '4×64×64 (SD 1.5, 512 px)', channels: 4, h: 64, w: 64, kind: 'sd', maxSide: 256 },
    { label: '4×128×128 (SDXL, 1024 px)', channels: 4, h: 128, w: 128, kind: 'sdxl', maxSide: 256 },
    { label: '16×128×128 (FLUX/SD3, 1024 px)', channels: 16, h: 128, w: 128, kind: 'flux', maxSide: 256 },
    { label: '16×128×128, max_side 64', channels: 16, h: 128, w: 128, kind: 'flux', maxSide: 64 },
  ];

/** Median time of one preview of each {@link COST_CASES} latent (random values), `calls` calls each. */
export function runPreviewCosts(calls = 200): PreviewCostResult[] {
  return COST_CASES.map((c) => {
    let seed = 1;
    const latent = Float32Array.from({ length: c.channels * c.h * c.w }, () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed / 2 ** 32) * 4 - 2;
    });
    const layout = { channels: c.channels, height: c.h, width: c.w, planeStride: c.h * c.w };
    const projection = familyProjection(c.kind, c.channels);
    const times: number[] = [];
    let last = latentPreview(latent, layout, projection, c.maxSide);
    for (let i = 0; i < calls; i += 1) {
      const t0 = performance.now();
      last = latentPreview(latent, layout, projection, c.maxSide);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return {
      label: c.label,
      medianMs: times[Math.floor(times.length / 2)],
      width: last.width,
      height: last.height,
      bytes: last.data.byteLength,
    };
  });
}

export async function runPreviewBench(
  reps = 7,
  cases: PreviewCase[] = PREVIEW_CASES,
  opts: PreviewBenchOptions = {},
): Promise<PreviewBenchResult> {
  const steps = opts.steps ?? 20;
  const costCalls = opts.costCalls ?? 200;
  const threads = Math.max(1, Math.min(8, availableParallelism()));
  const mesh = await startEmbedded({ modelRoots: [defaultModelsRoot()], intraOpThreads: threads, maxBatch: 8, log: silentLogger() });
  const out: PreviewCaseResult[] = [];
  try {
    for (const c of cases) {
      const times = new Map<number, number[]>(MODES.map((m) => [m, []]));
      const cpu = new Map<number, number[]>(MODES.map((m) => [m, []]));
      const seen = new Map<number, { count: number; bytes: number; width: number; height: number }>();
      // Rep 0 loads the sessions and warms them: not timed.
      for (let r = 0; r <= reps; r += 1) {
        // The order rotates from round to round, so no setting always follows the same one.
        for (let k = 0; k < MODES.length; k += 1) {
          const every = MODES[(k + r) % MODES.length];
          const { runMs, cpuMs, previews } = await runOnce(mesh, c, every, r, steps);
          if (r === 0) continue;
          times.get(every)!.push(runMs);
          cpu.get(every)!.push(cpuMs);
          const s = seen.get(every) ?? { count: 0, bytes: 0, width: 0, height: 0 };
          for (const p of previews) {
            s.count += 1;
            s.bytes += p.data.byteLength;
            s.width = p.width;
            s.height = p.height;
          }
          seen.set(every, s);
        }
      }
      const sorted = (m: Map<number, number[]>, every: number) => [...m.get(every)!].sort((a, b) => a - b);
      const median = (every: number, m = times) => sorted(m, every)[Math.floor(sorted(m, every).length / 2)];
      const min = (every: number) => sorted(times, every)[0];
      const off = median(0);
      const modes = MODES.map((every) => {
        const s = seen.get(every) ?? { count: 0, bytes: 0, width: 0, height: 0 };
        return {
          everySteps: every,
          medianMs: median(every),
          overheadPct: ((median(every) - off) / off) * 100,
          minMs: min(every),
          minOverheadPct: ((min(every) - min(0)) / min(0)) * 100,
          cpuMs: median(every, cpu),
          cpuOverheadPct: ((median(every, cpu) - median(0, cpu)) / median(0, cpu)) * 100,
          previews: Math.round(s.count / reps),
          meanBytes: s.count > 0 ? s.bytes / s.count : 0,
          width: s.width,
          height: s.height,
        };
      });
      out.push({ label: c.label, steps, modes, msPerPreview: (median(1) - off) / steps });
    }
  } finally {
    await mesh.close();
  }
  return { threads, reps, costCalls, cases: out, costs: runPreviewCosts(costCalls) };
}

async function runOnce(
  mesh: Awaited<ReturnType<typeof startEmbedded>>,
  c: PreviewCase,
  every: number,
  rep: number,
  steps: number,
): Promise<{ runMs: number; cpuMs: number; previews: Array<Extract<RequestEvent, { type: 'preview' }>> }> {
  const cpu0 = process.cpuUsage();
  const { context } = await mesh.scheduler.submit({
    model: c.model,
    params: {
      prompt: 'a cat on a sofa',
      numInferenceSteps: steps,
      seed: String(rep),
      ...c.params,
      ...(every > 0 ? { preview: { everySteps: every, maxSide: 256 } } : {}),
    },
  });
  const events: RequestEvent[] = [];
  for await (const e of mesh.scheduler.watch(context.reqId)) events.push(e);
  const used = process.cpuUsage(cpu0);
  await mesh.store.deleteRequest(context.reqId);
  const done = events.find((e) => e.type === 'stage_finished' && e.stage === 'denoising');
  if (done?.type !== 'stage_finished') throw new Error(`${c.label}: the request ended with ${JSON.stringify(events.at(-1)?.type)}`);
  return {
    runMs: done.runMs,
    cpuMs: (used.user + used.system) / 1000,
    previews: events.filter((e): e is Extract<RequestEvent, { type: 'preview' }> => e.type === 'preview'),
  };
}

export function formatPreviewBench(r: PreviewBenchResult): string {
  const lines = [
    `Live previews: the denoising loop's time (median and fastest of ${r.reps} requests, ${r.cases[0]?.steps ?? 0} steps, ${r.threads} intra-op threads, CFG batch 2) and the process's CPU time per request (all threads, median), previews off vs every 4 steps vs every step, interleaved`,
    '',
    '| model | previews | loop ms (median) | overhead | loop ms (fastest) | overhead | CPU ms | overhead | previews/request | size | PNG bytes |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|',
  ];
  const pct = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(1)}%`;
  for (const c of r.cases) {
    for (const m of c.modes) {
      const off = m.everySteps === 0;
      lines.push(
        `| ${c.label} | ${off ? 'off' : `every ${m.everySteps}`} | ${m.medianMs.toFixed(0)} | ${off ? '–' : pct(m.overheadPct)} | ${m.minMs.toFixed(0)} | ${
          off ? '–' : pct(m.minOverheadPct)
        } | ${m.cpuMs.toFixed(0)} | ${off ? '–' : pct(m.cpuOverheadPct)} | ${m.previews} | ${off ? '–' : `${m.width}×${m.height}`} | ${
          off ? '–' : m.meanBytes.toFixed(0)
        } |`,
      );
    }
  }
  lines.push('');
  lines.push(
    'One preview costs the loop (every-step − off) / steps: ' +
      r.cases.map((c) => `${c.label} ${c.msPerPreview.toFixed(2)} ms`).join(', ') +
      ' (differences within run-to-run noise can come out negative).',
  );
  const step = r.cases[0] ? r.cases[0].modes[0].medianMs / r.cases[0].steps : undefined;
  lines.push('');
  lines.push(
    `One preview made alone (latent → RGB, sampled down to max_side, PNG), median of ${r.costCalls} calls${
      step !== undefined ? `; "every step" overhead = preview ms / ${r.cases[0].label}'s step (${step.toFixed(1)} ms)` : ''
    }:`,
  );
  lines.push('');
  lines.push('| latent | preview | PNG bytes | ms per preview | every-step overhead |');
  lines.push('|---|---|---:|---:|---:|');
  for (const c of r.costs) {
    lines.push(
      `| ${c.label} | ${c.width}×${c.height} | ${c.bytes} | ${c.medianMs.toFixed(3)} | ${step !== undefined ? `${((c.medianMs / step) * 100).toFixed(2)}%` : '–'} |`,
    );
  }
  return lines.join('\n');
}
