/**
 * `step-cache`: what step caching (TeaCache-style, see dit-svc's README) saves and what it
 * costs in pixels. For each of the project's built-in DiT models and each diffusers-layout
 * test model directory, one request per setting at the same seed, served by the embedded
 * runtime: with caching off (the reference) and at thresholds 0.05–0.4 with at most 2 (and,
 * at the largest threshold, 3) skipped steps in a row. Reported: denoiser model calls run of
 * those an uncached run makes, the share saved, and the decoded picture's error against the
 * reference (mean absolute error on 0–255, and PSNR). No times: a skipped call saves its
 * whole run (the cache's own cost is one pass over the latent), and on a shared machine one
 * run's time says less than the count.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbedded } from '@diffmesh/cli';
import { silentLogger, type GenerationParams, type RequestEvent, type StepCacheParams } from '@diffmesh/core';
import { buildTestModelDirs, defaultModelsRoot, TEST_MODEL_DIRS } from '@diffmesh/models';

/** The settings every model runs at; the first (off) is the reference. */
export const STEP_CACHE_SETTINGS: ReadonlyArray<Required<StepCacheParams>> = [
  { threshold: 0, maxSkippedSteps: 0 },
  { threshold: 0.05, maxSkippedSteps: 2 },
  { threshold: 0.1, maxSkippedSteps: 2 },
  { threshold: 0.2, maxSkippedSteps: 2 },
  { threshold: 0.4, maxSkippedSteps: 2 },
  { threshold: 0.4, maxSkippedSteps: 3 },
];

export interface StepCacheRow {
  model: string;
  /** What kind of model: `built-in`, or the directory's layout. */
  kind: string;
  steps: number;
  threshold: number;
  maxSkippedSteps: number;
  /** Denoiser model calls run, and those a run without caching makes. */
  calls: number;
  totalCalls: number;
  /** Against the uncached picture: mean absolute error on 0–255, PSNR in dB (Infinity when equal). */
  mae: number;
  psnr: number;
}

interface Target {
  model: string;
  label: string;
  kind: string;
  params: Partial<GenerationParams>;
}

const BUILT_IN: Target[] = [
  {
    model: 'diffmesh/tiny-shapes',
    label: 'diffmesh/tiny-shapes',
    kind: 'built-in',
    params: { prompt: 'a red circle on a blue background' },
  },
  { model: 'diffmesh/synthetic-dit-image', label: 'diffmesh/synthetic-dit-image', kind: 'built-in', params: { prompt: 'a red cat' } },
  {
    model: 'diffmesh/synthetic-dit-video',
    label: 'diffmesh/synthetic-dit-video',
    kind: 'built-in',
    params: { prompt: 'a red cat', numFrames: 5, width: 128, height: 128 },
  },
];

