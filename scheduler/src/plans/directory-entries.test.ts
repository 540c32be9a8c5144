import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '@diffmesh/core';
import { loadPlanRegistry } from './registry.js';

// Directory models in the plan registry: the scheduler reads only their JSON files (the ONNX
// files must exist, their contents are the stages' business), so these directories hold empty
// model.onnx files.

let root: string;

async function writeDir(dir: string, files: Record<string, unknown>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), typeof content === 'string' ? content : JSON.stringify(content));
  }
}

async function fluxDir(name: string): Promise<string> {
  const dir = path.join(root, name);
  await writeDir(dir, {
    'model_index.json': { _class_name: 'FluxPipeline' },
    'scheduler/scheduler_config.json': { _class_name: 'FlowMatchEulerDiscreteScheduler', use_dynamic_shifting: true },
    'tokenizer/tokenizer.json': '{}',
    'tokenizer_2/tokenizer.json': '{}',
    'text_encoder/model.onnx': '',
    'text_encoder_2/model.onnx': '',
    'transformer/model.onnx': '',
    'transformer/config.json': { guidance_embeds: true, sample_size: 64 },
    'vae_decoder/model.onnx': '',
    'vae_decoder/config.json': { scaling_factor: 0.3611, shift_factor: 0.1159, latent_channels: 16 },
  });
  return realpath(dir);
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'plans-dirs-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('model directories in the plan registry', () => {
  it('serves --model-directories under their real path with the plan, pools and defaults of their files', async () => {
    const dir = await fluxDir('flux-dev');
    const registry = await loadPlanRegistry(undefined, { directories: [dir] });
    const entry = registry.lookup(dir);
    expect(entry.directory).toBe(dir);
    expect(entry.modalities).toEqual(['text-to-image']);
    expect(entry.stages.map((s) => s.name)).toEqual(['text_encoding', 'text_encoding_2', 'denoising', 'vae_decoding']);
    expect(entry.stages.map((s) => s.pool)).toEqual(
      ['encoder', 'encoder2', 'dit', 'vae'].map((p) => expect.stringMatching(new RegExp(`^${p}-flux-dev-[0-9a-f]{6}$`)) as unknown),
    );
    // FluxPipeline: transformer sample_size × VAE factor, 28 steps, guidance 3.5; multiples of 16.
    expect(entry.defaults).toMatchObject({ width: 512, height: 512, steps: 28, guidanceScale: 3.5, numFrames: 1 });
    expect(entry.constraints).toMatchObject({ sizeMultiple: 16, maxFrames: 1 });
    // The shipped plans are still there.
    expect(registry.lookup('diffmesh/tiny-shapes').model).toBe('diffmesh/tiny-shapes');
  });

  it('finds a directory by any path to it, and runs it under its model id', async () => {
    const dir = await fluxDir('by-path');
    const link = path.join(root, 'link-to-by-path');
    await symlink(dir, link);
    const registry = await loadPlanRegistry(undefined, { directories: [link] });
    expect(registry.find(dir)?.model).toBe(dir);
    expect(registry.canonicalModel(link)).toBe(dir);
    expect(registry.canonicalModel(`./${path.relative(process.cwd(), link)}`)).toBe(dir);
    expect(registry.canonicalModel('diffmesh/tiny-shapes')).toBe('diffmesh/tiny-shapes');
    expect(registry.find(path.join(root, 'elsewhere'))).toBeUndefined();
  });

  it('takes directory entries from a plans file: an id of its own, pools and defaults it gives, a path relative to the file', async () => {
    await fluxDir('flux-schnell');
    const file = path.join(root, 'plans.yaml');
    await writeFile(
      file,
      [
        'version: 1',
        'plans:',
        '  - model: acme/flux-schnell',
        '    directory: ./flux-schnell',
        '    stages:',
        '      - { name: text_encoding, pool: enc-clip }',
        '      - { name: text_encoding_2, pool: enc-t5 }',
        '      - { name: denoising, pool: dit-flux }',
        '      - { name: vae_decoding, pool: vae-flux }',
        '    defaults: { steps: 4, guidanceScale: 0 }',
      ].join('\n'),
    );
    const registry = await loadPlanRegistry(file);
    const entry = registry.lookup('acme/flux-schnell');
    expect(entry.directory).toBe(await realpath(path.join(root, 'flux-schnell')));
    expect(entry.stages[1]).toEqual({ name: 'text_encoding_2', pool: 'enc-t5' });
    expect(entry.defaults).toMatchObject({ width: 512, steps: 4, guidanceScale: 0 });
    expect(registry.canonicalModel(path.join(root, 'flux-schnell'))).toBe('acme/flux-schnell');
  });

  it('refuses a directory that is not a model, naming the entry and the file', async () => {
    const dir = path.join(root, 'half');
    await writeDir(dir, { 'model_index.json': { _class_name: 'StableDiffusionPipeline' } });
    const err = await loadPlanRegistry(undefined, { directories: [dir] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toContain(`directories[0].directory`);
    expect((err as ConfigError).message).toContain(`model directory ${await realpath(dir)}: text_encoder/model.onnx: missing`);
  });
});
