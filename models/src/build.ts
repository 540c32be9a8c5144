import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSyntheticDitImage, buildSyntheticDitVideo, SYNTHETIC_DIT_BUILDER_VERSION } from './builders/synthetic-dit.js';
import { buildTinyShapes, TINY_SHAPES_BUILDER_VERSION } from './builders/tiny-shapes.js';

/** Writes one model's files into an (empty, existing or not) directory. */
export type ModelBuilder = (outDir: string) => Promise<void>;

interface RegistryEntry {
  build: ModelBuilder;
  /** Bumped by hand when the builder's output changes. */
  version: string;
  /** Source files (relative to this module's directory, without extension) that shape the output. */
  sources: string[];
}

const SHARED_SOURCES = ['onnx/graph', 'onnx/layers', 'tokenizer'];

const REGISTRY: Record<string, RegistryEntry> = {
  'diffmesh/tiny-shapes': {
    build: buildTinyShapes,
    version: TINY_SHAPES_BUILDER_VERSION,
    sources: ['builders/tiny-shapes', ...SHARED_SOURCES],
  },
  'diffmesh/synthetic-dit-image': {
    build: buildSyntheticDitImage,
    version: SYNTHETIC_DIT_BUILDER_VERSION,
    sources: ['builders/synthetic-dit', ...SHARED_SOURCES],
  },
  'diffmesh/synthetic-dit-video': {
    build: buildSyntheticDitVideo,
    version: SYNTHETIC_DIT_BUILDER_VERSION,
    sources: ['builders/synthetic-dit', ...SHARED_SOURCES],
  },
};

/** The built-in model families: registry name → builder. */
export const BUILTIN_MODELS: Readonly<Record<string, ModelBuilder>> = Object.freeze(
  Object.fromEntries(Object.entries(REGISTRY).map(([name, e]) => [name, e.build])),
);

/** Name of the file that records which builder version produced a model directory. */
export const BUILD_HASH_FILE = '.build-hash';

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** `.js` when running compiled, `.ts` when a test runner loads the sources. */
const OWN_EXT = path.extname(fileURLToPath(import.meta.url)) || '.js';

/** Absolute path of `models/generated`, where `npm run build` writes the built-in models. */
export function defaultModelsRoot(): string {
  // This module lives in models/dist (compiled) or models/src (sources): both sit beside `generated`.
  return path.resolve(HERE, '..', 'generated');
}

/** True for a name in BUILTIN_MODELS. */
export function isBuiltinModel(name: string): boolean {
  return Object.hasOwn(REGISTRY, name);
}

/** Directory of a built-in model under `root` (default: defaultModelsRoot()). */
export function builtinModelDir(name: string, root: string = defaultModelsRoot()): string {
  if (!isBuiltinModel(name)) {
    throw new Error(`unknown built-in model "${name}" (known: ${Object.keys(REGISTRY).join(', ')})`);
  }
  return path.join(root, ...name.split('/'));
}

/**
 * The hash written to `.build-hash`: the model name, its builder version and the bytes of
 * the source files the builder uses, so any change to a builder rebuilds its models.
 */
export async function builderHash(name: string): Promise<string> {
  const entry = REGISTRY[name];
  if (!entry) throw new Error(`unknown built-in model "${name}"`);
  const h = createHash('sha256');
  h.update(`diffmesh-models-build/1\0${name}\0${entry.version}\0`);
  for (const src of entry.sources) {
    const file = path.join(HERE, `${src}${OWN_EXT}`);
    h.update(`${src}\0`);
    // A missing file only happens with an unusual layout; the explicit version still counts.
    if (existsSync(file)) h.update(await readFile(file));
    h.update('\0');
  }
  return h.digest('hex');
}

export interface BuildModelsOptions {
  /** Root directory; each model goes to `<outRoot>/<org>/<name>/`. Default: defaultModelsRoot(). */
  outRoot?: string;
  /** Build only these models (default: all of BUILTIN_MODELS). */
  only?: string[];
  /** Rebuild even when `.build-hash` says the directory is up to date. */
  force?: boolean;
  /** Called after each model, e.g. to print progress. */
  onResult?: (result: BuildResult) => void;
}

