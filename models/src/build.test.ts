import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BUILD_HASH_FILE, BUILTIN_MODELS, buildModels, builderHash, builtinModelDir, defaultModelsRoot } from './build.js';
import { main } from './cli.js';
import * as models from './index.js';

const IMAGE = 'diffmesh/synthetic-dit-image';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-build-'));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await rm(root, { recursive: true, force: true });
});

describe('BUILTIN_MODELS and paths', () => {
  it('lists the built-in families', () => {
    expect(Object.keys(BUILTIN_MODELS).sort()).toEqual([
      'diffmesh/synthetic-dit-image',
      'diffmesh/synthetic-dit-video',
      'diffmesh/tiny-shapes',
    ]);
    for (const build of Object.values(BUILTIN_MODELS)) expect(typeof build).toBe('function');
  });

  it('resolves the default root to models/generated and model dirs under it', () => {
    const rootDir = defaultModelsRoot();
    expect(path.isAbsolute(rootDir)).toBe(true);
    expect(rootDir.split(path.sep).slice(-2)).toEqual(['models', 'generated']);
    expect(builtinModelDir('diffmesh/tiny-shapes')).toBe(path.join(rootDir, 'diffmesh', 'tiny-shapes'));
    expect(builtinModelDir(IMAGE, '/x')).toBe(path.join('/x', 'diffmesh', 'synthetic-dit-image'));
    expect(() => builtinModelDir('diffmesh/nope')).toThrow(/unknown built-in model "diffmesh\/nope"/);
  });

  it('exports the public API from the package index', () => {
    expect(models.BUILTIN_MODELS).toBe(BUILTIN_MODELS);
    expect(typeof models.buildModels).toBe('function');
    expect(typeof models.defaultModelsRoot).toBe('function');
    expect(typeof models.builtinModelDir).toBe('function');
  });
});

describe('buildModels', () => {
  it('builds into <root>/<org>/<name>, then skips while the build hash matches', async () => {
    const [first] = await buildModels({ outRoot: root, only: [IMAGE] });
    expect(first.status).toBe('built');
    const dir = path.join(root, 'diffmesh', 'synthetic-dit-image');
    expect(first.dir).toBe(dir);
    expect((await readFile(path.join(dir, BUILD_HASH_FILE), 'utf8')).trim()).toBe(await builderHash(IMAGE));
    // No temporary directories are left behind.
    expect(await readdir(path.join(root, 'diffmesh'))).toEqual(['synthetic-dit-image']);

    const [second] = await buildModels({ outRoot: root, only: [IMAGE] });
    expect(second.status).toBe('up-to-date');

    const [forced] = await buildModels({ outRoot: root, only: [IMAGE], force: true });
    expect(forced.status).toBe('built');
    expect(await readdir(path.join(root, 'diffmesh'))).toEqual(['synthetic-dit-image']);
  });

  it('rebuilds a directory whose hash is stale, replacing stray files', async () => {
    const dir = path.join(root, 'diffmesh', 'synthetic-dit-image');
    await buildModels({ outRoot: root, only: [IMAGE] });
    await writeFile(path.join(dir, BUILD_HASH_FILE), 'stale\n');
    await writeFile(path.join(dir, 'leftover.txt'), 'x');
    const [r] = await buildModels({ outRoot: root, only: [IMAGE] });
    expect(r.status).toBe('built');
    expect(existsSync(path.join(dir, 'leftover.txt'))).toBe(false);
    expect(await readdir(path.join(root, 'diffmesh'))).toEqual(['synthetic-dit-image']);
  });

  it('rejects unknown names before building anything', async () => {
    await expect(buildModels({ outRoot: root, only: [IMAGE, 'diffmesh/nope'] })).rejects.toThrow(/unknown built-in model "diffmesh\/nope"/);
    expect(await readdir(root)).toEqual([]);
  });
});

describe('cli', () => {
  it('exits 2 with a clear message for an unknown --only NAME', async () => {
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const code = await main(['build', '--only', 'diffmesh/nope', '--out', root]);
    expect(code).toBe(2);
    expect(String(err.mock.calls[0]?.[0])).toMatch(/unknown model "diffmesh\/nope"; built-in models: diffmesh\/tiny-shapes/);
    expect(await readdir(root)).toEqual([]);
  });

  it('exits 2 for an unknown command or flag', async () => {
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(await main(['frobnicate'])).toBe(2);
    expect(await main(['build', '--bogus'])).toBe(2);
  });

  it('builds with --only (comma-separated) and --out, then reports up to date', async () => {
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    expect(await main(['build', '--only', IMAGE, '--out', root])).toBe(0);
    expect(String(out.mock.calls.at(-1)?.[0])).toMatch(/✓ diffmesh\/synthetic-dit-image built/);
    expect(await main(['build', '--only', `${IMAGE},${IMAGE}`, '--out', root])).toBe(0);
    expect(String(out.mock.calls.at(-1)?.[0])).toMatch(/= diffmesh\/synthetic-dit-image up to date/);
  });
});
