import type { LoraFile } from './lora-file.js';

/** Model families, as model-layout names a directory's pipeline kind. */
export type BaseFamily = 'sd' | 'sdxl' | 'flux' | 'sd3';

/** kohya `ss_base_model_version` / `modelspec.architecture` prefixes → family. */
const METADATA_FAMILIES: Array<[RegExp, BaseFamily]> = [
  [/^(sd_v1|sd_v2|stable-diffusion-v1|stable-diffusion-v2)/, 'sd'],
  [/^(sdxl|stable-diffusion-xl)/, 'sdxl'],
  [/^(flux|flux-1)/, 'flux'],
  [/^(sd3|stable-diffusion-3)/, 'sd3'],
];

/**
 * The families a LoRA file can be for: what its metadata says (`ss_base_model_version`,
 * `modelspec.architecture`), else what its module names show — FLUX's single-stream blocks,
 * SD3's joint blocks, SDXL's second text encoder or `add_embedding`, the UNet's down/mid/up
 * blocks. A UNet file without SDXL's marks may be for either UNet family; the layers' widths
 * decide later.
 */
export function loraFamilies(lora: LoraFile): BaseFamily[] {
  for (const field of ['ss_base_model_version', 'modelspec.architecture']) {
    const v = lora.metadata[field]?.toLowerCase();
    if (!v) continue;
    const hit = METADATA_FAMILIES.find(([re]) => re.test(v));
    if (hit) return [hit[1]];
  }
  const modules = lora.targets.map((t) => `${t.component}:${t.module}`);
  const has = (re: RegExp) => modules.some((m) => re.test(m));
  if (has(/single_transformer_blocks|single_blocks|double_blocks/)) return ['flux'];
  if (has(/joint_blocks|context_block/)) return ['sd3'];
  if (has(/^denoiser:transformer_blocks/)) return ['sd3', 'flux'];
  if (has(/^text_encoder_2:|add_embedding/)) return ['sdxl'];
  if (has(/^denoiser:(down_blocks|mid_block|up_blocks|input_blocks|middle_block|output_blocks)/)) return ['sd', 'sdxl'];
  return ['sd', 'sdxl', 'flux', 'sd3'];
}
