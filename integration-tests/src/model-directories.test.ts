import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { decodePng, encodePng } from '@diffmesh/media';
import { buildFluxDir, buildSdDir, buildSdxlDir, meanAbsoluteError, type TestModel } from '@diffmesh/models';
import type { RequestEvent } from '@diffmesh/core';
import { generate, last, startTestMesh, type TestMesh } from './harness.js';

// Model directories in the diffusers/optimum ONNX layout served by a mesh of processes. Their
// analytic models give a picture known in closed form (models/src/diffusers/), which every
// scheduler must reach within 1/255 per pixel on average, as in the embedded runtime.
//
// The SD directories share pools through a plans file (`directory:` entries under ids of their
// own, one encoder-svc, dit-svc and vae-svc for all of them); SDXL and FLUX are served with
// --model-directories under their paths, in the pools derived from their files
// (text_encoding_2 in its own pool).

const SD_SCHEDULERS: Record<string, Record<string, unknown>> = {
  pndm: { _class_name: 'PNDMScheduler', set_alpha_to_one: true },
  ddim: { _class_name: 'DDIMScheduler', set_alpha_to_one: true },
  euler: { _class_name: 'EulerDiscreteScheduler' },
  'euler-ancestral': { _class_name: 'EulerAncestralDiscreteScheduler' },
  'dpm++2m-karras': { _class_name: 'DPMSolverMultistepScheduler', use_karras_sigmas: true },
  lcm: { _class_name: 'LCMScheduler' },
};

let root: string;
let t: TestMesh;
const models = new Map<string, { id: string; model: TestModel }>();

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-mesh-dirs-'));
  const plans: Record<string, unknown>[] = [];
  const shared = [
    { name: 'text_encoding', pool: 'encoder-sd-test' },
    { name: 'denoising', pool: 'dit-sd-test' },
    { name: 'vae_decoding', pool: 'vae-sd-test' },
  ];
  const sd = async (name: string, opts: Parameters<typeof buildSdDir>[1]) => {
    const dir = path.join(root, name);
    models.set(name, { id: `test/${name}`, model: await buildSdDir(dir, opts) });
    plans.push({ model: `test/${name}`, directory: `./${name}`, stages: shared });
  };
  for (const [name, scheduler] of Object.entries(SD_SCHEDULERS)) {
    const timestepType = name.startsWith('euler') || name.includes('karras') ? 'float32' : 'int64';
    await sd(`sd-${name}`, { scalingFactor: 0.5, timestepType, scheduler });
  }
  await sd('sd2-v-ddim', { variant: 'sd2', scalingFactor: 0.5, scheduler: { set_alpha_to_one: true } });
  await sd('sd-fp16', { scalingFactor: 0.5, precision: 'fp16', timestepType: 'float16', scheduler: SD_SCHEDULERS.euler });
  const plansFile = path.join(root, 'plans.yaml');
  await writeFile(plansFile, stringify({ version: 1, plans }));
  const sdxlModel = await buildSdxlDir(path.join(root, 'sdxl'), { scalingFactor: 0.5 });
  const sdxl = await realpath(path.join(root, 'sdxl'));
  models.set('sdxl', { id: sdxl, model: sdxlModel });
  const fluxModel = await buildFluxDir(path.join(root, 'flux'), { scalingFactor: 0.5, shiftFactor: 0.2, externalData: true });
  const flux = await realpath(path.join(root, 'flux'));
  models.set('flux', { id: flux, model: fluxModel });
  t = await startTestMesh({
    plansFile,
    modelDirectories: [sdxl, flux],
    models: [...models.values()].map((m) => m.id),
    stageArgs: ['--progress-interval-ms', '0'],
  });
}, 240_000);

afterAll(async () => {
  await t?.stop();
  await rm(root, { recursive: true, force: true });
});

interface Req {
  prompt: string;
  negativePrompt?: string;
  guidanceScale: number;
  steps: number;
  width?: number;
  height?: number;
}

async function run(name: string, req: Req): Promise<{ error: number; events: RequestEvent[] }> {
  const { id, model } = models.get(name) as { id: string; model: TestModel };
  const events = await generate(t.client, {
    model: id,
    params: {
      prompt: req.prompt,
      negativePrompt: req.negativePrompt ?? '',
      guidanceScale: req.guidanceScale,
      numInferenceSteps: req.steps,
      seed: '11',
      ...(req.width ? { width: req.width } : {}),
      ...(req.height ? { height: req.height } : {}),
    },
  });
  const end = last(events);
  if (end.type !== 'completed') throw new Error(`${name}: ${JSON.stringify(end)}`);
  const { data, ref } = await t.store.get(end.outputs.pixels);
  const want = model.expectedImage(req);
  expect(ref.shape).toEqual([1, want.height, want.width, 3]);
  return { error: meanAbsoluteError(data, want.data), events };
}

const pools = (events: RequestEvent[]) => events.flatMap((e) => (e.type === 'stage_started' ? [`${e.stage}:${e.pool}`] : []));

