import { writeFile } from 'node:fs/promises';
import { encodeSafetensors, kohyaFlatName, type SafetensorsDtype, type TensorToWrite } from '@diffmesh/adapters';
import { WeightRng } from '../onnx/graph.js';
import { clipEncoderLayerLinears } from './clip-encoder-layer.js';
import { attentionBlockLinears } from './unet-attention-block.js';

/** Text-encoder targets of a test LoRA file: the test encoders' CLIP encoder layer. */
export interface TestLoraTextEncoder {
  component: 'text_encoder' | 'text_encoder_2';
  /** The encoder's hidden size. */
  hidden: number;
  /** Layers to update (default every layer of the encoder layer: `text_model.encoder.layers.0.…`). */
  modules?: string[];
}

/** A LoRA file for the test UNets' attention block, in either published layout. */
export interface TestLoraOptions {
  format: 'peft' | 'kohya';
  /** The UNet's cross_attention_dim (the width attn2.to_k / to_v read). */
  crossAttentionDim: number;
  rank?: number;
  /** Stored alpha (PEFT: `lora_alpha` in `lora_adapter_metadata`; kohya: `<name>.alpha`); none → alpha = rank. */
  alpha?: number;
  dtype?: SafetensorsDtype;
  /** UNet layers to update (default every layer of the block; [] for a file with text-encoder targets only). */
  modules?: string[];
  /** Text-encoder targets (default none): PEFT `text_encoder[_2].<module>`, kohya `lora_te[12]_<flat>`. */
  textEncoders?: TestLoraTextEncoder[];
  /** kohya's prefix of the first text encoder: `lora_te` (SD 1.x/2.x, default) or `lora_te1` (SDXL). */
  kohyaTe1Prefix?: 'lora_te' | 'lora_te1';
  /** Standard deviation of the up matrices' values (default 0.1: the picture changes visibly, without saturating). */
  magnitude?: number;
  /** Extra `__metadata__` entries (e.g. `ss_base_model_version`). */
  metadata?: Record<string, string>;
  seed?: number;
}

/** The tensors and metadata of a test LoRA file. */
export function testLoraTensors(o: TestLoraOptions): { tensors: Record<string, TensorToWrite>; metadata: Record<string, string> } {
  const rank = o.rank ?? 4;
  const dtype = o.dtype ?? 'F32';
  const rng = new WeightRng(o.seed ?? 77);
  const dims = attentionBlockLinears(o.crossAttentionDim);
  const tensors: Record<string, TensorToWrite> = {};
  const add = (component: 'unet' | 'text_encoder' | 'text_encoder_2', module: string, [i, out]: [number, number]) => {
    const down = { dtype, shape: [rank, i], data: rng.normals(rank * i, 1 / Math.sqrt(i)) };
    const up = { dtype, shape: [out, rank], data: rng.normals(out * rank, o.magnitude ?? 0.1) };
    if (o.format === 'peft') {
      tensors[`${component}.${module}.lora_A.weight`] = down;
      tensors[`${component}.${module}.lora_B.weight`] = up;
    } else {
      const prefix = component === 'unet' ? 'lora_unet' : component === 'text_encoder' ? (o.kohyaTe1Prefix ?? 'lora_te') : 'lora_te2';
      const name = `${prefix}_${kohyaFlatName(module)}`;
      tensors[`${name}.lora_down.weight`] = down;
      tensors[`${name}.lora_up.weight`] = up;
      if (o.alpha !== undefined) tensors[`${name}.alpha`] = { dtype, shape: [], data: [o.alpha] };
    }
  };
  for (const module of o.modules ?? Object.keys(dims)) add('unet', module, dims[module]);
  for (const te of o.textEncoders ?? []) {
    const teDims = clipEncoderLayerLinears(te.hidden);
    for (const module of te.modules ?? Object.keys(teDims)) add(te.component, module, teDims[module]);
  }
  const metadata: Record<string, string> = { ...(o.metadata ?? {}) };
  if (o.format === 'peft' && o.alpha !== undefined)
    metadata.lora_adapter_metadata = JSON.stringify({ 'unet.r': rank, 'unet.lora_alpha': o.alpha });
  return { tensors, metadata };
}

/** Writes a test LoRA file; returns its bytes. */
export async function writeTestLora(file: string, o: TestLoraOptions): Promise<Uint8Array> {
  const { tensors, metadata } = testLoraTensors(o);
  const bytes = encodeSafetensors(tensors, metadata);
  await writeFile(file, bytes);
  return bytes;
}
