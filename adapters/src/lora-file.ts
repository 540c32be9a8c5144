import { adapterFileError } from './adapter-error.js';
import type { SafetensorsFile, SafetensorsTensor } from './safetensors.js';

/** The model part a LoRA target belongs to (diffusers' component names; the UNet or transformer is the denoiser). */
export type AdapterComponent = 'denoiser' | 'text_encoder' | 'text_encoder_2';

/** The two layouts LoRA files are published in. */
export type LoraFormat = 'peft' | 'kohya';

/** One low-rank update ΔW = scale · up · down of one linear layer. */
export interface LoraTarget {
  /** The file's key of the down (A) matrix: names the target in errors. */
  key: string;
  component: AdapterComponent;
  /**
   * The module: diffusers' dotted path (`down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q`)
   * for PEFT files, kohya's flattened name (`down_blocks_0_attentions_0_…_to_q`) for kohya files.
   */
  module: string;
  rank: number;
  inDim: number;
  outDim: number;
  /** [rank, in], row-major (PEFT lora_A, kohya lora_down). */
  down: Float32Array;
  /** [out, rank], row-major (PEFT lora_B, kohya lora_up). */
  up: Float32Array;
  /** The file's own factor: alpha / rank (PEFT lora_alpha / r, or / √r with rsLoRA); 1 without alpha. */
  alphaScale: number;
}

export interface LoraFile {
  format: LoraFormat;
  metadata: Record<string, string>;
  targets: LoraTarget[];
}

const PEFT_KEY =
  /^(?:(unet|transformer|text_encoder|text_encoder_2)\.)?(?:base_model\.model\.)?(.+?)\.(lora_A|lora_B)(?:\.default)?\.weight$/;
const PEFT_ALPHA = /^(?:(unet|transformer|text_encoder|text_encoder_2)\.)?(?:base_model\.model\.)?(.+?)\.alpha$/;
const KOHYA_KEY = /^(lora_unet|lora_transformer|lora_te1|lora_te2|lora_te)_(.+?)\.(lora_down|lora_up)\.weight$/;
const KOHYA_ALPHA = /^(lora_unet|lora_transformer|lora_te1|lora_te2|lora_te)_(.+?)\.alpha$/;

const PEFT_COMPONENT: Record<string, AdapterComponent> = {
  unet: 'denoiser',
  transformer: 'denoiser',
  text_encoder: 'text_encoder',
  text_encoder_2: 'text_encoder_2',
};
const KOHYA_COMPONENT: Record<string, AdapterComponent> = {
  lora_unet: 'denoiser',
  lora_transformer: 'denoiser',
  lora_te: 'text_encoder',
  lora_te1: 'text_encoder',
  lora_te2: 'text_encoder_2',
};

/** What a key says that diffmesh does not apply, and why. */
function unsupported(key: string): string | undefined {
  if (/dora_scale|lora_magnitude_vector/.test(key)) return 'DoRA (magnitude vectors) is not supported';
  if (/hada_w|lokr_w|\.oft_|\.lora_mid\./.test(key)) return 'LyCORIS (LoHa / LoKr / OFT / CP) weights are not supported';
  if (/\.lora_B\.bias$|\.lora_up\.bias$/.test(key)) return 'LoRA biases are not supported';
  return undefined;
}

interface Pair {
  key: string;
  component: AdapterComponent;
  module: string;
  down?: SafetensorsTensor;
  up?: SafetensorsTensor;
  downKey?: string;
  upKey?: string;
  alpha?: number;
}

/**
 * Reads the LoRA targets of a safetensors file in the diffusers/PEFT layout
 * (`[unet|transformer|text_encoder|text_encoder_2.]<module>.lora_A.weight` / `lora_B`, optional
 * `<module>.alpha`, or `lora_alpha` in the `lora_adapter_metadata` metadata diffusers writes)
 * or the kohya layout (`lora_unet_<module>.lora_down.weight` / `lora_up` / `.alpha`,
 * `lora_te[12]_` for the text encoders). Every key must belong to a target: anything else is
 * refused naming the key, as are mixed layouts, a down without an up, ranks that differ and
 * convolution kernels larger than 1×1.
 */
