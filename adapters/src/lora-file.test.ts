import { describe, expect, it } from 'vitest';
import { loraFamilies } from './base-model.js';
import { sgmToDiffusersFlat } from './kohya-names.js';
import { readLoraFile } from './lora-file.js';
import { encodeSafetensors, parseSafetensors, type TensorToWrite } from './safetensors.js';

const m = (shape: number[], fill = 0.5): TensorToWrite => ({
  dtype: 'F32',
  shape,
  data: new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(fill),
});
const read = (tensors: Record<string, TensorToWrite>, metadata: Record<string, string> = {}) =>
  readLoraFile(parseSafetensors(encodeSafetensors(tensors, metadata), 'l.safetensors'), 'l.safetensors');

describe('LoRA files', () => {
  it('reads diffusers/PEFT keys: component prefixes, lora_alpha from the metadata (rsLoRA too), 1 without alpha', () => {
    const f = read(
      {
        'unet.mid_block.attentions.0.transformer_blocks.0.attn1.to_q.lora_A.weight': m([4, 320]),
        'unet.mid_block.attentions.0.transformer_blocks.0.attn1.to_q.lora_B.weight': m([320, 4]),
        'text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight': m([4, 768]),
        'text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_B.weight': m([768, 4]),
      },
      { lora_adapter_metadata: JSON.stringify({ 'unet.r': 4, 'unet.lora_alpha': 8 }) },
    );
    expect(f.format).toBe('peft');
    expect(f.targets.map((t) => [t.component, t.module, t.rank, t.inDim, t.outDim, t.alphaScale])).toEqual([
      ['denoiser', 'mid_block.attentions.0.transformer_blocks.0.attn1.to_q', 4, 320, 320, 2],
      ['text_encoder', 'text_model.encoder.layers.0.self_attn.q_proj', 4, 768, 768, 2],
    ]);
    const rs = read(
      { 'transformer.x.to_q.lora_A.weight': m([4, 8]), 'transformer.x.to_q.lora_B.weight': m([8, 4]) },
      { lora_adapter_metadata: JSON.stringify({ lora_alpha: 8, use_rslora: true }) },
    );
    expect(rs.targets[0].alphaScale).toBe(4);
    expect(read({ 'x.to_q.lora_A.weight': m([2, 8]), 'x.to_q.lora_B.weight': m([8, 2]) }).targets[0].alphaScale).toBe(1);
  });

  it('reads kohya keys with .alpha, 1×1 convolution shapes, and the text encoders', () => {
    const f = read({
      'lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight': m([8, 320, 1, 1]),
      'lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight': m([320, 8, 1, 1]),
      'lora_unet_down_blocks_0_attentions_0_proj_in.alpha': { dtype: 'F16', shape: [], data: [4] },
      'lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_down.weight': m([8, 1280]),
      'lora_te2_text_model_encoder_layers_0_mlp_fc1.lora_up.weight': m([5120, 8]),
    });
    expect(f.format).toBe('kohya');
    expect(f.targets.map((t) => [t.component, t.module, t.rank, t.alphaScale])).toEqual([
      ['denoiser', 'down_blocks_0_attentions_0_proj_in', 8, 0.5],
      ['text_encoder_2', 'text_model_encoder_layers_0_mlp_fc1', 8, 1],
    ]);
    expect(loraFamilies(f)).toEqual(['sdxl']);
  });

  it('refuses what it cannot apply, naming the key', () => {
    const q = 'lora_unet_mid_block_attentions_0_proj_in';
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8]), [`${q}.lora_up.weight`]: m([8, 4]), [`${q}.dora_scale`]: m([8]) })).toThrow(
      /key lora_unet_mid_block_attentions_0_proj_in\.dora_scale: DoRA/,
    );
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8]), 'something.else': m([1]) })).toThrow(
      /key something\.else is not a kohya LoRA weight/,
    );
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8]) })).toThrow(/lora_down\.weight has no up/);
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8]), [`${q}.lora_up.weight`]: m([8, 2]) })).toThrow(/rank 2 differs from .*'s 4/);
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8, 3, 3]), [`${q}.lora_up.weight`]: m([8, 4, 1, 1]) })).toThrow(
      /a 3×3 convolution LoRA is not supported/,
    );
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8, 2]), [`${q}.lora_up.weight`]: m([8, 4]) })).toThrow(
      /shape \[4, 8, 2\] is not a LoRA matrix/,
    );
    expect(() => read({ [`${q}.lora_down.weight`]: m([4, 8], Number.NaN), [`${q}.lora_up.weight`]: m([8, 4]) })).toThrow(/not finite/);
  });

  it("maps kohya's SDXL block names to diffusers' as diffusers does (layers_per_block 2)", () => {
    expect(sgmToDiffusersFlat('input_blocks_4_1_transformer_blocks_0_attn1_to_q', 2)).toBe(
      'down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q',
    );
    expect(sgmToDiffusersFlat('input_blocks_8_1_proj_in', 2)).toBe('down_blocks_2_attentions_1_proj_in');
    expect(sgmToDiffusersFlat('input_blocks_3_0_op', 2)).toBe('down_blocks_0_downsamplers_0_conv');
    expect(sgmToDiffusersFlat('middle_block_1_transformer_blocks_9_ff_net_2', 2)).toBe(
      'mid_block_attentions_0_transformer_blocks_9_ff_net_2',
    );
    expect(sgmToDiffusersFlat('output_blocks_5_1_transformer_blocks_0_attn2_to_k', 2)).toBe(
      'up_blocks_1_attentions_2_transformer_blocks_0_attn2_to_k',
    );
    expect(sgmToDiffusersFlat('down_blocks_0_attentions_0_proj_in', 2)).toBe('down_blocks_0_attentions_0_proj_in');
  });
});