/** Runs every target at every setting (the first, the reference, must be off), `steps` steps each. */
export async function runStepCacheBench(
  steps = 20,
  settings: ReadonlyArray<Required<StepCacheParams>> = STEP_CACHE_SETTINGS,
): Promise<StepCacheRow[]> {
  const root = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-step-cache-'));
  // Broken directories do not load; sd1-slow is only slower.
  const names = Object.keys(TEST_MODEL_DIRS).filter((n) => TEST_MODEL_DIRS[n].layout !== 'broken' && n !== 'sd1-slow');
  try {
    const dirs = await buildTestModelDirs(root, names);
    const mesh = await startEmbedded({
      modelRoots: [defaultModelsRoot()],
      modelDirectories: Object.values(dirs),
      intraOpThreads: 2,
      maxBatch: 8,
      log: silentLogger(),
    });
    const targets: Target[] = [
      ...BUILT_IN,
      ...names.map((name) => {
        const layout = (TEST_MODEL_DIRS[name] as { layout: string }).layout;
        // FLUX takes guidance as an input (one call a step); the others run CFG at guidance 2.
        return {
          model: mesh.registry.lookup(dirs[name]).model as string,
          label: name,
          kind: layout,
          params: { prompt: 'a red cat', guidanceScale: layout === 'flux' ? 3.5 : 2 },
        };
      }),
    ];
    const rows: StepCacheRow[] = [];
    try {
      for (const t of targets) {
        let reference: { pixels: Uint8Array; calls: number } | undefined;
        // A first uncached run loads the sessions (left out of the table).
        for (const [k, setting] of [settings[0], ...settings].entries()) {
          const { context } = await mesh.scheduler.submit({
            model: t.model,
            params: { ...t.params, prompt: t.params.prompt ?? '', numInferenceSteps: steps, seed: '7', stepCache: setting },
          });
          const events: RequestEvent[] = [];
          for await (const e of mesh.scheduler.watch(context.reqId)) events.push(e);
          const end = events[events.length - 1];
          if (end.type !== 'completed') throw new Error(`${t.label}: ${JSON.stringify(end)}`);
          const done = events.find((e) => e.type === 'stage_finished' && e.stage === 'denoising');
          if (done?.type !== 'stage_finished') throw new Error(`${t.label}: no denoising stage`);
          const pixels = new Uint8Array((await mesh.store.get(end.outputs.pixels)).data);
          await mesh.store.deleteRequest(context.reqId);
          if (k === 0) continue;
          const callsPerStep = guided(context.params, t.kind) ? 2 : 1;
          const total = steps * callsPerStep;
          const skipped = skippedCalls(done.warnings);
          reference ??= { pixels, calls: total };
          const { mae, psnr } = pixelError(reference.pixels, pixels);
          rows.push({
            model: t.label,
            kind: t.kind,
            steps,
            threshold: setting.threshold,
            maxSkippedSteps: setting.maxSkippedSteps,
            calls: total - skipped,
            totalCalls: total,
            mae,
            psnr,
          });
        }
      }
    } finally {
      await mesh.close();
    }
    return rows;
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Whether a step makes two model calls (classifier-free guidance), as the denoising stage decides. */
function guided(p: GenerationParams, kind: string): boolean {
  if (kind === 'built-in') return p.guidanceScale !== 1;
  return kind !== 'flux' && p.guidanceScale > 1;
}

/** The model calls the stage's step-cache warning says it skipped (0 without one). */
function skippedCalls(warnings: string[] | undefined): number {
  for (const w of warnings ?? []) {
    const m = /\((\d+) of \d+ model calls skipped\)/.exec(w);
    if (m) return Number(m[1]);
  }
  return 0;
}

/** Mean absolute error (0–255) and PSNR (dB) of `b` against `a`. */
export function pixelError(a: Uint8Array, b: Uint8Array): { mae: number; psnr: number } {
  if (a.length !== b.length) throw new Error(`pictures differ in size: ${a.length} vs ${b.length}`);
  let abs = 0;
  let sq = 0;
  for (let i = 0; i < a.length; i += 1) {
    const d = a[i] - b[i];
    abs += Math.abs(d);
    sq += d * d;
  }
  const mse = sq / a.length;
  return { mae: abs / a.length, psnr: mse === 0 ? Infinity : 10 * Math.log10((255 * 255) / mse) };
}

export function formatStepCacheBench(rows: StepCacheRow[]): string {
  const head = ['model', 'kind', 'threshold', 'max skip', 'calls run/total', 'saved', 'MAE (0–255)', 'PSNR dB'];
  const body = rows.map((r) => [
    r.model,
    r.kind,
    r.threshold === 0 ? 'off' : String(r.threshold),
    r.threshold === 0 ? '–' : String(r.maxSkippedSteps),
    `${r.calls}/${r.totalCalls}`,
    `${(100 * (1 - r.calls / r.totalCalls)).toFixed(0)}%`,
    r.mae.toFixed(2),
    Number.isFinite(r.psnr) ? r.psnr.toFixed(1) : '∞',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
  const steps = rows[0]?.steps ?? 0;
  return [
    `Step caching: denoiser model calls and pixel error against the uncached picture (${steps} steps, seed 7, embedded, 2 intra-op threads;`,
    'built-in models at their default size (the video at 128×128, 5 frames), test directories at 64×64):',
    line(head),
    ...body.map(line),
  ].join('\n');
}
