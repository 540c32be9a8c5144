import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { FluxTestModel, buildFluxDir, type FluxDirOptions } from './flux-layout.js';
import { TEST_MODEL_FILE } from './layout-files.js';
import { SdTestModel, buildSdDir, removeFiles, type SdDirOptions } from './sd-layout.js';
import { Sd3TestModel, buildSd3Dir, type Sd3DirOptions } from './sd3-layout.js';
import { SdxlTestModel, buildSdxlDir, type SdxlDirOptions } from './sdxl-layout.js';

/** Any built test model (read back with readTestModel). */
export type TestModel = SdTestModel | SdxlTestModel | FluxTestModel | Sd3TestModel;

/** Directories that a loader must reject, each for one reason. */
export type BrokenDirKind =
  /** An SD directory with files removed (default: unet/model.onnx). */
  | 'missing-file'
  /** An SD directory whose UNet has no `encoder_hidden_states` input. */
  | 'unet-without-encoder-hidden-states'
  /** An SD directory whose text encoder (hidden 32) does not fit the UNet (cross_attention_dim 48). */
  | 'hidden-size-mismatch';

/**
 * Builds a broken SD directory. For `missing-file`, `missing` lists the paths (relative to
 * the directory) to remove.
 */
export async function buildBrokenDir(dir: string, kind: BrokenDirKind, opts: { missing?: string[] } = {}): Promise<SdTestModel> {
  switch (kind) {
    case 'missing-file': {
      const m = await buildSdDir(dir);
      await removeFiles(dir, opts.missing ?? ['unet/model.onnx']);
      return m;
    }
    case 'unet-without-encoder-hidden-states':
      return buildSdDir(dir, { withEncoderHiddenStates: false });
    case 'hidden-size-mismatch':
      return buildSdDir(dir, { hiddenSize: 32, crossAttentionDim: 48 });
    default:
      throw new Error(`unknown broken directory kind "${String(kind)}"`);
  }
}

type Preset =
  | { layout: 'sd'; options: SdDirOptions }
  | { layout: 'sdxl'; options: SdxlDirOptions }
  | { layout: 'flux'; options: FluxDirOptions }
  | { layout: 'sd3'; options: Sd3DirOptions }
  | { layout: 'broken'; kind: BrokenDirKind; missing?: string[] };

/**
 * Named test directories for tests and scripts. Most use non-default VAE factors (0.5,
 * shift 0.2) so a pipeline that uses a hard-coded factor instead of the config's shows.
 */
export const TEST_MODEL_DIRS: Readonly<Record<string, Preset>> = Object.freeze({
  'sd1-epsilon': { layout: 'sd', options: { scalingFactor: 0.5 } },
  'sd1-euler-karras': {
    layout: 'sd',
    options: { scalingFactor: 0.5, timestepType: 'float32', scheduler: { _class_name: 'EulerDiscreteScheduler', use_karras_sigmas: true } },
  },
  'sd1-fp16': { layout: 'sd', options: { scalingFactor: 0.5, precision: 'fp16' } },
  // A UNet call that takes seconds (on 2 cores, about 1.5 s): for what long model runs do to a stage.
  // Euler ends at σ = 0, so any number of steps lands on the closed-form picture.
  'sd1-slow': {
    layout: 'sd',
    options: {
      scalingFactor: 0.5,
      timestepType: 'float32',
      scheduler: { _class_name: 'EulerDiscreteScheduler' },
      extraWork: { size: 2048, products: 12 },
    },
  },
  'sd1-legacy-export': {
    layout: 'sd',
    options: {
      scalingFactor: 0.5,
      timestepShape: 'vector',
      timestepType: 'float32',
      vaeEncoderOutput: 'latent_sample',
      modelIndexStyle: 'onnx',
    },
  },
  'sd1-external-data': { layout: 'sd', options: { scalingFactor: 0.5, externalData: true } },
  'sd1-linspace': {
    layout: 'sd',
    options: {
      scalingFactor: 0.5,
      timestepType: 'float32',
      scheduler: { _class_name: 'EulerDiscreteScheduler', timestep_spacing: 'linspace' },
    },
  },
  'sd2-v': { layout: 'sd', options: { variant: 'sd2', scalingFactor: 0.5 } },
  sdxl: { layout: 'sdxl', options: { scalingFactor: 0.5 } },
  flux: { layout: 'flux', options: { scalingFactor: 0.5, shiftFactor: 0.2, externalData: true } },
  'flux-schnell': {
    layout: 'flux',
    options: { scalingFactor: 0.5, shiftFactor: 0.2, guidanceEmbeds: false, scheduler: { use_dynamic_shifting: false, shift: 1.0 } },
  },
  sd3: { layout: 'sd3', options: { scalingFactor: 0.5, shiftFactor: 0.2 } },
  'broken-missing-unet': { layout: 'broken', kind: 'missing-file', missing: ['unet/model.onnx'] },
  'broken-missing-scheduler': { layout: 'broken', kind: 'missing-file', missing: ['scheduler/scheduler_config.json'] },
  'broken-no-encoder-hidden-states': { layout: 'broken', kind: 'unet-without-encoder-hidden-states' },
  'broken-hidden-size-mismatch': { layout: 'broken', kind: 'hidden-size-mismatch' },
});

