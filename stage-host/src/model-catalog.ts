import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { Code, DiffmeshError } from '@diffmesh/core';
import { looksLikePath } from '@diffmesh/model-layout';
import { LoadedModelDirectory } from './loaded-model-directory.js';
import { latentFrames, readModelManifest, type LoadedManifest } from './model-manifest.js';

/** A model as a stage finds it: a built-in manifest, or a diffusers/optimum directory. */
export type ResolvedModel =
  { kind: 'manifest'; model: string; manifest: LoadedManifest } | { kind: 'directory'; model: string; directory: LoadedModelDirectory };

/** The latent of a model's default request (its frames, height and width in latent cells). */
export function defaultLatentSize(m: ResolvedModel): { frames: number; height: number; width: number } {
  if (m.kind === 'manifest') {
    const { latent, defaults } = m.manifest.manifest;
    const f = latent.spatialFactor;
    return { frames: latentFrames(defaults.numFrames, latent.temporalFactor), height: defaults.height / f, width: defaults.width / f };
  }
  const { vae, defaults } = m.directory.layout;
  return { frames: 1, height: defaults.height / vae.scaleFactor, width: defaults.width / vae.scaleFactor };
}

/** Options of {@link ModelCatalog}. */
export interface ModelCatalogOptions {
  /** Model ids that name a directory (`my/sd` → `/models/sd-1.5-onnx`). */
  directories?: Record<string, string>;
}

/**
 * Finds models by id. A built-in model named `org/name` lives in `<root>/org/name/model.json`
 * (the first root that has it wins). A path (absolute, or starting with `./` or `../`) or a
 * configured id names a diffusers/optimum ONNX directory, which is read and checked once.
 */
export class ModelCatalog {
  private readonly cache = new Map<string, Promise<LoadedManifest>>();
  private readonly dirs = new Map<string, Promise<LoadedModelDirectory>>();
  private readonly aliases: Record<string, string>;

  constructor(
    readonly roots: string[],
    opts: ModelCatalogOptions = {},
  ) {
    this.aliases = { ...opts.directories };
  }

  /** Model ids configured to name a directory. */
  get directoryIds(): string[] {
    return Object.keys(this.aliases);
  }

  /** True when `model` names a directory (a path or a configured id) rather than a built-in model. */
  isDirectory(model: string): boolean {
    return model in this.aliases || looksLikePath(model);
  }

  /**
   * The model `model` names: a directory for a path or a configured id, else a manifest.
   * FAILED_PRECONDITION / MODEL_LOAD_FAILED when its files are missing or do not fit.
   */
  async resolve(model: string): Promise<ResolvedModel> {
    if (this.isDirectory(model)) return { kind: 'directory', model, directory: await this.directory(model) };
    return { kind: 'manifest', model, manifest: await this.get(model) };
  }

  /** The directory a path or configured id names (opened and checked once per real path). */
  directory(model: string): Promise<LoadedModelDirectory> {
    const dir = path.resolve(this.aliases[model] ?? model);
    let p = this.dirs.get(dir);
    if (!p) {
      p = LoadedModelDirectory.open(dir);
      p.catch(() => this.dirs.delete(dir));
      this.dirs.set(dir, p);
    }
    return p;
  }

  /** Loads (once) the manifest of `model`; FAILED_PRECONDITION when no root has its files. */
  get(model: string): Promise<LoadedManifest> {
    let p = this.cache.get(model);
    if (!p) {
      p = this.load(model);
      p.catch(() => this.cache.delete(model));
      this.cache.set(model, p);
    }
    return p;
  }

  /** Names of every model found under the roots. */
  async list(): Promise<string[]> {
    const names = new Set<string>();
    for (const root of this.roots) {
      for (const org of await dirs(root)) {
        for (const name of await dirs(path.join(root, org))) {
          if (await exists(path.join(root, org, name, 'model.json'))) names.add(`${org}/${name}`);
        }
      }
    }
    return [...names].sort();
  }

  private async load(model: string): Promise<LoadedManifest> {
    if (!/^[\w.-]+\/[\w.-]+$/.test(model) || model.includes('..')) {
      throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `model: invalid model name "${model}"`, {
        metadata: { field: 'model' },
      });
    }
    for (const root of this.roots) {
      const dir = path.join(root, model);
      if (await exists(path.join(dir, 'model.json'))) {
        const loaded = await readModelManifest(dir);
        if (loaded.manifest.name !== model) {
          throw new DiffmeshError(
            Code.FAILED_PRECONDITION,
            'MODEL_LOAD_FAILED',
            `model files in ${dir} are for "${loaded.manifest.name}", not "${model}"`,
          );
        }
        return loaded;
      }
    }
    throw new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'MODEL_LOAD_FAILED',
      `no files for model "${model}" under ${this.roots.join(', ') || '(no model roots configured)'}`,
      { metadata: { model } },
    );
  }
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

async function dirs(p: string): Promise<string[]> {
  try {
    return (await readdir(p, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch {
    return [];
  }
}
