import type { AdapterUse } from '@diffmesh/adapters';
import type { StageTask } from '@diffmesh/core';
import type { GraphValue } from '@diffmesh/model-layout';
import type { ModelSession, ort } from '@diffmesh/stage-host';
import type { DenoiseCheckpoint } from './checkpoint.js';
import { runFingerprint } from './checkpoint.js';
import type { DenoisingRun, RunPlan, RunState } from './denoising-loop.js';
import type { Conditioning, Item, LatentSize, ModelFamily } from './families/index.js';
import type { LatentFrame, LatentRgbProjection } from './latent-preview.js';
import { NoiseRng } from './rng.js';
import { decodeSchedulerState, encodeSchedulerState, type DiffusionScheduler } from './schedulers/index.js';
import type { Prediction, StepBatcher } from './step-batcher.js';

/** One denoiser call of one request on a model directory (a CFG request makes two per step). */
export interface DirectoryItem {
  request: StageTask;
  session: () => Promise<ModelSession>;
  /** The denoiser graph's inputs, by name. */
  inputs: Map<string, GraphValue>;
  /** Inputs with a batch axis: the latent and the family's conditioning. */
  batched: Record<string, Item>;
  /** Inputs all items share. */
  shared: Record<string, Item>;
  timestep: number;
  output: string;
  /** The request's LoRA adapters, and the inputs of the branches for a batch (`denoiser-adapters.ts`). */
  adapters: AdapterUse[];
  loraFeeds?: LoraFeeds;
}

/** The LoRA branches' inputs of a run whose batch items use `rows[b]`. */
export type LoraFeeds = (rows: AdapterUse[][]) => Promise<Record<string, ort.Tensor>>;

/** What a model directory's run is made of. */
export interface DirectoryRunParts {
  task: StageTask;
  batcher: StepBatcher<DirectoryItem>;
  family: ModelFamily;
  size: LatentSize;
  scheduler: DiffusionScheduler;
  rng: NoiseRng;
  /** The start latent, in the denoiser's form. */
  x: Float32Array;
  cond: Conditioning;
  /** The graph's latent input (`sample`, `hidden_states`). */
  sampleName: string;
  inputs: Map<string, GraphValue>;
  /** The denoiser's model file (part of the batcher key). */
  model: string;
  output: string;
  session: () => Promise<ModelSession>;
  /** The request's LoRA adapters, and (with `--lora-dir`) the branch inputs of a batch. */
  adapters: AdapterUse[];
  loraFeeds?: LoraFeeds;
  /** The graph takes a batch of 1 only: each item runs alone. */
  staticBatch: boolean;
  /** The graph takes one timestep per batch item. */
  timestepPerItem: boolean;
  projection: LatentRgbProjection;
}

/**
 * A model directory's run: the diffusers scheduler steps the latent (a new array each step),
 * drawing the stochastic schedulers' noise from the request's seeded stream; a checkpoint holds
 * the latent, that stream and the scheduler's state.
 */
export class DirectoryRun implements DenoisingRun {
  readonly plan: RunPlan;
  private x: Float32Array;
  private rng: NoiseRng;
  private readonly sampleDims: number[];

  constructor(private readonly r: DirectoryRunParts) {
    const image = r.task.inputs.image_latents !== undefined;
    this.plan = {
      totalSteps: r.scheduler.timesteps.length,
      // img2img: the scheduler's timesteps start where strength says.
      firstStep: 0,
      fingerprint: runFingerprint(r.task, { directory: r.family.kind, image }),
      latentLength: r.x.length,
      callsPerStep: r.cond.uncond ? 2 : 1,
      projection: r.projection,
    };
    this.x = r.x;
    this.rng = r.rng;
    this.sampleDims = r.family.sampleDims(r.size);
  }

  modelInput(i: number): Float32Array {
    return this.r.scheduler.scaleModelInput(this.x, i);
  }

  predict(input: Float32Array, i: number, signal: AbortSignal): Promise<Prediction> {
    const { task, cond, sampleName, staticBatch } = this.r;
    const timestep = this.r.family.timestep(this.r.scheduler.timesteps[i]);
    const item = (c: Record<string, Item>): DirectoryItem => ({
      request: task,
      session: this.r.session,
      inputs: this.r.inputs,
      batched: { ...c, [sampleName]: { data: input, dims: this.sampleDims } },
      shared: cond.shared,
      timestep,
      output: this.r.output,
      adapters: this.r.adapters,
      ...(this.r.loraFeeds ? { loraFeeds: this.r.loraFeeds } : {}),
    });
    const key = this.key(timestep);
    const keys = staticBatch ? { cond: `${key}|c`, uncond: `${key}|u` } : { cond: key, uncond: key };
    return this.r.batcher.predict(keys, item(cond.cond), cond.uncond && item(cond.uncond), signal);
  }

  /** Requests share runs under one key: the same denoiser, shapes and (unless per item) timestep. */
  private key(timestep: number): string {
    const { model, cond, timestepPerItem, staticBatch, task } = this.r;
    const dims = JSON.stringify(Object.values(cond.cond).map((c) => c.dims));
    return `${model}|${this.sampleDims.join('x')}|${dims}|${timestepPerItem ? 'per-item' : timestep}${staticBatch ? `|${task.reqId}` : ''}`;
  }

  step(out: Float32Array, i: number): void {
    this.x = this.r.scheduler.step(out, i, this.x, this.rng);
  }

  state(): RunState {
    return { latent: this.x, rng: this.rng.getState(), scheduler: encodeSchedulerState(this.r.scheduler.getState()) };
  }

  restore(c: DenoiseCheckpoint): void {
    this.x = c.latent;
    this.rng = NoiseRng.fromState(c.rng);
    if (c.scheduler) this.r.scheduler.restoreState(decodeSchedulerState(c.scheduler));
  }

  previewFrame(): LatentFrame {
    const { channels, height, width } = this.r.size;
    return { data: this.r.family.unpack(this.x, this.r.size), channels, height, width };
  }

  output(): { data: Float32Array; shape: number[] } {
    const { channels, height, width } = this.r.size;
    return { data: this.r.family.unpack(this.x, this.r.size), shape: [1, channels, height, width] };
  }
}
