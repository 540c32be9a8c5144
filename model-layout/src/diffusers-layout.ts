import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DiffmeshError } from '@diffmesh/core';
import { layoutError } from './layout-error.js';
import { parsePythonJson } from './python-json.js';

/** The pipeline families diffmesh serves from diffusers/optimum ONNX directories. */
export type PipelineKind = 'sd' | 'sdxl' | 'flux' | 'sd3';

/** Components that hold an ONNX graph (`<name>/model.onnx` + `config.json`). */
export const ONNX_COMPONENTS = [
  'text_encoder',
  'text_encoder_2',
  'text_encoder_3',
  'unet',
  'transformer',
  'vae_decoder',
  'vae_encoder',
] as const;
export type OnnxComponentName = (typeof ONNX_COMPONENTS)[number];
export type TextEncoderName = 'text_encoder' | 'text_encoder_2' | 'text_encoder_3';
export type TokenizerName = 'tokenizer' | 'tokenizer_2' | 'tokenizer_3';

export type JsonObject = Record<string, unknown>;

/** One ONNX component of a directory. */
export interface OnnxComponent {
  name: OnnxComponentName;
  /** Absolute path of `<name>/model.onnx`: sessions are created from the path, so `model.onnx_data` is found beside it. */
  model: string;
  /** `<name>/model.onnx` relative to the directory, for messages. */
  file: string;
  /** True when the weights are in `model.onnx_data` (exports over 2 GB). */
  externalData: boolean;
  /** `<name>/config.json` ({} when the export has none). */
  config: JsonObject;
}

/** How the pipeline applies the guidance scale (see the denoiser). */
export type GuidanceMode = 'cfg' | 'embedded' | 'none';

/**
 * What one text encoder of the pipeline contributes. Its outputs go into the request's objects
 * as `prompt_embeds{suffix}` (sequence), `pooled_prompt_embeds{suffix}` (pooled) and the
 * `negative_…` of both, where `suffix` is `''`, `_2` or `_3` after the component.
 */
export interface TextEncoderSpec {
  component: TextEncoderName;
  tokenizer: TokenizerName;
  /** The plan stage that runs it. */
  stage: 'text_encoding' | 'text_encoding_2';
  family: 'clip' | 't5';
  /** The sequence output the denoiser attends to: `last_hidden_state`, or the penultimate `hidden_states.{N−1}` (diffusers' `hidden_states[-2]`). */
  sequence?: 'last_hidden_state' | 'penultimate';
  /** The pooled output the denoiser takes: CLIP's `pooler_output`, or CLIPWithProjection's `text_embeds`. */
  pooled?: 'pooler_output' | 'text_embeds';
  /** Token length; undefined = the tokenizer's model_max_length (CLIP 77). T5: the pipeline's max_sequence_length. */
  maxLength?: number;
  suffix: '' | '_2' | '_3';
}

/** The VAE's latent space, from `vae_decoder/config.json`. */
export interface VaeFactors {
  scalingFactor: number;
  /** FLUX/SD3 `shift_factor`; 0 when the config has none. */
  shiftFactor: number;
  latentChannels: number;
  /** Pixels per latent cell: 2^(len(block_out_channels) − 1). */
  scaleFactor: number;
}

/** Defaults of a request, as the diffusers pipeline of the kind would use them. */
export interface LayoutDefaults {
  width: number;
  height: number;
  steps: number;
  guidanceScale: number;
}

/** A model directory in the diffusers/optimum ONNX layout, read from its JSON files. */
export interface DiffusersLayout {
  /** Absolute real path of the directory. */
  dir: string;
  kind: PipelineKind;
  /** `_class_name` of model_index.json. */
  pipelineClass: string;
  modelIndex: JsonObject;
  components: Partial<Record<OnnxComponentName, OnnxComponent>>;
  /** Tokenizer folders (absolute) by name. */
  tokenizers: Partial<Record<TokenizerName, string>>;
  schedulerConfig: JsonObject;
  /** `unet` or `transformer`. */
  denoiser: OnnxComponent;
  vae: VaeFactors;
  /** The text encoders the pipeline runs (SD3 saved without T5 has no `text_encoder_3`). */
  textEncoders: TextEncoderSpec[];
  guidance: GuidanceMode;
  /** SDXL: an absent (empty) negative prompt gives zero negative embeddings. */
  forceZerosForEmptyPrompt: boolean;
  defaults: LayoutDefaults;
  /** Width and height must be multiples of this (VAE factor × patch size). */
  sizeMultiple: number;
  /** True when `vae_encoder/` is there: image inputs (img2img) can be served. */
  imageInput: boolean;
}

