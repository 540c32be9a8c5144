import { mkdtemp, readFile, readdir, realpath, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countGifFrames, decodeImage, decodePng, encodeImage, encodePng, ffmpegAvailable, probeImage, probeVideo } from '@diffmesh/media';
import { runDiffmesh, type Run } from './fixtures/run-cli.js';
import { buildBrokenDir, buildSdDir, meanAbsoluteError, type SdTestModel } from '@diffmesh/models';

// The command as a user runs it: a separate node process on the built CLI.
const diffmesh = (args: string[], cwd: string): Promise<Run> => runDiffmesh(args, { cwd });

type Rgb = [number, number, number];

function pixels(png: Uint8Array): { width: number; height: number; at(x: number, y: number): Rgb } {
  const { width, height, rgb } = decodePng(png);
  return { width, height, at: (x, y) => [rgb[(y * width + x) * 3], rgb[(y * width + x) * 3 + 1], rgb[(y * width + x) * 3 + 2]] };
}

/** Fraction of pixels matching `isFg`, how compact they are, and the fraction of the rest matching `isBg`. */
function regions(png: Uint8Array, isFg: (p: Rgb) => boolean, isBg: (p: Rgb) => boolean) {
  const img = pixels(png);
  let fg = 0;
  let bg = 0;
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -1;
  let maxY = -1;
  for (let y = 0; y < img.height; y += 1) {
    for (let x = 0; x < img.width; x += 1) {
      const p = img.at(x, y);
      if (isFg(p)) {
        fg += 1;
        minX = Math.min(minX, x);
        maxX = Math.max(maxX, x);
        minY = Math.min(minY, y);
        maxY = Math.max(maxY, y);
      } else if (isBg(p)) {
        bg += 1;
      }
    }
  }
  const total = img.width * img.height;
  const box = fg > 0 ? (maxX - minX + 1) * (maxY - minY + 1) : 1;
  return { fgShare: fg / total, bgShareOfRest: bg / (total - fg), fillOfBox: fg / box };
}

const red = ([r, g, b]: Rgb) => r > 150 && g < 90 && b < 90;
const blue = ([r, g, b]: Rgb) => b > 150 && r < 90 && g < 130;
const green = ([r, g, b]: Rgb) => g > 140 && r < 100 && b < 100;
const yellow = ([r, g, b]: Rgb) => r > 180 && g > 160 && b < 100;

/** Writes the input files the --image cases use into `dir`; returns their names, sorted. */
async function inputFiles(dir: string): Promise<string[]> {
  const noise = new Uint8Array(64 * 64 * 3).map((_, i) => (Math.imul(i + 1, 2654435761) >>> 13) & 255);
  const whole = encodePng(noise, 64, 64);
  const files: Record<string, Uint8Array> = {
    'in.png': encodePng(new Uint8Array(16 * 16 * 3).fill(200), 16, 16),
    // The header is whole, the pixels are cut short.
    'cut.png': whole.subarray(0, Math.floor(whole.length * 0.6)),
    'notes.txt': new TextEncoder().encode('not a picture'),
    'anim.gif': Buffer.from('R0lGODlhAQABAIAAAAAAAP///ywAAAAAAQABAAACAUwAOw==', 'base64'),
  };
  for (const [name, bytes] of Object.entries(files)) await writeFile(path.join(dir, name), bytes);
  // One byte over the limit, without writing 15 MiB: a sparse file.
  await writeFile(path.join(dir, 'huge.png'), '');
  await truncate(path.join(dir, 'huge.png'), 15 * 1024 * 1024 + 1);
  return [...Object.keys(files), 'huge.png'].sort();
}

