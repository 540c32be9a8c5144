// Denoiser graphs rewritten at load, as a user turns them on (`--kernels fused`,
// `--weights int4`): the built-in DiT models' pictures against the plain graph's, on the CPU and
// on WebGPU over SwiftShader (the software Vulkan of Debian's chromium, as in CI).
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ExecutionProvider, GraphRewriteOptions } from '@diffmesh/stage-host';
import { embeddedPixels } from './harness.js';

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
const swiftshader = existsSync(SWIFTSHADER);
if (swiftshader) process.env.VK_ICD_FILENAMES = SWIFTSHADER;

type Params = { prompt: string; width: number; height: number; numInferenceSteps: number; seed: string; numFrames?: number };
const MODELS: ReadonlyArray<readonly [string, Params]> = [
  ['diffmesh/synthetic-dit-image', { prompt: 'a cat', width: 64, height: 64, numInferenceSteps: 3, seed: '3' }],
  ['diffmesh/synthetic-dit-video', { prompt: 'a cat', width: 64, height: 64, numFrames: 5, numInferenceSteps: 2, seed: '3' }],
];
/** One 32×32 step: a SwiftShader run of the DiT takes tens of seconds on a busy 2-core machine. */
const ON_SWIFTSHADER: ReadonlyArray<readonly [string, Params]> = [
  ['diffmesh/synthetic-dit-image', { prompt: 'a cat', width: 32, height: 32, numInferenceSteps: 1, seed: '3' }],
];

const plainPictures = new Map<string, Promise<Uint8Array>>();

async function picture(
  model: string,
  params: Params,
  provider: ExecutionProvider,
  graphRewrites?: GraphRewriteOptions,
): Promise<Uint8Array> {
  const make = async () => {
    const [pixels] = await embeddedPixels([params], { model, executionProviders: [provider], ...(graphRewrites ? { graphRewrites } : {}) });
    return pixels;
  };
  if (graphRewrites) return make();
  // The plain picture is the reference of both tests: made once per model and provider.
  const key = `${model}|${provider}`;
  let p = plainPictures.get(key);
  if (!p) {
    p = make();
    plainPictures.set(key, p);
  }
  return p;
}

function compare(a: Uint8Array, b: Uint8Array): { max: number; psnr: number } {
  let max = 0;
  let se = 0;
  for (let i = 0; i < a.length; i += 1) {
    const d = a[i] - b[i];
    max = Math.max(max, Math.abs(d));
    se += d * d;
  }
  return { max, psnr: se === 0 ? Infinity : 10 * Math.log10((255 * 255) / (se / a.length)) };
}

// SwiftShader takes tens of seconds a picture (shader compilation, a software rasterizer): the image model only there.
describe.each([
  ['cpu', true, MODELS, 60_000],
  ['webgpu', swiftshader, ON_SWIFTSHADER, 300_000],
] as Array<[ExecutionProvider, boolean, ReadonlyArray<readonly [string, Params]>, number]>)(
  'graph rewrites on %s',
  (provider, available, models, timeout) => {
    it.skipIf(!available).each(models)(
      '%s: the fused graph gives the plain graph’s picture within 1/255',
      { timeout },
      async (model, params) => {
        const plain = await picture(model, params, provider);
        const fused = await picture(model, params, provider, { kernels: 'fused' });
        expect(fused.length).toBe(plain.length);
        expect(compare(plain, fused).max).toBeLessThanOrEqual(1);
      },
    );

    it.skipIf(!available).each(models)(
      '%s: 4-bit weights give a picture close to the plain graph’s',
      { timeout },
      async (model, params) => {
        const plain = await picture(model, params, provider);
        const int4 = await picture(model, params, provider, { kernels: 'fused', weights: 'int4' });
        const { psnr } = compare(plain, int4);
        // Random Gaussian weights are 4 bits' worst case; the picture still follows the plain one.
        expect(psnr).toBeGreaterThan(20);
        expect(psnr).toBeLessThan(Infinity); // the weights really changed
      },
    );
  },
);