/** Changes to the named presets when building them. */
export interface TestDirOverrides {
  /** The extra UNet work of the presets that have some (`sd1-slow`): longer or shorter calls. */
  extraWork?: { size: number; products: number };
}

/** Builds one named test directory into `dir` (replacing what is there). */
export async function buildTestModelDir(name: string, dir: string, overrides: TestDirOverrides = {}): Promise<void> {
  const p = TEST_MODEL_DIRS[name];
  if (!p) throw new Error(`unknown test model directory "${name}" (known: ${Object.keys(TEST_MODEL_DIRS).join(', ')})`);
  await rm(dir, { recursive: true, force: true });
  switch (p.layout) {
    case 'sd':
      await buildSdDir(dir, p.options.extraWork && overrides.extraWork ? { ...p.options, extraWork: overrides.extraWork } : p.options);
      return;
    case 'sdxl':
      await buildSdxlDir(dir, p.options);
      return;
    case 'flux':
      await buildFluxDir(dir, p.options);
      return;
    case 'sd3':
      await buildSd3Dir(dir, p.options);
      return;
    case 'broken':
      await buildBrokenDir(dir, p.kind, { missing: p.missing });
  }
}

/** Builds named test directories (default: all) into `<outRoot>/<name>/`; returns their paths. */
export async function buildTestModelDirs(
  outRoot: string,
  only?: readonly string[],
  overrides: TestDirOverrides = {},
): Promise<Record<string, string>> {
  const names = only ?? Object.keys(TEST_MODEL_DIRS);
  const out: Record<string, string> = {};
  for (const name of names) {
    const dir = path.join(outRoot, name);
    await buildTestModelDir(name, dir, overrides);
    out[name] = dir;
  }
  return out;
}

/** Reads back the model a builder wrote (from `diffmesh_test_model.json`), for its expected answers. */
export async function readTestModel(dir: string): Promise<TestModel> {
  const rec = JSON.parse(await readFile(path.join(dir, TEST_MODEL_FILE), 'utf8')) as { layout: string; options: unknown };
  switch (rec.layout) {
    case 'sd':
      return new SdTestModel(rec.options as SdDirOptions);
    case 'sdxl':
      return new SdxlTestModel(rec.options as SdxlDirOptions);
    case 'flux':
      return new FluxTestModel(rec.options as FluxDirOptions);
    case 'sd3':
      return new Sd3TestModel(rec.options as Sd3DirOptions);
    default:
      throw new Error(`${dir}: unknown test model layout "${rec.layout}"`);
  }
}
