import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../cli.js';
import { FluxTestModel } from './flux-layout.js';
import { SdTestModel } from './sd-layout.js';
import { SdxlTestModel } from './sdxl-layout.js';
import { buildBrokenDir, buildTestModelDirs, readTestModel, TEST_MODEL_DIRS } from './test-model-dirs.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-test-dirs-'));
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

async function hashes(dir: string, prefix = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) Object.assign(out, await hashes(p, `${prefix}${e.name}/`));
    else
      out[`${prefix}${e.name}`] = createHash('sha256')
        .update(await readFile(p))
        .digest('hex');
  }
  return out;
}

async function dirBytes(dir: string): Promise<number> {
  let n = 0;
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n += e.isDirectory() ? await dirBytes(p) : (await readFile(p)).length;
  }
  return n;
}

describe('named test directories', () => {
  it('build quickly, deterministically and small', async () => {
    const started = performance.now();
    const a = await buildTestModelDirs(path.join(root, 'a'));
    const ms = performance.now() - started;
    const b = await buildTestModelDirs(path.join(root, 'b'));
    expect(Object.keys(a).sort()).toEqual(Object.keys(TEST_MODEL_DIRS).sort());
    for (const name of Object.keys(a)) {
      expect(await hashes(a[name]), name).toEqual(await hashes(b[name]));
      expect(await dirBytes(a[name]), name).toBeLessThan(2_000_000);
    }
    expect(ms).toBeLessThan(5_000); // ~0.1–0.3 s on the build machine; generous for a loaded one
  });

  it('readTestModel gives back the model that was built', async () => {
    const dirs = await buildTestModelDirs(path.join(root, 'c'), ['sd2-v', 'sdxl', 'flux']);
    const sd = await readTestModel(dirs['sd2-v']);
    expect(sd).toBeInstanceOf(SdTestModel);
    expect((sd as SdTestModel).options).toMatchObject({ variant: 'sd2', scalingFactor: 0.5 });
    expect(await readTestModel(dirs.sdxl)).toBeInstanceOf(SdxlTestModel);
    const flux = await readTestModel(dirs.flux);
    expect(flux).toBeInstanceOf(FluxTestModel);
    // The flux preset keeps its transformer and T5 weights in model.onnx_data, as real FLUX does.
    expect(existsSync(path.join(dirs.flux, 'transformer', 'model.onnx_data'))).toBe(true);
    const s = await ort.InferenceSession.create(path.join(dirs.flux, 'text_encoder_2', 'model.onnx'));
    const t5 = await s.run({ input_ids: new ort.Tensor('int64', BigInt64Array.from([4n, 1n]), [1, 2]) });
    expect(t5.last_hidden_state.dims).toEqual([1, 2, 32]);
    await s.release();
    const req = { prompt: 'a red car', guidanceScale: 3.5 };
    expect(flux.expectedImage(req).data).toEqual(new FluxTestModel({ scalingFactor: 0.5, shiftFactor: 0.2 }).expectedImage(req).data);
  });

  it('the CLI builds selected directories and rejects unknown names', async () => {
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await main(['test-dirs', '--out', path.join(root, 'cli'), '--only', 'sd1-epsilon,flux'])).toBe(0);
      expect(existsSync(path.join(root, 'cli', 'sd1-epsilon', 'unet', 'model.onnx'))).toBe(true);
      expect(existsSync(path.join(root, 'cli', 'flux', 'transformer', 'model.onnx'))).toBe(true);
      expect(existsSync(path.join(root, 'cli', 'sdxl'))).toBe(false);
      expect(await main(['test-dirs', '--only', 'nope'])).toBe(2);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });
});

describe('broken directories', () => {
  it('missing-file removes the named files', async () => {
    const dir = path.join(root, 'broken-missing');
    await buildBrokenDir(dir, 'missing-file', { missing: ['vae_decoder/config.json', 'tokenizer/merges.txt'] });
    expect(existsSync(path.join(dir, 'vae_decoder/model.onnx'))).toBe(true);
    expect(existsSync(path.join(dir, 'vae_decoder/config.json'))).toBe(false);
    expect(existsSync(path.join(dir, 'tokenizer/merges.txt'))).toBe(false);
  });

  it('unet-without-encoder-hidden-states has no such input', async () => {
    const dir = path.join(root, 'broken-ehs');
    await buildBrokenDir(dir, 'unet-without-encoder-hidden-states');
    const s = await ort.InferenceSession.create(path.join(dir, 'unet', 'model.onnx'));
    expect(s.inputNames).toEqual(['sample', 'timestep']);
    await s.release();
  });

  it('hidden-size-mismatch: text encoder 32 wide, UNet cross_attention_dim 48', async () => {
    const dir = path.join(root, 'broken-dims');
    await buildBrokenDir(dir, 'hidden-size-mismatch');
    const te = JSON.parse(await readFile(path.join(dir, 'text_encoder/config.json'), 'utf8'));
    const unet = JSON.parse(await readFile(path.join(dir, 'unet/config.json'), 'utf8'));
    expect(te.hidden_size).toBe(32);
    expect(unet.cross_attention_dim).toBe(48);
    // The graph itself rejects 32-wide states.
    const s = await ort.InferenceSession.create(path.join(dir, 'unet', 'model.onnx'));
    await expect(
      s.run({
        sample: new ort.Tensor('float32', new Float32Array(256), [1, 4, 8, 8]),
        timestep: new ort.Tensor('int64', BigInt64Array.from([10n]), []),
        encoder_hidden_states: new ort.Tensor('float32', new Float32Array(77 * 32), [1, 77, 32]),
      }),
    ).rejects.toThrow();
    await s.release();
  });
});
