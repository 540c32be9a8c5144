import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePng } from '@diffmesh/media';
import { buildSdDir, meanAbsoluteError, writeTestLora } from '@diffmesh/models';
import { runDiffmesh } from './fixtures/run-cli.js';

// LoRA adapters as a user handles them: files added to a folder with `diffmesh adapters`, then
// named by `generate --lora NAME[:SCALE]` on a model directory (a separate node process each).

let root: string;
let model: string;
let teModel: string;
let loras: string;
const D = 32;
const diffmesh = (args: string[]) => runDiffmesh(args, { cwd: root, env: { DIFFMESH_LORA_DIR: loras } });

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-cli-lora-'));
  model = path.join(root, 'sd');
  loras = path.join(root, 'loras');
  await buildSdDir(model, { attentionBlock: true, hiddenSize: D, scalingFactor: 0.5 });
  teModel = path.join(root, 'sd-te');
  await buildSdDir(teModel, { textEncoderLayer: true, hiddenSize: D, scalingFactor: 0.5 });
  await writeTestLora(path.join(root, 'ink-v2.safetensors'), { format: 'peft', crossAttentionDim: D, alpha: 2, seed: 41 });
  await writeTestLora(path.join(root, 'pencil.safetensors'), { format: 'kohya', crossAttentionDim: D, rank: 2, alpha: 1, seed: 42 });
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

const picture = async (file: string) => decodePng(await readFile(path.join(root, file))).rgb;

describe('diffmesh adapters and --lora', () => {
  it('adds, lists and removes adapters, refusing a damaged file with the reason', async () => {
    const added = await diffmesh(['adapters', 'add', path.join(root, 'ink-v2.safetensors'), '--name', 'ink']);
    expect(added.stderr).toBe('');
    expect(added.stdout).toMatch(/added ink: peft, for sd\/sdxl, 13 layers, rank 4/);
    expect((await diffmesh(['adapters', 'add', path.join(root, 'pencil.safetensors')])).code).toBe(0);
    const listed = JSON.parse((await diffmesh(['adapters', 'list', '--json'])).stdout) as Array<{ name: string; format: string }>;
    expect(listed.map((a) => [a.name, a.format])).toEqual([
      ['ink', 'peft'],
      ['pencil', 'kohya'],
    ]);
    const bytes = await readFile(path.join(root, 'pencil.safetensors'));
    await writeFile(path.join(root, 'cut.safetensors'), bytes.subarray(0, bytes.length - 10));
    const cut = await diffmesh(['adapters', 'add', path.join(root, 'cut.safetensors')]);
    expect(cut.code).toBe(2);
    expect(cut.stderr).toMatch(/adapter cut\.safetensors: truncated: tensor .* ends at byte/);
    const badName = await diffmesh(['adapters', 'add', path.join(root, 'pencil.safetensors'), '--name', '../x']);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toMatch(/no path/);
    await diffmesh(['adapters', 'add', path.join(root, 'pencil.safetensors'), '--name', 'spare']);
    expect((await diffmesh(['adapters', 'remove', 'spare'])).stdout).toBe('removed spare\n');
    expect((await diffmesh(['adapters', 'remove', 'spare'])).code).toBe(2);
  });

  it('takes --lora on generate and submit, and refuses --lora-dir with --remote (the mesh serves its own)', async () => {
    for (const command of ['generate', 'submit']) expect((await diffmesh([command, '--help'])).stdout).toMatch(/--lora <name\[:scale\]>/);
    const remote = await diffmesh(['generate', 'x', '--remote', '127.0.0.1:1', '--lora-dir', loras, '--lora', 'ink', '--no-progress']);
    expect(remote.code).toBe(2);
    expect(remote.stderr).toMatch(/lora_dir: applies to the embedded runtime.*\(--lora-dir\)/);
    const tooBig = await diffmesh(['adapters', 'add', path.join(root, 'pencil.safetensors'), '--name', 'small', '--max-bytes', '100']);
    expect(tooBig.code).toBe(2);
    expect(tooBig.stderr).toMatch(/over the 100-byte limit/);
  });

  it('generate --lora applies adapters (several at once), scale 0 is the plain picture, bad names and scales are refused', async () => {
    // The same files the first case adds (so this case also runs alone).
    await mkdir(loras, { recursive: true });
    await cp(path.join(root, 'ink-v2.safetensors'), path.join(loras, 'ink.safetensors'));
    await cp(path.join(root, 'pencil.safetensors'), path.join(loras, 'pencil.safetensors'));
    const common = ['generate', 'a red cat', '-m', model, '--seed', '3', '--steps', '6', '--guidance', '2', '--no-progress'];
    expect((await diffmesh([...common, '-o', 'plain.png'])).code).toBe(0);
    const styled = await diffmesh([...common, '--lora', 'ink:0.8', '-o', 'ink.png']);
    expect(styled.stderr).toBe('');
    expect((await diffmesh([...common, '--lora', 'ink:0.8', '--lora', 'pencil', '-o', 'both.png'])).code).toBe(0);
    expect((await diffmesh([...common, '--lora', 'ink:0', '-o', 'zero.png'])).code).toBe(0);
    const plain = await picture('plain.png');
    expect(meanAbsoluteError(await picture('ink.png'), plain)).toBeGreaterThan(2);
    expect(meanAbsoluteError(await picture('both.png'), await picture('ink.png'))).toBeGreaterThan(0.5);
    expect(Buffer.from(await picture('zero.png')).equals(Buffer.from(plain))).toBe(true);
    const unknown = await diffmesh([...common, '--lora', 'nope', '-o', 'x.png']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/adapters\[0\]\.name: no adapter named nope here \(known: ink, pencil\) \(--lora\)/);
    const scale = await diffmesh([...common, '--lora', 'ink:strong', '-o', 'x.png']);
    expect(scale.code).toBe(2);
    expect(scale.stderr).toMatch(/adapters\[0\]\.scale: expected a number after "ink:"/);
    const far = await diffmesh([...common, '--lora', 'ink:20', '-o', 'x.png']);
    expect(far.stderr).toMatch(/adapters\[0\]\.scale: must be a finite number from -10 to 10, got 20/);
  });

  it('generate --lora applies the text-encoder part of a file (kohya lora_te_), scale 0 is the plain picture', async () => {
    await mkdir(loras, { recursive: true });
    await writeTestLora(path.join(loras, 'caption.safetensors'), {
      format: 'kohya',
      crossAttentionDim: D,
      modules: [],
      textEncoders: [{ component: 'text_encoder', hidden: D }],
      magnitude: 0.5,
      seed: 43,
    });
    const common = ['generate', 'a red cat', '-m', teModel, '--seed', '3', '--steps', '6', '--guidance', '2', '--no-progress'];
    expect((await diffmesh([...common, '-o', 'te-plain.png'])).code).toBe(0);
    const styled = await diffmesh([...common, '--lora', 'caption', '-o', 'te-caption.png']);
    expect(styled.stderr).toBe('');
    expect((await diffmesh([...common, '--lora', 'caption:0', '-o', 'te-zero.png'])).code).toBe(0);
    const plain = await picture('te-plain.png');
    expect(meanAbsoluteError(await picture('te-caption.png'), plain)).toBeGreaterThan(0.5);
    expect(Buffer.from(await picture('te-zero.png')).equals(Buffer.from(plain))).toBe(true);
  });
});
