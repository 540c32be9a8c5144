import type { StageTask } from '@diffmesh/core';
import type { DiffusersLayout, GraphValue, PipelineKind } from '@diffmesh/model-layout';
import type { CreateSchedulerOptions } from '../schedulers/index.js';

/** A float tensor without its batch axis. */
export interface Item {
  data: Float32Array;
  dims: number[];
}

/** The denoiser inputs of one batch item (latent and timestep excluded) and those all items share. */
export interface Conditioning {
  cond: Record<string, Item>;
  /** The unconditional item of classifier-free guidance; undefined without CFG. */
  uncond?: Record<string, Item>;
  /** Inputs without a batch axis (FLUX `img_ids`, `txt_ids`). */
  shared: Record<string, Item>;
}

/** A run's latent in the VAE's space: [C, h, w]. */
export interface LatentSize {
  channels: number;
  height: number;
  width: number;
}

/** What a family's conditioning is made from. */
export interface ConditioningInputs {
  task: StageTask;
  layout: DiffusersLayout;
  /** The denoiser graph's inputs, by name. */
  inputs: Map<string, GraphValue>;
  /** Classifier-free guidance is on: an unconditional item is wanted. */
  cfg: boolean;
  latent: LatentSize;
  /** An output of the request's text encoding stages (INVALID_ARGUMENT when it is missing). */
  embeds(name: string): Promise<Item>;
  /** Whether the request has that input. */
  has(name: string): boolean;
}

/**
 * What one diffusers pipeline family (SD 1.x/2.x, SDXL, FLUX, SD3) does its own way, as its
 * diffusers pipeline does it: the denoiser's conditioning inputs, the form of the latent the
 * denoiser takes, the form of its timestep and the options the pipeline gives the scheduler.
 * Everything else (the loop, the scheduler, batching, guidance) is the same for all.
 */
export interface ModelFamily {
  readonly kind: PipelineKind;
  /** The denoiser inputs besides the latent and the timestep. */
  conditioning(c: ConditioningInputs): Promise<Conditioning>;
  /** The latent as the denoiser takes it, from [C, h, w] (FLUX: 2×2 packed tokens). */
  pack(latent: Float32Array, size: LatentSize): Float32Array;
  /** Back from the denoiser's form to [C, h, w], always as a new array. */
  unpack(x: Float32Array, size: LatentSize): Float32Array;
  /** The dims of the denoiser's latent input without its batch axis. */
  sampleDims(size: LatentSize): number[];
  /** The value fed to the denoiser's timestep input for the scheduler's timestep `t`. */
  timestep(t: number): number;
  /** The options the family's pipeline passes to the scheduler besides steps and strength. */
  schedulerOptions(layout: DiffusersLayout, steps: number, size: LatentSize): Partial<CreateSchedulerOptions>;
}

/** The latent form of the UNet families (and SD3): [C, h, w] as is, the scheduler's timestep as is. */
export const UNPACKED_LATENT: Pick<ModelFamily, 'pack' | 'unpack' | 'sampleDims' | 'timestep'> = {
  pack: (latent) => latent,
  unpack: (x) => x.slice(),
  sampleDims: ({ channels, height, width }) => [channels, height, width],
  timestep: (t) => t,
};

/** A family's conditioning, the unconditional item only where there is one. */
export function conditioning(cond: Record<string, Item>, uncond?: Record<string, Item>, shared: Record<string, Item> = {}): Conditioning {
  return { cond, ...(uncond ? { uncond } : {}), shared };
}