describe('diffmesh generate (embedded, as a separate process)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('draws a red circle on a blue background', async () => {
    const run = await diffmesh(['generate', 'a red circle on a blue background', '-o', 'red.png', '--seed', '1'], dir);
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/wrote red\.png \(256×256/);
    const r = regions(await readFile(path.join(dir, 'red.png')), red, blue);
    expect(r.fgShare).toBeGreaterThan(0.02);
    expect(r.fgShare).toBeLessThan(0.4);
    expect(r.fillOfBox).toBeGreaterThan(0.6); // one compact blob, not scattered pixels
    expect(r.bgShareOfRest).toBeGreaterThan(0.85);
  });

  it('writes live previews with --preview-dir (every --preview-every steps and the last)', async () => {
    const run = await diffmesh(
      [
        'generate',
        'a red circle on a blue background',
        '-o',
        'pv.png',
        '--seed',
        '1',
        '--steps',
        '5',
        '--preview-every',
        '2',
        '--preview-dir',
        'pv',
      ],
      dir,
    );
    expect(run.code).toBe(0);
    expect((await readdir(path.join(dir, 'pv'))).sort()).toEqual(['step-002.png', 'step-004.png', 'step-005.png']);
    // 256×256 output: the latent (and so the preview) is 32×32.
    expect(pixels(await readFile(path.join(dir, 'pv', 'step-005.png')))).toMatchObject({ width: 32, height: 32 });
    const alone = await diffmesh(['generate', 'a red circle', '--preview-every', '2'], dir);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/preview\.every_steps: needs --preview-dir.*\(--preview-every\)/);
  });

  it('draws a green square on a yellow background', async () => {
    const run = await diffmesh(['generate', 'a green square on a yellow background', '-o', 'green.png', '--seed', '2'], dir);
    expect(run.code).toBe(0);
    const r = regions(await readFile(path.join(dir, 'green.png')), green, yellow);
    expect(r.fgShare).toBeGreaterThan(0.02);
    expect(r.fgShare).toBeLessThan(0.4);
    expect(r.fillOfBox).toBeGreaterThan(0.85); // a square fills its bounding box
    expect(r.bgShareOfRest).toBeGreaterThan(0.85);
  });

  it('writes JPEG and WebP pictures of the same scene for .jpg and .webp', async () => {
    for (const [file, type] of [
      ['red.jpg', 'image/jpeg'],
      ['red.webp', 'image/webp'],
    ] as const) {
      const run = await diffmesh(['generate', 'a red circle on a blue background', '-o', file, '--seed', '1', '--no-progress'], dir);
      expect(run.code).toBe(0);
      const bytes = await readFile(path.join(dir, file));
      expect(await probeImage(bytes)).toEqual({ mediaType: type, width: 256, height: 256 });
      // The same scene as the PNG: a red blob on blue, through the lossy encoding.
      const r = regions(await encodeImage(await decodeImage(bytes), 'png'), red, blue);
      expect(r.fgShare).toBeGreaterThan(0.02);
      expect(r.bgShareOfRest).toBeGreaterThan(0.85);
    }
  });

  it('repeats a seed byte for byte and changes with another seed', async () => {
    const args = (seed: string, out: string) => ['generate', 'a pink triangle', '--seed', seed, '-o', out, '--no-progress'];
    const [a, b, c] = await Promise.all([
      diffmesh(args('123', 'a.png'), dir),
      diffmesh(args('123', 'b.png'), dir),
      diffmesh(args('124', 'c.png'), dir),
    ]);
    expect([a.code, b.code, c.code]).toEqual([0, 0, 0]);
    const [fa, fb, fc] = await Promise.all(['a.png', 'b.png', 'c.png'].map((f) => readFile(path.join(dir, f))));
    expect(fa.equals(fb)).toBe(true);
    expect(fa.equals(fc)).toBe(false);
  });

  it('generates with step caching (--step-cache, --step-cache-max-skip): the same pixels twice, other pixels than without', async () => {
    const args = (out: string, cache: string[]) => ['generate', 'a red circle', '--seed', '9', '--steps', '12', '-o', out, ...cache];
    const [a, b, plain] = await Promise.all([
      diffmesh(args('sc-a.png', ['--step-cache', '1000', '--step-cache-max-skip', '2']), dir),
      diffmesh(args('sc-b.png', ['--step-cache', '1000', '--step-cache-max-skip', '2']), dir),
      diffmesh(args('sc-plain.png', []), dir),
    ]);
    expect([a.code, b.code, plain.code]).toEqual([0, 0, 0]);
    const [fa, fb, fp] = await Promise.all(['sc-a.png', 'sc-b.png', 'sc-plain.png'].map((f) => readFile(path.join(dir, f))));
    expect(fa.equals(fb)).toBe(true);
    expect(fa.equals(fp)).toBe(false);
  });

  it('writes an 8-frame animated GIF', async () => {
    const run = await diffmesh(['generate', 'a cyan circle on a black background', '--frames', '8', '-o', 'clip.gif', '--seed', '5'], dir);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/8 frames, gif/);
    expect(countGifFrames(await readFile(path.join(dir, 'clip.gif')))).toBe(8);
  });

  it('writes an 8-frame mp4 with ffmpeg, or says it wrote a GIF instead', async () => {
    const run = await diffmesh(['generate', 'a white square on a red background', '--frames', '8', '-o', 'clip.mp4'], dir);
    expect(run.code).toBe(0);
    if (await ffmpegAvailable()) {
      const info = await probeVideo(path.join(dir, 'clip.mp4'));
      expect(info).toMatchObject({ format: 'mp4', frames: 8, width: 256, height: 256 });
    } else {
      expect(run.stderr).toMatch(/ffmpeg not found.*clip\.gif/);
      expect(countGifFrames(await readFile(path.join(dir, 'clip.gif')))).toBe(8);
    }
  });

  it.each([
    ['an unknown model', ['a red circle', '--model', 'nobody/nothing'], /model: unknown model "nobody\/nothing"/],
    ['an empty prompt', [''], /prompt: must not be empty/],
    ['a width not divisible by 8', ['a red circle', '--width', '100'], /width: must be a multiple of 8/],
    ['zero steps', ['a red circle', '--steps', '0'], /num_inference_steps: .*1 to 200.*\(--steps\)/],
    ['201 steps', ['a red circle', '--steps', '201'], /num_inference_steps: .*1 to 200/],
    ['a negative guidance', ['a red circle', '--guidance', '-1'], /guidance_scale: .*≥ 0.*\(--guidance\)/],
    ['a non-numeric height', ['a red circle', '--height', 'tall'], /height: expected an integer/],
    ['an unsupported extension', ['a red circle', '-o', 'x.bmp'], /output: unsupported image extension/],
    [
      'a strength above 1',
      ['a red circle', '--strength', '1.5', '--image', 'in.png'],
      /strength: must be a number greater than 0 and at most 1, got 1\.5 \(--strength\)/,
    ],
    [
      'a strength of 0',
      ['a red circle', '--strength', '0', '--image', 'in.png'],
      /strength: must be a number greater than 0.*\(--strength\)/,
    ],
    [
      'a strength that is no number',
      ['a red circle', '--strength', 'half', '--image', 'in.png'],
      /strength: expected a number, got "half" \(--strength\)/,
    ],
    [
      'a strength without an image',
      ['a red circle', '--strength', '0.5'],
      /strength: applies only with an input image \(give --image\) \(--strength\)/,
    ],
    ['a negative step cache threshold', ['a red circle', '--step-cache', '-0.1'], /step_cache\.threshold: must be ≥ 0.*\(--step-cache\)/],
    ['a step cache threshold that is no number', ['a red circle', '--step-cache', 'Infinity'], /step_cache\.threshold: expected a number/],
    [
      'a fractional step cache max skip',
      ['a red circle', '--step-cache', '0.1', '--step-cache-max-skip', '1.5'],
      /step_cache\.max_skipped_steps: expected an integer, got "1\.5" \(--step-cache-max-skip\)/,
    ],
    ['a missing image file', ['a red circle', '--image', 'nowhere.png'], /input_image: "nowhere\.png" does not exist \(--image\)/],
    ['an image that is a folder', ['a red circle', '--image', '.'], /input_image: "\." is not a file \(--image\)/],
    [
      'a text file as image',
      ['a red circle', '--image', 'notes.txt'],
      /input_image: "notes\.txt" is not a readable PNG, JPEG or WebP image .*\(--image\)/,
    ],
    [
      'a GIF as image',
      ['a red circle', '--image', 'anim.gif'],
      /input_image: "anim\.gif" has format gif; use PNG, JPEG or WebP \(--image\)/,
    ],
    ['a truncated image', ['a red circle', '--image', 'cut.png'], /input_image: "cut\.png" is truncated or corrupt .*\(--image\)/],
    [
      'an image over 15 MiB',
      ['a red circle', '--image', 'huge.png'],
      /input_image: "huge\.png" is 15728641 bytes; at most 15728640 are accepted \(--image\)/,
    ],
    [
      'an image for a model that takes none',
      ['a red circle', '--image', 'in.png', '--model', 'diffmesh/synthetic-dit-image'],
      /input_image: model "diffmesh\/synthetic-dit-image" does not take an input image \(--image\)/,
    ],
  ])('rejects %s: names the field, exits 2, writes nothing', async (_what, args, message) => {
    const sub = await mkdtemp(path.join(dir, 'bad-'));
    const inputs = await inputFiles(sub);
    const hasOutput = args.includes('-o');
    const run = await diffmesh(['generate', ...args, ...(hasOutput ? [] : ['-o', 'out.png'])], sub);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect((await readdir(sub)).sort()).toEqual(inputs);
  });

  it('refuses bad --image and --strength on submit too, before reaching any mesh', async () => {
    const sub = await mkdtemp(path.join(dir, 'submit-'));
    await inputFiles(sub);
    // No mesh runs at this address: the flags are refused before it would be tried.
    const remote = ['--remote', '127.0.0.1:9'];
    const bad = await diffmesh(['submit', 'a red circle', '--image', 'notes.txt', ...remote], sub);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/input_image: "notes\.txt" is not a readable PNG, JPEG or WebP image .*\(--image\)/);
    const strength = await diffmesh(['submit', 'a red circle', '--image', 'in.png', '--strength', '2', ...remote], sub);
    expect(strength.code).toBe(2);
    expect(strength.stderr).toMatch(/strength: must be a number greater than 0 and at most 1, got 2 \(--strength\)/);
    expect(bad.stdout + strength.stdout).toBe('');
  });
});

