/**
 * `model-dirs`: the time per denoising step of each test model directory in the
 * diffusers/optimum ONNX layout (`models/src/diffusers/`), served by the embedded runtime: a
 * request's denoising stage time divided by its model calls (20 steps), median of `reps`
 * requests, at the directory's 64×64 default with classifier-free guidance where the pipeline
 * uses it (batch 2).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbedded } from '@diffmesh/cli';
import { silentLogger, type RequestEvent } from '@diffmesh/core';
import { buildTestModelDirs, TEST_MODEL_DIRS } from '@diffmesh/models';

export interface ModelDirTiming {
  name: string;
  layout: string;
  precision: string;
  scheduler: string;
  steps: number;
  /** Items per denoiser run: 2 with CFG, 1 otherwise. */
  batch: number;
  medianMs: number;
  p90Ms: number;
}

/** Runs `reps` requests of `steps` steps against every non-broken test directory. */
export async function runModelDirTimings(reps: number, steps = 20, threads = 1): Promise<ModelDirTiming[]> {
  const root = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-dirs-'));
  // Broken directories do not load; sd1-slow's extra work only makes the figures longer.
  const names = Object.keys(TEST_MODEL_DIRS).filter((n) => TEST_MODEL_DIRS[n].layout !== 'broken' && n !== 'sd1-slow');
  try {
    const dirs = await buildTestModelDirs(root, names);
    const mesh = await startEmbedded({
      modelRoots: [],
      modelDirectories: Object.values(dirs),
      intraOpThreads: threads,
      maxBatch: 8,
      log: silentLogger(),
    });
    const out: ModelDirTiming[] = [];
    try {
      for (const name of names) {
        const entry = mesh.registry.lookup(dirs[name]);
        const preset = TEST_MODEL_DIRS[name] as { layout: string; options: { precision?: string } };
        const guidance = preset.layout === 'flux' ? 3.5 : 2;
        const perStep: number[] = [];
        // FLUX takes guidance as an input (one pass); the others run CFG at guidance 2.
        const batch = preset.layout === 'flux' ? 1 : 2;
        for (let r = 0; r <= reps; r += 1) {
          const { context } = await mesh.scheduler.submit({
            model: entry.model as string,
            params: { prompt: 'a red cat', guidanceScale: guidance, numInferenceSteps: steps, seed: String(r) },
          });
          const events: RequestEvent[] = [];
          for await (const e of mesh.scheduler.watch(context.reqId)) events.push(e);
          const calls = events.filter((e) => e.type === 'progress' && e.stage === 'denoising').length;
          const done = events.find((e) => e.type === 'stage_finished' && e.stage === 'denoising');
          await mesh.store.deleteRequest(context.reqId);
          // The first request loads the sessions: not timed.
          if (r > 0 && done?.type === 'stage_finished' && calls > 0) perStep.push(done.runMs / calls);
        }
        perStep.sort((a, b) => a - b);
        out.push({
          name,
          layout: preset.layout,
          precision: preset.options.precision ?? 'fp32',
          scheduler: await schedulerClass(dirs[name]),
          steps,
          batch,
          medianMs: perStep[Math.floor(perStep.length / 2)],
          p90Ms: perStep[Math.min(perStep.length - 1, Math.floor(perStep.length * 0.9))],
        });
      }
    } finally {
      await mesh.close();
    }
    return out;
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

async function schedulerClass(dir: string): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  const cfg = JSON.parse(await readFile(path.join(dir, 'scheduler', 'scheduler_config.json'), 'utf8')) as { _class_name?: string };
  return cfg._class_name ?? '?';
}

export function formatModelDirTimings(rows: ModelDirTiming[]): string {
  const head = ['directory', 'layout', 'dtype', 'scheduler', 'batch', 'ms/step p50', 'p90'];
  const body = rows.map((r) => [r.name, r.layout, r.precision, r.scheduler, String(r.batch), r.medianMs.toFixed(2), r.p90Ms.toFixed(2)]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
  return [
    'Time per denoising step of the test model directories (64×64, embedded, 1 intra-op thread; stage time / model calls):',
    line(head),
    ...body.map(line),
  ].join('\n');
}
