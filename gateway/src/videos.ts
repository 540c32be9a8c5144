/**
 * Asynchronous video jobs (`/v1/videos`): each job is one scheduler request, submitted with
 * Submit and followed with Watch. The job keeps the pixels' ObjectRef; the clip is encoded
 * when first downloaded (MP4 when ffmpeg runs, else an animated GIF) and kept with the job
 * until it expires.
 */
import type { RequestEvent__Output, SubmitRequest } from '@diffmesh/protos';
import { Code, DiffmeshError, errorDetailFromWire, fromWire, objectRefFromWire, type Logger, type ObjectRef } from '@diffmesh/core';
import { encodeImage, encodeVideo, ffmpegAvailable } from '@diffmesh/media';
import { type TensorStore } from '@diffmesh/tensor-client';
import { gatewayError } from './errors.js';
import { fetchFrames } from './media.js';
import type { SchedulerClient } from '@diffmesh/client';

export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';

/** What a video job was asked for, after validation and defaults. */
export interface VideoSpec {
  model: string;
  prompt: string;
  width: number;
  height: number;
  numFrames: number;
  fps: number;
  /** Pipeline stages of the model's plan, for the progress figure. */
  stages: string[];
  request: SubmitRequest;
}

interface VideoJob {
  id: string;
  reqId: string;
  /** Identity (tenant or API key) that created it; undefined when authentication was off. */
  owner?: string;
  /** The scheduler client it was created through (the creator's key rides on its calls). */
  api: SchedulerClient;
  /** What it was asked for, without the request itself (which may carry an input image's bytes). */
  spec: Omit<VideoSpec, 'request'>;
  status: VideoStatus;
  progress: number;
  createdAt: number;
  completedAt?: number;
  expiresAt?: number;
  error?: { code: string; message: string };
  pixels?: ObjectRef;
  content?: Promise<{ bytes: Uint8Array; mimeType: string; format: string }>;
  follow: AbortController;
  timer?: NodeJS.Timeout;
}

/** The OpenAI-style video object. */
export type VideoObject = Record<string, unknown>;

const TERMINAL = new Set<VideoStatus>(['completed', 'failed', 'cancelled']);
/** How much of the work each stage is, for progress: denoising dominates. */
const STAGE_WEIGHT: Record<string, number> = { denoising: 8 };

export interface VideoJobsOptions {
  api: SchedulerClient;
  store: TensorStore;
  ttlMs: number;
  maxJobs: number;
  ffmpegPath: string;
  log: Logger;
}

const seconds = (ms: number): number => Math.floor(ms / 1000);

export class VideoJobs {
  private readonly jobs = new Map<string, VideoJob>();
  /** Slots held by creations waiting for their Submit: they count against `maxJobs` too. */
  private reserved = 0;

  constructor(private readonly opts: VideoJobsOptions) {}

  /** Submits the request and starts following it. `owner` alone will see the job (undefined: everyone). */
  async create(
    spec: VideoSpec,
    owner: string | undefined,
    signal?: AbortSignal,
    api: SchedulerClient = this.opts.api,
  ): Promise<VideoObject> {
    // The slot is taken before the await, so concurrent creations cannot all pass the cap.
    this.makeRoom();
    this.reserved += 1;
    let res: Awaited<ReturnType<SchedulerClient['submit']>>;
    try {
      res = await api.submit(spec.request, signal ? { signal } : {});
    } finally {
      this.reserved -= 1;
    }
    const { request: _submitted, ...kept } = spec;
    const job: VideoJob = {
      id: `video_${res.reqId}`,
      reqId: res.reqId,
      ...(owner !== undefined ? { owner } : {}),
      api,
      spec: kept,
      status: 'queued',
      progress: 0,
      createdAt: Date.now(),
      follow: new AbortController(),
    };
    this.jobs.set(job.id, job);
    void this.followJob(job);
    return this.toObject(job);
  }

  private makeRoom(): void {
    if (this.jobs.size + this.reserved < this.opts.maxJobs) return;
    const oldest = [...this.jobs.values()].filter((j) => TERMINAL.has(j.status)).sort((a, b) => a.createdAt - b.createdAt)[0];
    if (!oldest) {
      throw gatewayError(
        Code.RESOURCE_EXHAUSTED,
        'TOO_MANY_REQUESTS',
        `the gateway already follows ${this.opts.maxJobs} video jobs; retry later`,
        {
          retryAfterMs: 5000,
        },
      );
    }
    this.drop(oldest);
  }