/** model_index.json `_class_name` → kind. Optimum's ORT* and diffusers' Onnx* classes included. */
const PIPELINE_CLASSES: Record<string, PipelineKind> = {
  StableDiffusionPipeline: 'sd',
  StableDiffusionImg2ImgPipeline: 'sd',
  OnnxStableDiffusionPipeline: 'sd',
  OnnxStableDiffusionImg2ImgPipeline: 'sd',
  ORTStableDiffusionPipeline: 'sd',
  ORTStableDiffusionImg2ImgPipeline: 'sd',
  LatentConsistencyModelPipeline: 'sd',
  LatentConsistencyModelImg2ImgPipeline: 'sd',
  ORTLatentConsistencyModelPipeline: 'sd',
  ORTLatentConsistencyModelImg2ImgPipeline: 'sd',
  StableDiffusionXLPipeline: 'sdxl',
  StableDiffusionXLImg2ImgPipeline: 'sdxl',
  ORTStableDiffusionXLPipeline: 'sdxl',
  ORTStableDiffusionXLImg2ImgPipeline: 'sdxl',
  FluxPipeline: 'flux',
  FluxImg2ImgPipeline: 'flux',
  StableDiffusion3Pipeline: 'sd3',
  StableDiffusion3Img2ImgPipeline: 'sd3',
};

/** Pipelines whose UNet takes something else than a latent (masks, low-res images). */
const REFUSED_CLASSES: Record<string, string> = {
  StableDiffusionInpaintPipeline: 'inpainting (9-channel UNet)',
  OnnxStableDiffusionInpaintPipeline: 'inpainting (9-channel UNet)',
  ORTStableDiffusionInpaintPipeline: 'inpainting (9-channel UNet)',
  StableDiffusionXLInpaintPipeline: 'inpainting (9-channel UNet)',
  StableDiffusionUpscalePipeline: 'upscaling',
  OnnxStableDiffusionUpscalePipeline: 'upscaling',
  FluxFillPipeline: 'inpainting',
  FluxControlPipeline: 'control images',
};

/** Component folders each kind needs (besides scheduler/ and the VAE decoder). */
const REQUIRED: Record<PipelineKind, { onnx: OnnxComponentName[]; tokenizers: TokenizerName[] }> = {
  sd: { onnx: ['text_encoder', 'unet', 'vae_decoder'], tokenizers: ['tokenizer'] },
  sdxl: { onnx: ['text_encoder', 'text_encoder_2', 'unet', 'vae_decoder'], tokenizers: ['tokenizer', 'tokenizer_2'] },
  flux: { onnx: ['text_encoder', 'text_encoder_2', 'transformer', 'vae_decoder'], tokenizers: ['tokenizer', 'tokenizer_2'] },
  sd3: {
    onnx: ['text_encoder', 'text_encoder_2', 'text_encoder_3', 'transformer', 'vae_decoder'],
    tokenizers: ['tokenizer', 'tokenizer_2', 'tokenizer_3'],
  },
};

/** The text encoders of each kind, as the diffusers pipelines use them (clip_skip unset). */
function textEncodersOf(kind: PipelineKind): TextEncoderSpec[] {
  switch (kind) {
    case 'sd':
      return [
        {
          component: 'text_encoder',
          tokenizer: 'tokenizer',
          stage: 'text_encoding',
          family: 'clip',
          sequence: 'last_hidden_state',
          suffix: '',
        },
      ];
    case 'sdxl':
      return [
        { component: 'text_encoder', tokenizer: 'tokenizer', stage: 'text_encoding', family: 'clip', sequence: 'penultimate', suffix: '' },
        {
          component: 'text_encoder_2',
          tokenizer: 'tokenizer_2',
          stage: 'text_encoding_2',
          family: 'clip',
          sequence: 'penultimate',
          pooled: 'text_embeds',
          suffix: '_2',
        },
      ];
    case 'flux':
      return [
        { component: 'text_encoder', tokenizer: 'tokenizer', stage: 'text_encoding', family: 'clip', pooled: 'pooler_output', suffix: '' },
        {
          component: 'text_encoder_2',
          tokenizer: 'tokenizer_2',
          stage: 'text_encoding_2',
          family: 't5',
          sequence: 'last_hidden_state',
          maxLength: 512,
          suffix: '_2',
        },
      ];
    case 'sd3':
      return [
        {
          component: 'text_encoder',
          tokenizer: 'tokenizer',
          stage: 'text_encoding',
          family: 'clip',
          sequence: 'penultimate',
          pooled: 'text_embeds',
          suffix: '',
        },
        {
          component: 'text_encoder_2',
          tokenizer: 'tokenizer_2',
          stage: 'text_encoding',
          family: 'clip',
          sequence: 'penultimate',
          pooled: 'text_embeds',
          suffix: '_2',
        },
        {
          component: 'text_encoder_3',
          tokenizer: 'tokenizer_3',
          stage: 'text_encoding_2',
          family: 't5',
          sequence: 'last_hidden_state',
          maxLength: 256,
          suffix: '_3',
        },
      ];
  }
}