describe('model directories through a mesh of processes', () => {
  it.each(Object.keys(SD_SCHEDULERS).flatMap((s) => [1, 2].map((g) => [s, g] as const)))(
    'SD with %s reaches the closed-form picture at guidance %d',
    async (scheduler, guidanceScale) => {
      const steps = scheduler === 'lcm' ? 4 : 6;
      const { error, events } = await run(`sd-${scheduler}`, { prompt: 'a red cat', negativePrompt: 'blue texture', guidanceScale, steps });
      expect(error).toBeLessThanOrEqual(1);
      expect(pools(events)).toEqual(['text_encoding:encoder-sd-test', 'denoising:dit-sd-test', 'vae_decoding:vae-sd-test']);
    },
  );

  it('SD 2.x v-prediction DDIM and an fp16 SD export reach it too', async () => {
    for (const g of [1, 2]) {
      expect(
        (await run('sd2-v-ddim', { prompt: 'a green cat', negativePrompt: 'red', guidanceScale: g, steps: 6 })).error,
      ).toBeLessThanOrEqual(1);
    }
    expect((await run('sd-fp16', { prompt: 'a green cat', negativePrompt: 'red', guidanceScale: 2, steps: 6 })).error).toBeLessThanOrEqual(
      1,
    );
  });

  it('SDXL runs its second text encoder as text_encoding_2 in its own pool', async () => {
    const { error, events } = await run('sdxl', { prompt: 'a red cat', guidanceScale: 3, steps: 5, width: 128, height: 64 });
    expect(error).toBeLessThanOrEqual(1);
    const stages = pools(events);
    expect(stages.map((s) => s.split(':')[0])).toEqual(['text_encoding', 'text_encoding_2', 'denoising', 'vae_decoding']);
    expect(stages[1]).toMatch(/^text_encoding_2:encoder2-sdxl-[0-9a-f]{6}$/);
    expect(stages[0]).toMatch(/^text_encoding:encoder-sdxl-[0-9a-f]{6}$/);
  });

  it('FLUX runs T5 as text_encoding_2 in its own pool (weights in model.onnx_data)', async () => {
    const { error, events } = await run('flux', { prompt: 'a green texture', guidanceScale: 3.5, steps: 4, width: 64, height: 128 });
    expect(error).toBeLessThanOrEqual(1);
    expect(pools(events)[1]).toMatch(/^text_encoding_2:encoder2-flux-[0-9a-f]{6}$/);
  });
});

describe('diffmesh up --models DIR, then generate --remote local --model DIR', () => {
  it('serves a model directory given as a path, with the stage processes loading it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-up-dir-'));
    const model = await buildSdDir(path.join(dir, 'my-sd-onnx'), {
      scalingFactor: 0.5,
      scheduler: { _class_name: 'EulerAncestralDiscreteScheduler' },
      timestepType: 'float32',
    });
    const env = { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'mesh.json') };
    const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));
    const up = spawn(process.execPath, [BIN, 'up', '--models', './my-sd-onnx,diffmesh/tiny-shapes', '--no-gateway'], {
      env,
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const lines: string[] = [];
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: up.stdout }).on('line', (line) => {
          lines.push(line);
          if (line.startsWith('mesh ready')) resolve();
        });
        up.once('exit', (code) => reject(new Error(`diffmesh up exited with ${code}: ${lines.join('\n')}`)));
      });
      // my-sd-onnx: text encoder, VAE encoder (image_encoding), denoiser, VAE decoder; tiny-shapes the same four.
      expect(lines.filter((l) => /^(encoder|dit|vae)-svc-\d /.test(l))).toHaveLength(8);
      const cli = (args: string[]) =>
        new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
          execFile(process.execPath, [BIN, ...args], { env, cwd: dir, timeout: 60_000 }, (err, stdout, stderr) =>
            resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
          );
        });
      // ListModels shows the directory under its real path, ready.
      const listed = JSON.parse((await cli(['models', '--json'])).stdout) as { model: string; ready: boolean }[];
      expect(listed).toContainEqual(expect.objectContaining({ model: await realpath(path.join(dir, 'my-sd-onnx')), ready: true }));
      const out = await cli([
        'generate',
        'a red cat',
        '--remote',
        'local',
        '--model',
        './my-sd-onnx',
        '--guidance',
        '2',
        '--steps',
        '6',
        '-o',
        'out.png',
      ]);
      expect(out.stderr).not.toMatch(/diffmesh:/);
      expect(out.code).toBe(0);
      const { rgb } = decodePng(await readFile(path.join(dir, 'out.png')));
      expect(meanAbsoluteError(rgb, model.expectedImage({ prompt: 'a red cat', guidanceScale: 2 }).data)).toBeLessThanOrEqual(1);

      // img2img through the mesh's image_encoding pool.
      const start = model.expectedImage({ prompt: 'a blue texture', guidanceScale: 1 });
      await writeFile(path.join(dir, 'start.png'), encodePng(start.data, 64, 64));
      const i2i = await cli(
        ['generate', 'a red cat', '--remote', 'local', '--model', './my-sd-onnx', '--image', 'start.png', '--strength', '0.5'].concat([
          '--guidance',
          '2',
          '--steps',
          '6',
          '-o',
          'i2i.png',
        ]),
      );
      expect(i2i.code).toBe(0);
      expect(i2i.stderr).toMatch(/^image_encoding: done/m);
      const i2iPixels = decodePng(await readFile(path.join(dir, 'i2i.png'))).rgb;
      expect(meanAbsoluteError(i2iPixels, model.expectedImage({ prompt: 'a red cat', guidanceScale: 2 }).data)).toBeLessThanOrEqual(1);

      // Image-to-video on the built-in tiny-shapes: the clip opens on the image.
      const i2v = await cli([
        'generate',
        'a circle',
        '--remote',
        'local',
        '--image',
        'start.png',
        '--frames',
        '4',
        '--width',
        '64',
        '--height',
        '64',
        '--guidance',
        '1',
        '-o',
        'clip.apng',
      ]);
      expect(i2v.stderr).not.toMatch(/diffmesh:/);
      expect(i2v.code).toBe(0);
      expect(i2v.stdout).toMatch(/4 frames/);
    } finally {
      up.kill('SIGINT');
      await new Promise((resolve) => (up.exitCode !== null ? resolve(undefined) : up.once('exit', resolve)));
      await rm(dir, { recursive: true, force: true });
    }
  });
});