  /** Whether `owner` may see `job`: its own, or one created with authentication off. */
  private static visible(job: VideoJob, owner: string | undefined): boolean {
    return job.owner === undefined || job.owner === owner;
  }

  /** The job `id` if `owner` may see it (another key's job is as unknown as a missing one). */
  private find(id: string, owner: string | undefined): VideoJob | undefined {
    const job = this.jobs.get(id);
    return job && VideoJobs.visible(job, owner) ? job : undefined;
  }

  get(id: string, owner: string | undefined): VideoObject | undefined {
    const job = this.find(id, owner);
    return job ? this.toObject(job) : undefined;
  }

  /** The jobs `owner` may see, newest first. */
  list(owner: string | undefined): VideoObject[] {
    return [...this.jobs.values()]
      .filter((j) => VideoJobs.visible(j, owner))
      .sort((a, b) => b.createdAt - a.createdAt)
      .map((j) => this.toObject(j));
  }

  /**
   * DELETE: a running job is cancelled (the scheduler's Cancel) and stays visible with status
   * `cancelled`; a finished one is deleted with its result.
   */
  async delete(id: string, owner: string | undefined): Promise<VideoObject | undefined> {
    const job = this.find(id, owner);
    if (!job) return undefined;
    if (TERMINAL.has(job.status)) {
      this.drop(job);
      return { id: job.id, object: 'video.deleted', deleted: true };
    }
    const res = await job.api.cancel(job.reqId, 'cancelled through the video API');
    if (res.status === 'REQUEST_STATUS_CANCELLED') this.finish(job, 'cancelled');
    return this.toObject(job);
  }