async function isFile(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isFile(),
    () => false,
  );
}

async function isDir(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** True when `dir` looks like a diffusers/optimum model directory (it has model_index.json). */
export async function isDiffusersDirectory(dir: string): Promise<boolean> {
  return isFile(path.join(dir, 'model_index.json'));
}

/**
 * Reads a diffusers/optimum ONNX model directory: the pipeline kind (from model_index.json's
 * `_class_name`, else from the folders present), every component's files and configs, the
 * scheduler config and the VAE factors, and checks that every file the kind needs is there.
 * Only JSON is read (the graphs are checked by `checkDirectoryGraphs`). Throws a
 * FAILED_PRECONDITION / MODEL_LOAD_FAILED error naming the directory and the file.
 */
export async function readDiffusersLayout(dirIn: string): Promise<DiffusersLayout> {
  let dir: string;
  try {
    dir = await realpath(path.resolve(dirIn));
  } catch {
    throw layoutError(path.resolve(dirIn), '', 'no such directory');
  }
  if (!(await isDir(dir))) throw layoutError(dir, '', 'not a directory');
  const readJson = async (rel: string, required: boolean): Promise<JsonObject | undefined> => {
    const file = path.join(dir, rel);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        if (required) throw layoutError(dir, rel, 'missing');
        return undefined;
      }
      throw layoutError(dir, rel, `cannot read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
    let value: unknown;
    try {
      value = parsePythonJson(text);
    } catch (err) {
      throw layoutError(dir, rel, `not valid JSON (${(err as Error).message})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw layoutError(dir, rel, 'must hold a JSON object');
    return value as JsonObject;
  };

  const modelIndex = (await readJson('model_index.json', true)) as JsonObject;
  const pipelineClass = typeof modelIndex._class_name === 'string' ? modelIndex._class_name : '';
  if (REFUSED_CLASSES[pipelineClass]) {
    throw layoutError(dir, 'model_index.json', `${pipelineClass} (${REFUSED_CLASSES[pipelineClass]}) is not supported`);
  }

  const components: Partial<Record<OnnxComponentName, OnnxComponent>> = {};
  for (const name of ONNX_COMPONENTS) {
    const model = path.join(dir, name, 'model.onnx');
    if (!(await isFile(model))) continue;
    components[name] = {
      name,
      model,
      file: `${name}/model.onnx`,
      externalData: await isFile(path.join(dir, name, 'model.onnx_data')),
      config: (await readJson(`${name}/config.json`, false)) ?? {},
    };
  }
  const tokenizers: Partial<Record<TokenizerName, string>> = {};
  for (const name of ['tokenizer', 'tokenizer_2', 'tokenizer_3'] as const) {
    if (await isDir(path.join(dir, name))) tokenizers[name] = path.join(dir, name);
  }

  const kind = PIPELINE_CLASSES[pipelineClass] ?? inferKind(components);
  if (!kind) {
    throw layoutError(
      dir,
      'model_index.json',
      `cannot tell the pipeline: _class_name ${pipelineClass ? `"${pipelineClass}" is not one diffmesh serves` : 'is missing'} ` +
        `and there is no unet/model.onnx or transformer/model.onnx (supported: ${Object.keys(PIPELINE_CLASSES).join(', ')})`,
    );
  }
  // StableDiffusion3Pipeline runs without T5 when model_index.json says so
  // (`"text_encoder_3": [null, null]`, as diffusers saves a pipeline built with text_encoder_3=None).
  const withoutT5 = kind === 'sd3' && declaredAbsent(modelIndex.text_encoder_3) && !components.text_encoder_3;
  const need = withoutT5
    ? {
        onnx: REQUIRED.sd3.onnx.filter((n) => n !== 'text_encoder_3'),
        tokenizers: REQUIRED.sd3.tokenizers.filter((n) => n !== 'tokenizer_3'),
      }
    : REQUIRED[kind];
  for (const name of need.onnx) {
    if (!components[name]) {
      const alt = (await isDir(path.join(dir, name))) ? 'missing' : `missing (the ${pipelineClass || kind} pipeline needs ${name}/)`;
      throw layoutError(dir, `${name}/model.onnx`, alt);
    }
  }
  for (const name of need.tokenizers) {
    const tdir = tokenizers[name];
    if (!tdir) throw layoutError(dir, `${name}/`, `missing (the ${pipelineClass || kind} pipeline needs its tokenizer files)`);
    const hasJson = await isFile(path.join(tdir, 'tokenizer.json'));
    const hasSlow = (await isFile(path.join(tdir, 'vocab.json'))) && (await isFile(path.join(tdir, 'merges.txt')));
    if (!hasJson && !hasSlow) throw layoutError(dir, `${name}/tokenizer.json`, 'missing (and no vocab.json + merges.txt to build it from)');
  }
  const schedulerConfig = (await readJson('scheduler/scheduler_config.json', true)) as JsonObject;
  if (!(await isFile(path.join(dir, 'vae_decoder', 'config.json')))) {
    throw layoutError(dir, 'vae_decoder/config.json', 'missing (it holds the VAE scaling_factor)');
  }

  const denoiser = (kind === 'flux' || kind === 'sd3' ? components.transformer : components.unet) as OnnxComponent;
  const vaeCfg = (components.vae_decoder as OnnxComponent).config;
  const num = (cfg: JsonObject, key: string, file: string, fallback?: number): number => {
    const v = cfg[key];
    if (v === undefined || v === null) {
      if (fallback !== undefined) return fallback;
      throw layoutError(dir, file, `"${key}" is missing`);
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) throw layoutError(dir, file, `"${key}" must be a number, got ${JSON.stringify(v)}`);
    return v;
  };
  const blocks = Array.isArray(vaeCfg.block_out_channels) ? vaeCfg.block_out_channels.length : 4;
  const vae: VaeFactors = {
    // AutoencoderKL's own default, as diffusers applies it to a config without the field.
    scalingFactor: num(vaeCfg, 'scaling_factor', 'vae_decoder/config.json', 0.18215),
    shiftFactor: num(vaeCfg, 'shift_factor', 'vae_decoder/config.json', 0),
    latentChannels: num(vaeCfg, 'latent_channels', 'vae_decoder/config.json', kind === 'flux' || kind === 'sd3' ? 16 : 4),
    scaleFactor: 2 ** Math.max(0, blocks - 1),
  };

  const dcfg = denoiser.config;
  const lcm = pipelineClass.includes('LatentConsistency') || schedulerConfig._class_name === 'LCMScheduler';
  let guidance: GuidanceMode = 'cfg';
  if (kind === 'flux') guidance = dcfg.guidance_embeds === false ? 'none' : 'embedded';
  else if (typeof dcfg.time_cond_proj_dim === 'number') guidance = 'embedded';
  const patch = kind === 'flux' ? 2 : kind === 'sd3' ? num(dcfg, 'patch_size', denoiser.file.replace('model.onnx', 'config.json'), 2) : 1;
  // FluxPipeline and StableDiffusion3Pipeline default to 128 latent cells (1024 px); the UNet pipelines to unet.sample_size.
  const sampleSize = num(dcfg, 'sample_size', `${denoiser.name}/config.json`, kind === 'sd' ? 64 : 128);
  const size = sampleSize * vae.scaleFactor;
  const defaults: LayoutDefaults = {
    width: size,
    height: size,
    steps: kind === 'flux' || kind === 'sd3' ? 28 : lcm ? 4 : 50,
    guidanceScale: kind === 'sd' ? (lcm ? 8.5 : 7.5) : kind === 'sdxl' ? 5 : kind === 'flux' ? 3.5 : 7,
  };
  return {
    dir,
    kind,
    pipelineClass,
    modelIndex,
    components,
    tokenizers,
    schedulerConfig,
    denoiser,
    vae,
    textEncoders: textEncodersOf(kind).filter((t) => !(withoutT5 && t.component === 'text_encoder_3')),
    guidance,
    forceZerosForEmptyPrompt: kind === 'sdxl' && modelIndex.force_zeros_for_empty_prompt !== false,
    defaults,
    sizeMultiple: vae.scaleFactor * patch,
    imageInput: components.vae_encoder !== undefined,
  };
}

/** A model_index.json entry for a component the pipeline was saved without: `null` or `[null, null]`. */
function declaredAbsent(entry: unknown): boolean {
  return entry === null || (Array.isArray(entry) && entry.every((x) => x === null));
}

/** The kind a directory without a known `_class_name` has, from its folders. */
function inferKind(c: Partial<Record<OnnxComponentName, OnnxComponent>>): PipelineKind | undefined {
  if (c.transformer) return c.text_encoder_3 ? 'sd3' : 'flux';
  if (c.unet) return c.text_encoder_2 ? 'sdxl' : 'sd';
  return undefined;
}

/** True for a load error (FAILED_PRECONDITION / MODEL_LOAD_FAILED) from this package. */
export function isLayoutError(err: unknown): err is DiffmeshError {
  return typeof err === 'object' && err !== null && (err as DiffmeshError).reason === 'MODEL_LOAD_FAILED';
}