describe('a mesh that cannot be reached', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-unreachable-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ['generate', ['generate', 'a red circle', '-o', 'x.png', '--no-progress']],
    ['submit', ['submit', 'a red circle']],
    ['watch', ['watch', 'some-id', '--no-progress']],
    ['cancel', ['cancel', 'some-id']],
    ['models', ['models']],
  ])('%s says in one line which address it tried and exits 3', async (_name, args) => {
    // Port 1 on loopback: nothing listens there, the connection is refused at once. Without
    // waiting for a restarting scheduler (DIFFMESH_SCHEDULER_WAIT_MS=0) the first refusal is the answer.
    const run = await runDiffmesh([...args, '--remote', '127.0.0.1:1'], { cwd: dir, env: { DIFFMESH_SCHEDULER_WAIT_MS: '0' } });
    expect(run.code).toBe(3);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^diffmesh: cannot reach the scheduler at 127\.0\.0\.1:1: connection refused/);
    expect(run.stderr).not.toMatch(/Resolution note|No connection established/);
    expect(await readdir(dir)).toEqual([]);
  });

  it.each([
    ['watch', ['watch', 'some-id', '--no-progress']],
    ['submit', ['submit', 'a red circle']],
  ])(
    '%s waits for an unreachable scheduler for DIFFMESH_SCHEDULER_WAIT_MS, saying what it waits for, then exits 3',
    async (_name, args) => {
      const run = await runDiffmesh([...args, '--remote', '127.0.0.1:1'], { cwd: dir, env: { DIFFMESH_SCHEDULER_WAIT_MS: '1500' } });
      expect(run.code).toBe(3);
      const lines = run.stderr.trim().split('\n');
      expect(lines[0]).toMatch(
        /^diffmesh: waiting for the scheduler at 127\.0\.0\.1:1 \(connection refused\); retrying for up to 2 s more$/,
      );
      expect(lines.at(-1)).toMatch(/^diffmesh: cannot reach the scheduler at 127\.0\.0\.1:1: connection refused/);
      expect(run.stdout).toBe('');
    },
  );

  it('refuses a DIFFMESH_SCHEDULER_WAIT_MS that is no number of ms, naming it (exit 2)', async () => {
    const run = await runDiffmesh(['watch', 'some-id', '--remote', '127.0.0.1:1'], {
      cwd: dir,
      env: { DIFFMESH_SCHEDULER_WAIT_MS: 'soon' },
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/DIFFMESH_SCHEDULER_WAIT_MS: must be a whole number of ms ≥ 0, got "soon"/);
  });
});

