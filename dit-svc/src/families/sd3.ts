import { invalidParameter } from '@diffmesh/core';
import { concatLast } from './embeddings.js';
import { conditioning, UNPACKED_LATENT, type ConditioningInputs, type Item, type ModelFamily } from './model-family.js';

/**
 * SD3 (StableDiffusion3Pipeline): the CLIP-L and CLIP-G rows side by side, zero-padded to the T5
 * width and followed by the T5 rows (a directory saved without T5: as many zero rows as CLIP
 * rows, as diffusers does), pooled projections [L ‖ G]; the scheduler's dynamic shifting counts
 * the patched latent's tokens.
 */
export const sd3: ModelFamily = {
  kind: 'sd3',
  async conditioning(c) {
    const cond = await sd3Item(c, '');
    return conditioning(cond, c.cfg ? await sd3Item(c, 'negative_') : undefined);
  },
  ...UNPACKED_LATENT,
  schedulerOptions(layout, _steps, { height: h, width: w }) {
    const patch = layout.sizeMultiple / layout.vae.scaleFactor;
    return { imageSeqLen: (h / patch) * (w / patch) };
  },
};

/** The conditional (prefix '') or unconditional ('negative_') item. */
async function sd3Item({ layout, inputs, embeds }: ConditioningInputs, prefix: string): Promise<Record<string, Item>> {
  const J = inputs.get('encoder_hidden_states')?.shape?.[2];
  const withT5 = layout.textEncoders.some((t) => t.component === 'text_encoder_3');
  const l = await embeds(`${prefix}prompt_embeds`);
  const g = await embeds(`${prefix}prompt_embeds_2`);
  const given = withT5 ? await embeds(`${prefix}prompt_embeds_3`) : undefined;
  const width = typeof J === 'number' ? J : given ? given.dims[1] : Number(layout.denoiser.config.joint_attention_dim);
  // Without T5, StableDiffusion3Pipeline uses zeros of [tokenizer_max_length (the CLIP rows), joint_attention_dim].
  const t5 = given ?? { data: new Float32Array(l.dims[0] * width), dims: [l.dims[0], width] };
  return {
    encoder_hidden_states: sd3Rows(concatLast(l, g), t5, width),
    pooled_projections: concatLast(await embeds(`${prefix}pooled_prompt_embeds`), await embeds(`${prefix}pooled_prompt_embeds_2`)),
  };
}

/** SD3's joint rows: the CLIP rows zero-padded to the T5 width, then the T5 rows. */
function sd3Rows(clip: Item, t5: Item, width: number): Item {
  const [L, D] = clip.dims;
  const [T, J] = t5.dims;
  if (J !== width) throw invalidParameter('prompt_embeds_3', `has width ${J}, the transformer takes ${width}`);
  const out = new Float32Array((L + T) * J);
  for (let r = 0; r < L; r += 1) out.set(clip.data.subarray(r * D, (r + 1) * D), r * J);
  out.set(t5.data, L * J);
  return { data: out, dims: [L + T, J] };
}
