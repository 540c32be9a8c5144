import { Code, DiffmeshError } from '@diffmesh/core';
import type { DiffusersLayout, GraphValue } from '@diffmesh/model-layout';
import { conditioning, UNPACKED_LATENT, type Item, type ModelFamily } from './model-family.js';

/**
 * SD 1.x/2.x, SD-Turbo and LCM (StableDiffusionPipeline, LatentConsistencyModelPipeline): the
 * prompt's hidden states as `encoder_hidden_states`; an LCM-distilled UNet takes the guidance
 * scale as `timestep_cond` instead of a CFG pair.
 */
export const sd: ModelFamily = {
  kind: 'sd',
  async conditioning({ task, layout, inputs, cfg, embeds }) {
    const cond: Record<string, Item> = { encoder_hidden_states: await embeds('prompt_embeds') };
    // LCM: the guidance scale goes in as an embedding, one pass per step.
    const tc = inputs.get('timestep_cond');
    if (tc) cond.timestep_cond = timestepCond(tc, layout, task.params.guidanceScale);
    const uncond = cfg ? { encoder_hidden_states: await embeds('negative_prompt_embeds') } : undefined;
    return conditioning(cond, uncond);
  },
  ...UNPACKED_LATENT,
  schedulerOptions: () => ({}),
};

/** LCM's `timestep_cond`: the w-embedding of g − 1, as wide as the graph (or the UNet config) says. */
function timestepCond(input: GraphValue, layout: DiffusersLayout, guidanceScale: number): Item {
  const dim = typeof input.shape?.[1] === 'number' ? input.shape[1] : Number(layout.denoiser.config.time_cond_proj_dim);
  if (!Number.isInteger(dim) || dim < 2) {
    throw new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'MODEL_LOAD_FAILED',
      'unet/model.onnx input "timestep_cond" has no fixed width and unet/config.json has no time_cond_proj_dim',
    );
  }
  return { data: guidanceScaleEmbedding(guidanceScale - 1, dim), dims: [dim] };
}

/**
 * The guidance-scale embedding LCM UNets take as `timestep_cond` (diffusers
 * `get_guidance_scale_embedding(w, embedding_dim)`, w = guidance_scale − 1): sin and cos of
 * 1000·w times `dim/2` log-spaced frequencies, zero-padded to an odd `dim`.
 */
export function guidanceScaleEmbedding(w: number, dim: number): Float32Array {
  const half = Math.floor(dim / 2);
  const out = new Float32Array(dim);
  const step = Math.log(10000) / (half - 1);
  for (let i = 0; i < half; i += 1) {
    const arg = Math.fround(Math.fround(w * 1000) * Math.fround(Math.exp(-step * i)));
    out[i] = Math.sin(arg);
    out[half + i] = Math.cos(arg);
  }
  return out;
}