  /** The clip (or its first frame as PNG for `thumbnail`), once the job completed. */
  async content(
    id: string,
    variant: string,
    owner: string | undefined,
  ): Promise<{ bytes: Uint8Array; mimeType: string; format: string } | undefined> {
    const job = this.find(id, owner);
    if (!job) return undefined;
    if (job.status !== 'completed' || !job.pixels) {
      throw new DiffmeshError(
        Code.FAILED_PRECONDITION,
        'INVALID_PARAMETER',
        `video ${id} is ${job.status}; its content is available once it is completed`,
        {
          metadata: { field: 'video_id' },
        },
      );
    }
    const pixels = job.pixels;
    if (variant === 'thumbnail') {
      const { width, height, frames } = await fetchFrames(this.opts.store, pixels);
      return { bytes: await encodeImage({ width, height, data: frames[0] }, 'png'), mimeType: 'image/png', format: 'png' };
    }
    if (variant !== 'video') {
      throw gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `unsupported variant "${variant}" (use video or thumbnail)`, {
        field: 'variant',
      });
    }
    job.content ??= (async () => {
      const { width, height, frames } = await fetchFrames(this.opts.store, pixels);
      const format = (await ffmpegAvailable(this.opts.ffmpegPath)) ? 'mp4' : 'gif';
      const encoded = await encodeVideo(frames, { width, height, fps: job.spec.fps, format, ffmpegPath: this.opts.ffmpegPath });
      return { bytes: encoded.bytes, mimeType: encoded.mimeType, format };
    })();
    try {
      return await job.content;
    } catch (err) {
      job.content = undefined; // let a later download try again
      throw err;
    }
  }

  private async followJob(job: VideoJob): Promise<void> {
    let stageIndex = 0;
    const weights = job.spec.stages.map((s) => STAGE_WEIGHT[s] ?? 1);
    const total = weights.reduce((a, b) => a + b, 0) || 1;
    const progressAt = (index: number, fraction: number): number => {
      const done = weights.slice(0, index).reduce((a, b) => a + b, 0) + (weights[index] ?? 0) * fraction;
      return Math.min(99, Math.floor((100 * done) / total));
    };
    try {
      for await (const e of job.api.watch(job.reqId, { signal: job.follow.signal })) {
        if (TERMINAL.has(job.status)) break;
        this.apply(job, e, {
          stage: (i) => (stageIndex = i),
          progress: (p) => (job.progress = Math.max(job.progress, p)),
          at: progressAt,
          index: () => stageIndex,
        });
      }
      if (!TERMINAL.has(job.status)) {
        // The stream ended without a final event: ask for the request's state.
        const state = await job.api.get(job.reqId);
        if (state.status === 'REQUEST_STATUS_CANCELLED') this.finish(job, 'cancelled');
        else if (state.status === 'REQUEST_STATUS_COMPLETED' && state.results[0])
          this.complete(job, objectRefFromWire(state.results.find((r) => r.name === 'pixels') ?? state.results[0]));
        else if (state.status === 'REQUEST_STATUS_FAILED')
          this.fail(job, state.error ? errorDetailFromWire(state.error) : new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'request failed'));
      }
    } catch (err) {
      if (job.follow.signal.aborted) return;
      this.opts.log.warn({ err, job: job.id }, 'lost track of a video job');
      this.fail(job, fromWire(err));
    }
  }

  private apply(
    job: VideoJob,
    e: RequestEvent__Output,
    p: { stage(i: number): void; progress(v: number): void; at(i: number, f: number): number; index(): number },
  ): void {
    if (e.stageStarted) {
      job.status = 'in_progress';
      p.stage(e.stageStarted.stageIndex);
      p.progress(p.at(e.stageStarted.stageIndex, 0));
    } else if (e.stepProgress) {
      job.status = 'in_progress';
      const s = e.stepProgress;
      p.stage(s.stageIndex);
      p.progress(p.at(s.stageIndex, s.totalSteps > 0 ? s.step / s.totalSteps : 0));
    } else if (e.stageFinished) {
      const i = e.stageFinished.timing?.stageIndex ?? p.index();
      p.progress(p.at(i + 1, 0));
    } else if (e.completed) {
      const ref = e.completed.results.find((r) => r.name === 'pixels') ?? e.completed.results[0];
      if (ref) this.complete(job, objectRefFromWire(ref));
      else this.fail(job, new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'request completed without pixels'));
    } else if (e.failed) {
      this.fail(job, e.failed.error ? errorDetailFromWire(e.failed.error) : new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'request failed'));
    } else if (e.cancelled) {
      this.finish(job, 'cancelled');
    }
  }

  private complete(job: VideoJob, pixels: ObjectRef): void {
    job.pixels = pixels;
    job.progress = 100;
    this.finish(job, 'completed');
    // The tensor service must keep the pixels as long as the job is downloadable.
    this.opts.store
      .touch(pixels, this.opts.ttlMs)
      .catch((err: unknown) => this.opts.log.warn({ err, job: job.id }, 'could not extend the TTL of a video result'));
  }

  private fail(job: VideoJob, err: DiffmeshError): void {
    job.error = { code: err.reason.toLowerCase(), message: err.message };
    this.finish(job, 'failed');
  }

  private finish(job: VideoJob, status: VideoStatus): void {
    if (TERMINAL.has(job.status)) return;
    job.status = status;
    job.completedAt = Date.now();
    job.expiresAt = job.completedAt + this.opts.ttlMs;
    job.timer = setTimeout(() => this.drop(job), this.opts.ttlMs);
    job.timer.unref();
  }

  private drop(job: VideoJob): void {
    this.jobs.delete(job.id);
    job.follow.abort();
    if (job.timer) clearTimeout(job.timer);
    if (job.pixels) {
      this.opts.store
        .delete(job.pixels)
        .catch((err: unknown) => this.opts.log.debug({ err, job: job.id }, 'could not delete a video result'));
    }
  }

  private toObject(job: VideoJob): VideoObject {
    const s = job.spec;
    return {
      id: job.id,
      object: 'video',
      model: s.model,
      status: job.status,
      progress: job.progress,
      created_at: seconds(job.createdAt),
      completed_at: job.completedAt !== undefined ? seconds(job.completedAt) : null,
      expires_at: job.expiresAt !== undefined ? seconds(job.expiresAt) : null,
      prompt: s.prompt,
      size: `${s.width}x${s.height}`,
      seconds: String(Math.round((s.numFrames / s.fps) * 100) / 100),
      num_frames: s.numFrames,
      fps: s.fps,
      request_id: job.reqId,
      error: job.error ?? null,
      remixed_from_video_id: null,
    };
  }

  /** Stops following every job (their requests go on in the mesh). */
  close(): void {
    for (const job of this.jobs.values()) {
      job.follow.abort();
      if (job.timer) clearTimeout(job.timer);
    }
  }
}