describe('diffmesh generate --model DIR (a diffusers/optimum ONNX directory, as a separate process)', () => {
  let dir: string;
  let model: SdTestModel;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-cli-dir-'));
    model = await buildSdDir(path.join(dir, 'my-sd-onnx'), {
      scalingFactor: 0.5,
      scheduler: { _class_name: 'DDIMScheduler', set_alpha_to_one: true },
    });
    await buildBrokenDir(path.join(dir, 'broken'), 'hidden-size-mismatch');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('generates the picture the directory’s model must produce, from ./DIR or a folder name', async () => {
    for (const [arg, out] of [
      ['./my-sd-onnx', 'a.png'],
      ['my-sd-onnx', 'b.png'],
    ]) {
      const run = await diffmesh(
        ['generate', 'a red cat', '--model', arg, '--negative', 'blue', '--guidance', '2', '--steps', '6', '-o', out, '--seed', '3'],
        dir,
      );
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`wrote ${out} (64×64, png; model ${path.join(await realpath(dir), 'my-sd-onnx')}`);
      const { rgb } = decodePng(await readFile(path.join(dir, out)));
      const want = model.expectedImage({ prompt: 'a red cat', negativePrompt: 'blue', guidanceScale: 2 });
      expect(meanAbsoluteError(rgb, want.data)).toBeLessThanOrEqual(1);
    }
  });

  it('prints a warning when the prompt is cut to the text encoder length', async () => {
    const long = `${Array.from({ length: 80 }, () => 'red').join(' ')} cat`;
    const run = await diffmesh(['generate', long, '--model', './my-sd-onnx', '--steps', '1', '-o', 'long.png', '--no-progress'], dir);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(
      /^warning: prompt: cut to 77 tokens for text_encoder \(CLIP\); 6 tokens dropped: "red red red red red cat"$/m,
    );
  });

  it('img2img with --image and --strength, through the image_encoding stage', async () => {
    const start = model.expectedImage({ prompt: 'a blue texture', guidanceScale: 1 });
    await writeFile(path.join(dir, 'start.png'), encodePng(start.data, 64, 64));
    const run = await diffmesh(
      [
        'generate',
        'a red cat',
        '--model',
        './my-sd-onnx',
        '--image',
        'start.png',
        '--strength',
        '0.5',
        '--steps',
        '8',
        '-o',
        'i2i.png',
        '--seed',
        '1',
      ],
      dir,
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^image_encoding: done/m);
    expect(run.stderr).toMatch(/^denoising: step 4\/4$/m);
    const { rgb } = decodePng(await readFile(path.join(dir, 'i2i.png')));
    expect(meanAbsoluteError(rgb, model.expectedImage({ prompt: 'a red cat', guidanceScale: 7.5 }).data)).toBeLessThanOrEqual(1);
  });

  it('refuses a wrong layout before any work, naming the file and the input, exit 2', async () => {
    const run = await diffmesh(['generate', 'a red cat', '--model', './broken', '-o', 'broken.png'], dir);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /unet\/model\.onnx: hidden size mismatch: .*text_encoder\/model\.onnx output "last_hidden_state".*unet\/model\.onnx input "encoder_hidden_states".* takes 48/,
    );
    expect(await readdir(dir)).not.toContain('broken.png');
  });
});
