import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { Code, DiffmeshError } from '../errors/errors.js';
import { readModelManifest, type LoadedManifest } from './manifest.js';

/**
 * Finds model directories by name under one or more roots. A model named `org/name` lives
 * in `<root>/org/name/model.json`; the first root that has it wins.
 */
export class ModelCatalog {
  private readonly cache = new Map<string, Promise<LoadedManifest>>();

  constructor(readonly roots: string[]) {}

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
