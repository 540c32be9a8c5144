import { createHash } from 'node:crypto';
import path from 'node:path';
import type { StageName } from '@diffmesh/core';
import type { DiffusersLayout, OnnxComponentName } from './diffusers-layout.js';

/** One stage of a directory model's plan. */
export interface DirectoryStage {
  name: StageName;
  /** Worker pool (derived from the directory; a plan entry may name its own). */
  pool: string;
  /** The components the stage runs. */
  components: OnnxComponentName[];
  /** `input_image`: the stage runs only for requests with an input image. */
  requires?: 'input_image';
}

/** The execution plan, defaults and limits of a directory model, from its JSON files alone. */
export interface DirectoryPlan {
  /** `text-to-image`, and `image-to-image` when the directory has a VAE encoder (img2img). */
  modalities: ('text-to-image' | 'image-to-image')[];
  stages: DirectoryStage[];
  defaults: { width: number; height: number; numFrames: 1; steps: number; guidanceScale: number; fps: number };
  constraints: { sizeMultiple: number; maxWidth: number; maxHeight: number; maxFrames: 1 };
}

/** Largest width and height a directory model takes by default (or its default size, if larger). */
export const DIRECTORY_MAX_SIZE = 2048;

/**
 * A short, stable, pool-name-safe label for a directory: its folder name (lower-case, other
 * characters as `-`, at most 32) and 6 hex digits of its path's hash, so two `my-model`
 * folders never share pools.
 */
export function directorySlug(dir: string): string {
  const base =
    path
      .basename(dir)
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '')
      .slice(0, 32)
      .replace(/[^a-z0-9]+$/, '') || 'model';
  return `${base}-${createHash('sha256').update(dir).digest('hex').slice(0, 6)}`;
}

/**
 * The plan of a directory model, as the diffusers pipeline of its kind runs: SD
 * `text_encoding → [image_encoding] → denoising → vae_decoding`; SDXL adds `text_encoding_2`
 * (the second CLIP); FLUX `text_encoding` (CLIP) + `text_encoding_2` (T5); SD3 `text_encoding`
 * (both CLIPs) + `text_encoding_2` (T5). `image_encoding` (the VAE encoder, for img2img) is in
 * the plan when `vae_encoder/` is there, marked `requires: input_image`. Each stage gets its own
 * pool, named after the directory (`dit-<slug>`, …). Defaults follow the diffusers pipelines:
 * size = sample_size × VAE factor, steps and guidance as their `__call__` defaults.
 */
export function directoryPlan(layout: DiffusersLayout): DirectoryPlan {
  const slug = directorySlug(layout.dir);
  const stages: DirectoryStage[] = [];
  const encoders = (stage: 'text_encoding' | 'text_encoding_2') =>
    layout.textEncoders.filter((t) => t.stage === stage).map((t) => t.component) as OnnxComponentName[];
  stages.push({ name: 'text_encoding', pool: `encoder-${slug}`, components: encoders('text_encoding') });
  const second = encoders('text_encoding_2');
  if (second.length > 0) stages.push({ name: 'text_encoding_2', pool: `encoder2-${slug}`, components: second });
  if (layout.imageInput) {
    stages.push({ name: 'image_encoding', pool: `vae-encoder-${slug}`, components: ['vae_encoder'], requires: 'input_image' });
  }
  stages.push({ name: 'denoising', pool: `dit-${slug}`, components: [layout.denoiser.name] });
  stages.push({ name: 'vae_decoding', pool: `vae-${slug}`, components: ['vae_decoder'] });
  const d = layout.defaults;
  const max = Math.max(DIRECTORY_MAX_SIZE, d.width, d.height);
  return {
    modalities: layout.imageInput ? ['text-to-image', 'image-to-image'] : ['text-to-image'],
    stages,
    defaults: { width: d.width, height: d.height, numFrames: 1, steps: d.steps, guidanceScale: d.guidanceScale, fps: 8 },
    constraints: { sizeMultiple: layout.sizeMultiple, maxWidth: max, maxHeight: max, maxFrames: 1 },
  };
}

/** The components a stage of a directory model runs. */
export function stageComponents(layout: DiffusersLayout, stage: StageName): OnnxComponentName[] {
  return directoryPlan(layout).stages.find((s) => s.name === stage)?.components ?? [];
}

/**
 * True when a model id names a directory rather than a registry name: an absolute path, or one
 * starting with `./` or `../` (registry names are `org/name`).
 */
export function looksLikePath(model: string): boolean {
  return path.isAbsolute(model) || /^\.{1,2}([/\\]|$)/.test(model);
}