export interface BuildResult {
  name: string;
  dir: string;
  status: 'built' | 'up-to-date' | 'failed';
  /** Wall time in milliseconds. */
  ms: number;
  /** Total size of the model's files in bytes (built and up-to-date models). */
  bytes?: number;
  error?: Error;
}

/** Thrown by buildModels when some model failed to build; `results` lists every model. */
export class BuildModelsError extends Error {
  constructor(readonly results: BuildResult[]) {
    const failed = results.filter((r) => r.status === 'failed');
    super(
      `failed to build ${failed.length} model(s):\n` + failed.map((r) => `  ${r.name}: ${r.error?.message ?? 'unknown error'}`).join('\n'),
    );
    this.name = 'BuildModelsError';
  }
}

/**
 * Builds built-in models into `<outRoot>/<org>/<name>/`. A model whose directory holds a
 * `.build-hash` equal to builderHash(name) is skipped unless `force`. Each model is
 * written into a temporary sibling directory that is renamed into place, so a reader never
 * sees a half-written model. All requested models are attempted; if any fails, a
 * BuildModelsError is thrown afterwards. Unknown names throw before anything is built.
 */
export async function buildModels(opts: BuildModelsOptions = {}): Promise<BuildResult[]> {
  const outRoot = path.resolve(opts.outRoot ?? defaultModelsRoot());
  const names = opts.only ?? Object.keys(REGISTRY);
  const unknown = names.filter((n) => !isBuiltinModel(n));
  if (unknown.length > 0) {
    throw new Error(
      `unknown built-in model${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `"${n}"`).join(', ')} ` +
        `(known: ${Object.keys(REGISTRY).join(', ')})`,
    );
  }
  const results: BuildResult[] = [];
  for (const name of [...new Set(names)]) {
    const result = await buildOne(name, outRoot, opts.force ?? false);
    results.push(result);
    opts.onResult?.(result);
  }
  if (results.some((r) => r.status === 'failed')) throw new BuildModelsError(results);
  return results;
}

async function buildOne(name: string, outRoot: string, force: boolean): Promise<BuildResult> {
  const started = performance.now();
  const dir = builtinModelDir(name, outRoot);
  const elapsed = (): number => Math.round(performance.now() - started);
  const hash = await builderHash(name);
  if (!force && (await readHash(dir)) === hash) {
    return { name, dir, status: 'up-to-date', ms: elapsed(), bytes: await dirSize(dir) };
  }
  const parent = path.dirname(dir);
  await mkdir(parent, { recursive: true });
  const tag = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const tmp = path.join(parent, `.${path.basename(dir)}.tmp-${tag}`);
  try {
    await mkdir(tmp, { recursive: true });
    await REGISTRY[name].build(tmp);
    await writeFile(path.join(tmp, BUILD_HASH_FILE), `${hash}\n`);
    await replaceDir(tmp, dir, hash);
    return { name, dir, status: 'built', ms: elapsed(), bytes: await dirSize(dir) };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    return { name, dir, status: 'failed', ms: elapsed(), error: err instanceof Error ? err : new Error(String(err)) };
  }
}

/** Moves `tmp` to `dir`, replacing an older `dir` (rename is atomic; the old one is moved aside first). */
async function replaceDir(tmp: string, dir: string, hash: string): Promise<void> {
  const old = `${tmp}.old`;
  let movedAside = false;
  if (existsSync(dir)) {
    await rename(dir, old);
    movedAside = true;
  }
  try {
    await rename(tmp, dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Another process won the race with the same build: keep theirs.
    if ((code === 'ENOTEMPTY' || code === 'EEXIST') && (await readHash(dir)) === hash) {
      await rm(tmp, { recursive: true, force: true });
    } else {
      if (movedAside && !existsSync(dir)) {
        await rename(old, dir); // put the previous build back
        movedAside = false;
      }
      throw err;
    }
  } finally {
    if (movedAside) await rm(old, { recursive: true, force: true });
  }
}

async function readHash(dir: string): Promise<string | undefined> {
  try {
    return (await readFile(path.join(dir, BUILD_HASH_FILE), 'utf8')).trim();
  } catch {
    return undefined;
  }
}

async function dirSize(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    total += entry.isDirectory() ? await dirSize(p) : (await stat(p)).size;
  }
  return total;
}
