import { Code, DiffmeshError, preemptedError, type Logger, type ObjectRef, type StageContext, type StageTask } from '@diffmesh/core';
import { float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import type { NoiseRngState } from './rng.js';

/** Name of the denoising checkpoint object among a task's inputs and progress. */
export const CHECKPOINT_NAME = 'denoise_checkpoint';

const MAGIC = 0x4b43_4d44; // 'DMCK' little-endian
const VERSION = 1;

/** Where a denoising run stood after `step` of `totalSteps` model steps. */
export interface DenoiseCheckpoint {
  /** Steps done: the run goes on with step index `step`. */
  step: number;
  totalSteps: number;
  /**
   * What the run is (model, seed, size, steps, guidance, …): a checkpoint of another run —
   * the request resent with other parameters under the same id — is not resumed.
   */
  fingerprint: string;
  /** The latent after `step` steps. */
  latent: Float32Array;
  /** The noise stream where it stood (ancestral and stochastic schedulers draw from it). */
  rng: NoiseRngState;
  /** The scheduler's own state (multistep history, step index), as the scheduler encodes it. */
  scheduler?: Uint8Array;
}

interface Header {
  step: number;
  totalSteps: number;
  fingerprint: string;
  rng: NoiseRngState;
  latentLength: number;
  schedulerLength: number;
}

/**
 * One object holds a checkpoint: a small header (magic, version, JSON length), the JSON
 * header, then the latent (4-byte aligned) and the scheduler state.
 */
export function encodeCheckpoint(c: DenoiseCheckpoint): Uint8Array {
  const header: Header = {
    step: c.step,
    totalSteps: c.totalSteps,
    fingerprint: c.fingerprint,
    rng: c.rng,
    latentLength: c.latent.length,
    schedulerLength: c.scheduler?.byteLength ?? 0,
  };
  const json = Buffer.from(JSON.stringify(header));
  const latentAt = align4(12 + json.byteLength);
  const out = new Uint8Array(latentAt + c.latent.byteLength + header.schedulerLength);
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, VERSION, true);
  view.setUint32(8, json.byteLength, true);
  out.set(json, 12);
  out.set(toBytes(c.latent), latentAt);
  if (c.scheduler) out.set(c.scheduler, latentAt + c.latent.byteLength);
  return out;
}

/** Reads a checkpoint object; a malformed one is DATA_LOSS. */
export function decodeCheckpoint(bytes: Uint8Array): DenoiseCheckpoint {
  const bad = (why: string): DiffmeshError =>
    new DiffmeshError(Code.DATA_LOSS, 'CHECKSUM_MISMATCH', `${CHECKPOINT_NAME}: not a denoising checkpoint (${why})`);
  if (bytes.byteLength < 12) throw bad('too short');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) throw bad('bad magic');
  if (view.getUint32(4, true) !== VERSION) throw bad(`version ${view.getUint32(4, true)}`);
  const jsonLength = view.getUint32(8, true);
  if (12 + jsonLength > bytes.byteLength) throw bad('header cut short');
  let header: Header;
  try {
    header = JSON.parse(Buffer.from(bytes.subarray(12, 12 + jsonLength)).toString('utf8')) as Header;
  } catch {
    throw bad('unreadable header');
  }
  const latentAt = align4(12 + jsonLength);
  const latentBytes = header.latentLength * 4;
  if (latentAt + latentBytes + header.schedulerLength !== bytes.byteLength) throw bad('length mismatch');
  const latent = float32View(bytes.slice(latentAt, latentAt + latentBytes));
  const scheduler = header.schedulerLength > 0 ? bytes.slice(latentAt + latentBytes) : undefined;
  return {
    step: header.step,
    totalSteps: header.totalSteps,
    fingerprint: header.fingerprint,
    rng: header.rng,
    latent,
    ...(scheduler ? { scheduler } : {}),
  };
}

function align4(n: number): number {
  return (n + 3) & ~3;
}

