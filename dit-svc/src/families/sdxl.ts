import { concatLast, zerosLike } from './embeddings.js';
import { conditioning, UNPACKED_LATENT, type Item, type ModelFamily } from './model-family.js';

/**
 * SDXL (StableDiffusionXLPipeline): the two encoders' hidden states side by side, the second's
 * pooled output as `text_embeds` and `time_ids` = [H, W, 0, 0, H, W] for both halves of the CFG
 * pair; without a negative prompt the unconditional item is zeros (`force_zeros_for_empty_prompt`).
 */
export const sdxl: ModelFamily = {
  kind: 'sdxl',
  async conditioning({ task, cfg, embeds, has }) {
    const p = task.params;
    const timeIds: Item = { data: Float32Array.from([p.height, p.width, 0, 0, p.height, p.width]), dims: [6] };
    const build = async (prefix: string): Promise<Record<string, Item>> => ({
      encoder_hidden_states: concatLast(await embeds(`${prefix}prompt_embeds`), await embeds(`${prefix}prompt_embeds_2`)),
      text_embeds: await embeds(`${prefix}pooled_prompt_embeds_2`),
      time_ids: timeIds,
    });
    const cond = await build('');
    if (!cfg) return conditioning(cond);
    // force_zeros_for_empty_prompt: no negative prompt → zero embeddings (the encoders made none).
    const uncond = has('negative_prompt_embeds')
      ? await build('negative_')
      : { encoder_hidden_states: zerosLike(cond.encoder_hidden_states), text_embeds: zerosLike(cond.text_embeds), time_ids: timeIds };
    return conditioning(cond, uncond);
  },
  ...UNPACKED_LATENT,
  schedulerOptions: () => ({}),
};
