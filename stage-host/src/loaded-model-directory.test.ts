import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiffmeshError, silentLogger } from '@diffmesh/core';
import { ModelCatalog } from './model-catalog.js';
import { availableExecutionProviders, checkExecutionProviders, providerStatuses } from './execution-providers.js';
import { SessionCache } from './onnx-sessions.js';
import { float16Bits, float16Value, fromFloat16, toFloat16 } from '@diffmesh/tensor-client';
import { feedTensor, floatOutput } from './ort-tensors.js';
import { servedModels, servedStage, StageServiceConfigSchema, startStageService } from './stage-process.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'stage-host-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function error(fn: () => unknown): DiffmeshError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DiffmeshError);
    return err as DiffmeshError;
  }
  throw new Error('expected an error');
}

describe('execution providers', () => {
  it('accepts the CPU and what this platform’s onnxruntime-node has', () => {
    expect(availableExecutionProviders()).toContain('cpu');
    expect(() => checkExecutionProviders(['cpu'])).not.toThrow();
    expect(new SessionCache({ intraOpThreads: 1, interOpThreads: 1 }).executionProviders).toEqual(['cpu']);
  });

  it('names a provider this platform lacks, and what it has', () => {
    const missing = ['coreml', 'dml', 'cuda'].find((p) => !availableExecutionProviders().includes(p)) ?? 'coreml';
    const e = error(() => new SessionCache({ intraOpThreads: 1, interOpThreads: 1, executionProviders: [missing as 'coreml'] }));
    expect(e.reason).toBe('MODEL_LOAD_FAILED');
    expect(e.message).toMatch(
      new RegExp(`execution provider "${missing}" is not available in onnxruntime-node on \\w+/\\w+ \\(available: cpu`),
    );
  });

  it('refuses an unknown provider name', () => {
    const e = error(() => checkExecutionProviders(['tpu']));
    expect([e.code, e.message]).toEqual([3, 'execution provider "tpu" is unknown (known: cpu, cuda, tensorrt, coreml, dml, webgpu)']);
  });

  it('says which file failed to load, as UNAVAILABLE (another instance may load it)', async () => {
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
    const err = await sessions.get(path.join(root, 'nothing.onnx')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).message).toContain(`${path.join(root, 'nothing.onnx')}: onnxruntime could not load the model`);
    expect([(err as DiffmeshError).code, (err as DiffmeshError).reason]).toEqual([14, 'MODEL_LOAD_FAILED']);
    await sessions.close();
  });
});

describe('float16 feeds and outputs', () => {
  it('rounds to nearest even like numpy, including subnormals, infinities and NaN', () => {
    expect(float16Bits(1)).toBe(0x3c00);
    expect(float16Bits(-2)).toBe(0xc000);
    expect(float16Bits(65504)).toBe(0x7bff);
    expect(float16Bits(70000)).toBe(0x7c00);
    expect(float16Bits(2 ** -24)).toBe(0x0001);
    expect(float16Bits(2 ** -26)).toBe(0x0000);
    expect(float16Bits(1 + 2 ** -11)).toBe(0x3c00); // a tie rounds to even
    expect(float16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(float16Value(float16Bits(NaN))).toBeNaN();
    expect(float16Value(0x7c00)).toBe(Infinity);
    const values = [0, 0.5, -0.333, 999.5, 1e-5, -65504];
    const back = fromFloat16(toFloat16(values));
    values.forEach((v, i) => expect(Math.abs(back[i] - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -11 + 2 ** -24));
  });

  it('feeds a graph input in its element type (integers truncated, as numpy casts)', () => {
    expect(feedTensor('int64', [801.7], []).data).toEqual(BigInt64Array.of(801n));
    expect(feedTensor('int32', [3.9, -1], [2]).data).toEqual(Int32Array.of(3, -1));
    const half = feedTensor('float16', [0.25, 1], [1, 2]);
    expect([half.type, [...half.dims]]).toEqual(['float16', [1, 2]]);
    expect(floatOutput(half)).toEqual(Float32Array.of(0.25, 1));
    expect(() => feedTensor('string', [1], [1])).toThrow(/cannot feed a graph input of type string/);
  });
});

describe('model ids', () => {
  it('serves registry names as given, paths under their real path, id=DIR under the id', async () => {
    const link = path.join(root, 'link');
    await symlink(root, link);
    const { ids, directories } = await servedModels(['diffmesh/tiny-shapes', `${link}`, 'my/sd=./somewhere']);
    expect(ids).toEqual(['diffmesh/tiny-shapes', root, 'my/sd']);
    expect(directories).toEqual({ 'my/sd': path.resolve('somewhere') });
  });

  it('resolves a path or a configured id to a directory, a name to a manifest', async () => {
    const catalog = new ModelCatalog([root], { directories: { 'my/sd': path.join(root, 'missing-dir') } });
    expect(catalog.isDirectory('/abs/dir')).toBe(true);
    expect(catalog.isDirectory('./dir')).toBe(true);
    expect(catalog.isDirectory('my/sd')).toBe(true);
    expect(catalog.isDirectory('diffmesh/tiny-shapes')).toBe(false);
    const err = await catalog.resolve('my/sd').catch((e: unknown) => e);
    expect((err as DiffmeshError).message).toContain(`model directory ${path.join(root, 'missing-dir')}: no such directory`);
    const manifest = await catalog.resolve('org/none').catch((e: unknown) => e);
    expect((manifest as DiffmeshError).message).toContain('no files for model "org/none"');
  });

  it('picks the stage a service serves from --stage', () => {
    expect(servedStage('', ['vae_decoding', 'image_encoding'] as const)).toBe('vae_decoding');
    expect(servedStage('image_encoding', ['vae_decoding', 'image_encoding'] as const)).toBe('image_encoding');
    expect(error(() => servedStage('denoising', ['text_encoding', 'text_encoding_2'] as const)).message).toBe(
      'stage: this service serves text_encoding or text_encoding_2, not "denoising"',
    );
  });
});

describe('a stage asked for a GPU provider this machine lacks', () => {
  const cuda = providerStatuses().find((s) => s.provider === 'cuda');
  it.runIf(cuda !== undefined && !cuda.installed)(
    'fails at start naming the files and libraries it lacks and the install step',
    async () => {
      const err = await startStageService({
        name: 'dit-svc',
        version: '0.1.0',
        config: StageServiceConfigSchema.parse({ pool: 'gpu', modelsDirs: [root], executionProviders: ['cuda'] }),
        log: silentLogger(),
        createHandler: () => ({ stage: 'denoising', models: () => [], execute: () => Promise.resolve({ outputs: {} }) }),
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DiffmeshError);
      const message = (err as DiffmeshError).message;
      expect(message).toMatch(/execution provider "cuda" is not available/);
      expect(message).toMatch(/npx diffmesh gpu install cuda/);
      expect(message).toMatch(/libonnxruntime_providers_cuda\.so/);
      for (const l of cuda?.missingLibraries ?? []) expect(message).toContain(l.soname);
    },
  );
});