/** What a denoising run is, for matching a checkpoint to it. */
export function runFingerprint(task: StageTask, extra: Record<string, unknown> = {}): string {
  const p = task.params;
  return JSON.stringify({
    model: task.model,
    seed: p.seed,
    w: p.width,
    h: p.height,
    frames: p.numFrames,
    steps: p.numInferenceSteps,
    guidance: p.guidanceScale,
    strength: p.strength ?? null,
    // Only when on, so the fingerprints of runs without step caching stay as they were.
    ...(p.stepCache ? { stepCache: p.stepCache } : {}),
    ...extra,
  });
}

/** Options of {@link Checkpointer}. */
export interface CheckpointerOptions {
  store: TensorStore;
  /**
   * Save every this many steps; 0 = never on a schedule (a preempted task still keeps one where
   * it stops, and a try given a checkpoint resumes from it).
   */
  every: number;
}

/**
 * A denoising task's checkpoints: every `every` steps it stores the latent, the noise
 * stream and the scheduler state as one object of the request and reports it with the
 * step's progress; the scheduler hands the latest one to the next try of the task (on
 * another instance after this one died), which resumes from it and ends with the same bits
 * as an uninterrupted run. A checkpoint that is gone, unreadable or of another run is
 * ignored: the try starts over.
 */
export class Checkpointer {
  constructor(private readonly opts: CheckpointerOptions) {}

  /** The checkpoint to resume `task` from, if it has a usable one. */
  async resume(
    task: StageTask,
    ctx: StageContext,
    fingerprint: string,
    totalSteps: number,
    latentLength: number,
  ): Promise<DenoiseCheckpoint | undefined> {
    const ref = task.inputs[CHECKPOINT_NAME];
    if (!ref) return undefined;
    const log: Logger = ctx.log;
    try {
      const { data } = await this.opts.store.get(ref);
      const c = decodeCheckpoint(data);
      if (c.fingerprint !== fingerprint || c.totalSteps !== totalSteps || c.latent.length !== latentLength || c.step >= totalSteps) {
        log.warn({ objectId: ref.objectId }, 'checkpoint belongs to another run; starting over');
        return undefined;
      }
      log.info({ step: c.step, totalSteps }, 'resuming denoising from its checkpoint');
      return c;
    } catch (err) {
      log.warn({ err, objectId: ref.objectId }, 'checkpoint unreadable; starting over');
      return undefined;
    }
  }

  /** Whether a checkpoint is due after `stepsDone` of `totalSteps` (never after the last). */
  due(stepsDone: number, totalSteps: number): boolean {
    return this.opts.every > 0 && stepsDone < totalSteps && stepsDone % this.opts.every === 0;
  }

  /** Stores a checkpoint and reports it with the step's progress (`preempted`: the task stops here). */
  async save(
    task: StageTask,
    ctx: StageContext,
    c: DenoiseCheckpoint,
    progress: { step: number; totalSteps: number },
    opts: { preempted?: boolean } = {},
  ): Promise<ObjectRef> {
    const data = encodeCheckpoint(c);
    const ref = await this.opts.store.put({ requestId: task.reqId, name: CHECKPOINT_NAME, data, shape: [data.byteLength], dtype: 'uint8' });
    ctx.onProgress({ ...progress, checkpoint: { [CHECKPOINT_NAME]: ref }, ...(opts.preempted ? { preempted: true } : {}) });
    return ref;
  }

  /**
   * Whether the task should stop after `stepsDone` of `totalSteps` for a preemption (asked, and
   * steps remain: a task at its last step just finishes).
   */
  preempting(ctx: StageContext, stepsDone: number, totalSteps: number): boolean {
    return ctx.preempt?.aborted === true && stepsDone < totalSteps;
  }

  /** Keeps the checkpoint where a preempted task stops, reports it, and throws PREEMPTED. */
  async yieldSlot(
    task: StageTask,
    ctx: StageContext,
    c: DenoiseCheckpoint,
    progress: { step: number; totalSteps: number },
  ): Promise<never> {
    await this.save(task, ctx, c, progress, { preempted: true });
    ctx.log.info({ step: c.step, totalSteps: c.totalSteps }, 'preempted at a step boundary; checkpoint kept');
    throw preemptedError(c.step, c.totalSteps);
  }
}
