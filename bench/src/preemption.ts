/**
 * Step-boundary preemption: short images arriving at a steady rate while long videos saturate
 * the DiT pool, with preemption off and on, side by side.
 *
 * A mesh of processes (tiny-shapes, one dit-svc slot) per case. Each case queues `videos`
 * videos (8 frames × 50 steps, priority 0) at once, then sends an image (4 steps) every
 * `intervalMs`. Two variants: `priority` (images at priority 10) and `deadline` (images at
 * priority 0 with a deadline `sloMs` after they are sent; `--deadline-policy best-effort`, so a
 * late image still runs and counts as missed). Reported per case: the images' latency (send to
 * completed) p50/p99, their time to start (queued for the DiT to running on it) p50/p99, how
 * many met the SLO (`sloMs` from send: the deadline, or the same bound for the priority
 * variant), the preemptions, and the videos' throughput (videos per minute from the first
 * submit to the last video's end) with its loss against preemption off.
 */
import * as grpc from '@grpc/grpc-js';
import { startLocalMesh } from '@diffmesh/cli';
import { schedulerStub, type SchedulerStub } from '@diffmesh/client';
import { paramsToWire, silentLogger, timestampToWire, type GenerationParams } from '@diffmesh/core';
import { defaultModelsRoot } from '@diffmesh/models';
import type { GenerateResponse__Output } from '@diffmesh/protos';
import { pct } from './mesh.js';

export interface PreemptionOptions {
  /** Videos queued at the start of each case. Default 3. */
  videos?: number;
  /** Images sent per case. Default 10. */
  images?: number;
  /** Between two images, ms. Default 800. */
  intervalMs?: number;
  /** The images' deadline (deadline variant) and SLO (both), ms from send. Default 1500. */
  sloMs?: number;
  /** Denoising steps of each video. Default 50. */
  videoSteps?: number;
}

export interface PreemptionRow {
  variant: 'priority' | 'deadline';
  preemption: 'off' | 'on';
  images: number;
  p50: number;
  p99: number;
  startP50: number;
  startP99: number;
  /** Images completed within the SLO (the deadline). */
  metSlo: number;
  failed: number;
  preemptions: number;
  /** Videos completed per minute over the case. */
  videosPerMinute: number;
  /** Median DiT step of the videos during the case (ms), for "within a step". */
  videoStepMs: number;
}

export interface PreemptionResult {
  opts: Required<PreemptionOptions>;
  /** An image alone on an idle pool, ms (send to completed). */
  imageAloneMs: number;
  rows: PreemptionRow[];
}

const MODEL = 'diffmesh/tiny-shapes';
const VIDEO: Partial<GenerationParams> & { prompt: string } = {
  prompt: 'a green square moving right',
  seed: '7',
  // Big enough that a step takes tens of ms (tiny-shapes is cheap): a video is seconds.
  width: 512,
  height: 512,
  numFrames: 8,
  // Its steps: PreemptionOptions.videoSteps.
};
const IMAGE: Partial<GenerationParams> & { prompt: string } = {
  prompt: 'a red circle',
  seed: '3',
  width: 64,
  height: 64,
  numInferenceSteps: 4,
};

interface Outcome {
  sentAt: number;
  endAt: number;
  ok: boolean;
  /** DiT queue → DiT start, ms. */
  startMs: number;
  preempted: number;
  stepAts: number[];
}

function run(client: SchedulerStub, params: Partial<GenerationParams>, priority: number, deadline?: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const sentAt = Date.now();
    const call = client.Generate({
      model: MODEL,
      params: paramsToWire(params),
      priority,
      ...(deadline ? { deadline: timestampToWire(deadline) } : {}),
    });
    let queuedAt = 0;
    let startMs = NaN;
    let ok = false;
    let preempted = 0;
    const stepAts: number[] = [];
    call.on('data', (msg: GenerateResponse__Output) => {
      for (const e of msg.events) {
        const at = e.time ? Number(e.time.seconds) * 1000 + Math.floor(e.time.nanos / 1e6) : Date.now();
        if (e.queued?.stage === 'STAGE_NAME_DENOISING' && !queuedAt) queuedAt = at;
        if (e.stageStarted?.stage === 'STAGE_NAME_DENOISING' && Number.isNaN(startMs)) startMs = at - queuedAt;
        if (e.stepProgress?.stage === 'STAGE_NAME_DENOISING') stepAts.push(at);
        if (e.preempted) preempted += 1;
        if (e.completed) ok = true;
      }
    });
    const done = (): void => resolve({ sentAt, endAt: Date.now(), ok, startMs, preempted, stepAts });
    call.on('error', done);
    call.on('end', done);
  });
}