export function readLoraFile(st: SafetensorsFile, file: string): LoraFile {
  const keys = [...st.tensors.keys()];
  if (keys.length === 0) throw adapterFileError(file, 'holds no tensors');
  const format: LoraFormat = keys.some((k) => KOHYA_KEY.test(k) || KOHYA_ALPHA.test(k)) ? 'kohya' : 'peft';
  const pairs = new Map<string, Pair>();
  for (const key of keys) {
    const why = unsupported(key);
    if (why) throw adapterFileError(file, `key ${key}: ${why}`, { key });
    const t = st.tensors.get(key) as SafetensorsTensor;
    const m = format === 'kohya' ? (KOHYA_KEY.exec(key) ?? KOHYA_ALPHA.exec(key)) : (PEFT_KEY.exec(key) ?? PEFT_ALPHA.exec(key));
    if (!m) throw adapterFileError(file, `key ${key} is not a ${format === 'kohya' ? 'kohya' : 'diffusers/PEFT'} LoRA weight`, { key });
    const component = format === 'kohya' ? KOHYA_COMPONENT[m[1]] : PEFT_COMPONENT[m[1] ?? 'unet'];
    const id = `${component}:${m[2]}`;
    const pair = pairs.get(id) ?? { key, component, module: m[2] };
    pairs.set(id, pair);
    const which = m[3];
    if (which === undefined) {
      if (t.data.length !== 1) throw adapterFileError(file, `key ${key}: alpha is not a single number`, { key });
      pair.alpha = t.data[0];
    } else if (which === 'lora_A' || which === 'lora_down') {
      pair.down = t;
      pair.downKey = key;
      pair.key = key;
    } else {
      pair.up = t;
      pair.upKey = key;
    }
  }
  const peftAlpha = format === 'peft' ? metadataAlpha(st.metadata, file) : undefined;
  const targets = [...pairs.values()].map((p) => toTarget(p, file, peftAlpha));
  return { format, metadata: st.metadata, targets };
}

/** `lora_alpha`, `r` and `use_rslora` of diffusers' `lora_adapter_metadata` (keys possibly prefixed `unet.` / `transformer.`). */
function metadataAlpha(metadata: Record<string, string>, file: string): { alpha: number; rslora: boolean } | undefined {
  const raw = metadata.lora_adapter_metadata;
  if (raw === undefined) return undefined;
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    throw adapterFileError(file, '__metadata__.lora_adapter_metadata is not JSON');
  }
  const pick = (name: string) => {
    for (const [k, v] of Object.entries(parsed)) if (k === name || k.endsWith(`.${name}`)) return v;
    return undefined;
  };
  const alpha = pick('lora_alpha');
  if (alpha === undefined) return undefined;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha))
    throw adapterFileError(file, 'lora_adapter_metadata.lora_alpha is not a number');
  return { alpha, rslora: pick('use_rslora') === true };
}

/** A [rows, cols] matrix, or [rows, cols, 1, 1] from a 1×1 convolution. */
function matrix(t: SafetensorsTensor, key: string, file: string): [number, number] {
  const s = t.shape;
  if (s.length === 2 || (s.length === 4 && s[2] === 1 && s[3] === 1)) return [s[0], s[1]];
  if (s.length === 4)
    throw adapterFileError(file, `key ${key}: a ${s[2]}×${s[3]} convolution LoRA is not supported (linear and 1×1 layers are)`, { key });
  throw adapterFileError(file, `key ${key}: shape [${s.join(', ')}] is not a LoRA matrix (rank 2 expected)`, { key });
}

function toTarget(p: Pair, file: string, peftAlpha: { alpha: number; rslora: boolean } | undefined): LoraTarget {
  if (!p.down || !p.downKey)
    throw adapterFileError(file, `key ${p.upKey ?? p.key} has no down (lora_A / lora_down) matrix beside it`, { key: p.upKey ?? p.key });
  if (!p.up || !p.upKey) throw adapterFileError(file, `key ${p.downKey} has no up (lora_B / lora_up) matrix beside it`, { key: p.downKey });
  const [rank, inDim] = matrix(p.down, p.downKey, file);
  const [outDim, upRank] = matrix(p.up, p.upKey, file);
  if (rank !== upRank) throw adapterFileError(file, `key ${p.upKey}: rank ${upRank} differs from ${p.downKey}'s ${rank}`, { key: p.upKey });
  if (rank === 0) throw adapterFileError(file, `key ${p.downKey}: rank 0`, { key: p.downKey });
  for (const [k, t] of [
    [p.downKey, p.down],
    [p.upKey, p.up],
  ] as const) {
    if (!t.data.every(Number.isFinite)) throw adapterFileError(file, `key ${k}: holds a value that is not finite`, { key: k });
  }
  let alphaScale = 1;
  if (p.alpha !== undefined) alphaScale = p.alpha / rank;
  else if (peftAlpha) alphaScale = peftAlpha.alpha / (peftAlpha.rslora ? Math.sqrt(rank) : rank);
  return { key: p.downKey, component: p.component, module: p.module, rank, inDim, outDim, down: p.down.data, up: p.up.data, alphaScale };
}
