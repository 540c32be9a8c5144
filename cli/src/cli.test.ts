import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countGifFrames, decodePng, ffmpegAvailable, probeVideo } from '@diffmesh/runtime';

// The command as a user runs it: a separate node process on the built CLI.
const BIN = fileURLToPath(new URL('../bin/diffmesh.js', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function diffmesh(args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

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

  it('draws a green square on a yellow background', async () => {
    const run = await diffmesh(['generate', 'a green square on a yellow background', '-o', 'green.png', '--seed', '2'], dir);
    expect(run.code).toBe(0);
    const r = regions(await readFile(path.join(dir, 'green.png')), green, yellow);
    expect(r.fgShare).toBeGreaterThan(0.02);
    expect(r.fgShare).toBeLessThan(0.4);
    expect(r.fillOfBox).toBeGreaterThan(0.85); // a square fills its bounding box
    expect(r.bgShareOfRest).toBeGreaterThan(0.85);
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
    ['an unsupported extension', ['a red circle', '-o', 'x.jpg'], /output: unsupported image extension/],
  ])('rejects %s: names the field, exits 2, writes nothing', async (_what, args, message) => {
    const sub = await mkdtemp(path.join(dir, 'bad-'));
    const hasOutput = args.includes('-o');
    const run = await diffmesh(['generate', ...args, ...(hasOutput ? [] : ['-o', 'out.png'])], sub);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(await readdir(sub)).toEqual([]);
  });
});