async function measure(
  variant: PreemptionRow['variant'],
  preemption: PreemptionRow['preemption'],
  o: Required<PreemptionOptions>,
): Promise<{ row: PreemptionRow; imageAloneMs: number }> {
  const mesh = await startLocalMesh({
    modelsDirs: [defaultModelsRoot()],
    models: [MODEL],
    threads: 1,
    log: silentLogger(),
    capacities: { 'dit-svc': 1 },
    stageArgs: ['--progress-interval-ms', '0'],
    schedulerArgs: ['--preemption', preemption, '--preempt-min-run-ms', '200', '--deadline-policy', 'best-effort'],
  });
  const client = schedulerStub(mesh.schedulerAddress);
  try {
    // Warm-up: loads the sessions and gives the scheduler measured step times.
    // A short video of the same shape: its sessions and the VAE's are warm, and its run is a measured sample.
    await run(client, { ...VIDEO, numInferenceSteps: 3 }, 0);
    await run(client, IMAGE, 0);
    const image = await run(client, IMAGE, 0);
    const t0 = Date.now();
    const videos = Array.from({ length: o.videos }, () => run(client, { ...VIDEO, numInferenceSteps: o.videoSteps }, 0));
    // Let the videos reach the DiT (the text encoder is fast).
    await new Promise((r) => setTimeout(r, 300));
    const images: Array<Promise<Outcome>> = [];
    for (let i = 0; i < o.images; i += 1) {
      images.push(variant === 'priority' ? run(client, IMAGE, 10) : run(client, IMAGE, 0, Date.now() + o.sloMs));
      await new Promise((r) => setTimeout(r, o.intervalMs));
    }
    const doneImages = await Promise.all(images);
    const doneVideos = await Promise.all(videos);
    const videosEnd = Math.max(...doneVideos.map((v) => v.endAt));
    // The videos' steps as they ran in this case (the images' text encoding and the videos' VAE
    // decoding share the machine with them); a preemption's gap is one interval among many.
    const steps = doneVideos.flatMap((v) => v.stepAts.slice(1).map((at, i) => at - v.stepAts[i])).sort((a, b) => a - b);
    const lat = doneImages
      .filter((x) => x.ok)
      .map((x) => x.endAt - x.sentAt)
      .sort((a, b) => a - b);
    const starts = doneImages
      .filter((x) => x.ok)
      .map((x) => x.startMs)
      .sort((a, b) => a - b);
    return {
      imageAloneMs: image.endAt - image.sentAt,
      row: {
        variant,
        preemption,
        images: doneImages.length,
        p50: pct(lat, 50),
        p99: pct(lat, 99),
        startP50: pct(starts, 50),
        startP99: pct(starts, 99),
        metSlo: doneImages.filter((x) => x.ok && x.endAt - x.sentAt <= o.sloMs).length,
        failed: doneImages.filter((x) => !x.ok).length + doneVideos.filter((x) => !x.ok).length,
        preemptions: doneVideos.reduce((n, v) => n + v.preempted, 0),
        videosPerMinute: (doneVideos.filter((v) => v.ok).length * 60_000) / (videosEnd - t0),
        videoStepMs: steps[Math.floor(steps.length / 2)] ?? NaN,
      },
    };
  } finally {
    (client as unknown as grpc.Client).close();
    await mesh.stop();
  }
}

export async function runPreemption(opts: PreemptionOptions = {}): Promise<PreemptionResult> {
  const o: Required<PreemptionOptions> = { videos: 3, images: 10, intervalMs: 800, sloMs: 1500, videoSteps: 50, ...opts };
  const rows: PreemptionRow[] = [];
  let imageAloneMs = NaN;
  for (const variant of ['priority', 'deadline'] as const) {
    for (const preemption of ['off', 'on'] as const) {
      const r = await measure(variant, preemption, o);
      rows.push(r.row);
      if (Number.isNaN(imageAloneMs)) imageAloneMs = r.imageAloneMs;
    }
  }
  return { opts: o, imageAloneMs, rows };
}

export function formatPreemption(r: PreemptionResult): string {
  const { opts: o } = r;
  const lines = [
    `Preemption: ${o.videos} videos (tiny-shapes ${VIDEO.width}×${VIDEO.height}, ${VIDEO.numFrames} frames × ${o.videoSteps} steps, priority 0) fill a one-slot DiT pool;`,
    `an image (${IMAGE.width}×${IMAGE.height}, ${IMAGE.numInferenceSteps} steps) every ${o.intervalMs} ms, ${o.images} in all: priority 10, or priority 0 with a deadline ${o.sloMs} ms after it is sent.`,
    `An image alone: ${r.imageAloneMs.toFixed(0)} ms. SLO = ${o.sloMs} ms from send. Video loss: videos/min × video step against preemption off (corrects for the machine's speed between cases).`,
    '',
    '| images by  | preemption | image p50 | image p99 | start p50 | start p99 | met SLO | preemptions | videos/min | video loss | video step |',
    '|------------|------------|----------:|----------:|----------:|----------:|--------:|------------:|-----------:|-----------:|-----------:|',
  ];
  for (const row of r.rows) {
    const off = r.rows.find((x) => x.variant === row.variant && x.preemption === 'off');
    // Per step of the case's own speed (cases run one after another on a machine whose speed drifts).
    const norm = (x: PreemptionRow): number => x.videosPerMinute * x.videoStepMs;
    const loss = off && row.preemption === 'on' ? `${(((norm(off) - norm(row)) / norm(off)) * 100).toFixed(1)} %` : '—';
    lines.push(
      `| ${row.variant.padEnd(10)} | ${row.preemption.padEnd(10)} | ${ms(row.p50)} | ${ms(row.p99)} | ${ms(row.startP50)} | ${ms(row.startP99)} | ${`${row.metSlo}/${row.images}`.padStart(7)} | ${String(row.preemptions).padStart(11)} | ${row.videosPerMinute.toFixed(1).padStart(10)} | ${loss.padStart(10)} | ${ms(row.videoStepMs)} |`,
    );
    if (row.failed > 0)
      lines.push(`  (${row.failed} requests failed: an image whose deadline passed while it waited fails DEADLINE_EXCEEDED)`);
  }
  return lines.join('\n');
}

function ms(v: number): string {
  return `${Number.isFinite(v) ? v.toFixed(0) : '—'} ms`.padStart(9);
}
