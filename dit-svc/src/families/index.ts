import type { PipelineKind } from '@diffmesh/model-layout';
import { flux } from './flux.js';
import type { ModelFamily } from './model-family.js';
import { sd } from './sd.js';
import { sd3 } from './sd3.js';
import { sdxl } from './sdxl.js';

export { conditioning, UNPACKED_LATENT } from './model-family.js';
export type { Conditioning, ConditioningInputs, Item, LatentSize, ModelFamily } from './model-family.js';

const FAMILIES: Record<PipelineKind, ModelFamily> = { sd, sdxl, flux, sd3 };

/** The family module of a diffusers pipeline kind. */
export function familyOf(kind: PipelineKind): ModelFamily {
  return FAMILIES[kind];
}
