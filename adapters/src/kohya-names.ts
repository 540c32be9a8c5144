/**
 * kohya names a LoRA target by its module path with every `.` turned into `_`
 * (`lora_unet_down_blocks_0_attentions_0_…_to_q`), which cannot be split back unambiguously;
 * so the graph's module paths are flattened the same way and looked up. kohya's SDXL files name
 * the UNet's blocks as Stability's original code does (`input_blocks_4_1_…`); those are turned
 * into diffusers' block names first, as diffusers' `_maybe_map_sgm_blocks_to_diffusers`
 * (lora_conversion_utils.py, Apache-2.0) does: input block i → down_blocks.⌊(i−1)/(L+1)⌋,
 * layer (i−1) mod (L+1); middle 0/1/2 → resnets.0 / attentions.0 / resnets.1; output block
 * i → up_blocks.⌊i/(L+1)⌋, layer i mod (L+1), with L = layers_per_block. The inner index
 * 0/1/2 is resnets/attentions/upsamplers (input `op` → downsamplers.0).
 */

/** A module path as kohya flattens it. */
export function kohyaFlatName(module: string): string {
  return module.replace(/[./]/g, '_');
}

const INNER = ['resnets', 'attentions', 'upsamplers'];

/** `input_blocks_4_1_rest` → `down_blocks_1_attentions_0_rest` (names without SGM blocks pass through). */
export function sgmToDiffusersFlat(flat: string, layersPerBlock: number): string {
  const per = layersPerBlock + 1;
  const mid = /^middle_block_(\d+)(_.*)?$/.exec(flat);
  if (mid) {
    const id = Number(mid[1]);
    return `mid_block_${id === 1 ? 'attentions_0' : id === 0 ? 'resnets_0' : 'resnets_1'}${mid[2] ?? ''}`;
  }
  const m = /^(input_blocks|output_blocks)_(\d+)_(\d+)(_.*)?$/.exec(flat);
  if (!m) return flat;
  const id = Number(m[2]);
  const inner = Number(m[3]);
  const tail = m[4] ?? '';
  if (m[1] === 'input_blocks') {
    const block = Math.floor((id - 1) / per);
    if (tail.startsWith('_op')) return `down_blocks_${block}_downsamplers_0_conv${tail.slice(3)}`;
    return `down_blocks_${block}_${INNER[inner]}_${(id - 1) % per}${tail}`;
  }
  return `up_blocks_${Math.floor(id / per)}_${INNER[inner]}_${inner < 2 ? id % per : 0}${tail}`;
}
