import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ffmpegAvailable, ffprobePathFor, ffprobeVideo } from './ffmpeg.js';
import { chooseVideoFormat, encodeVideo, probeVideo } from './video.js';

const hasFfmpeg = await ffmpegAvailable();
const hasFfprobe = await ffmpegAvailable('ffprobe');
const NO_FFMPEG = hasFfmpeg ? '' : ' [skipped: ffmpeg not found on PATH]';
const isPosix = process.platform !== 'win32';

/** Solid frames whose colour changes every frame, so the encoder cannot merge them. */
function clip(count: number, width: number, height: number): Uint8Array[] {
  return Array.from({ length: count }, (_, i) => {
    const rgb = new Uint8Array(width * height * 3);
    for (let p = 0; p < width * height; p++) rgb.set([i * 30, 255 - i * 30, (p % width) * 2], p * 3);
    return rgb;
  });
}

describe('chooseVideoFormat', () => {
  it('keeps .mp4 when ffmpeg is present', () => {
    expect(chooseVideoFormat('out.mp4', true)).toEqual({ format: 'mp4', path: 'out.mp4' });
  });

  it('falls back from .mp4 to a GIF of the same base name, saying why', () => {
    expect(chooseVideoFormat('out.mp4', false)).toEqual({
      format: 'gif',
      path: 'out.gif',
      note: 'ffmpeg not found on PATH; wrote out.gif (animated GIF) instead of out.mp4',
    });
    expect(chooseVideoFormat('renders/a.b/Clip.MP4', false).path).toBe('renders/a.b/Clip.gif');
  });

  it('writes .gif as GIF and .apng/.png as animated PNG, with or without ffmpeg', () => {
    for (const present of [true, false]) {
      expect(chooseVideoFormat('x.gif', present)).toEqual({ format: 'gif', path: 'x.gif' });
      expect(chooseVideoFormat('x.apng', present)).toEqual({ format: 'apng', path: 'x.apng' });
      expect(chooseVideoFormat('x.png', present)).toEqual({ format: 'apng', path: 'x.png' });
    }
  });

  it('keeps .webm when ffmpeg is present and falls back to GIF otherwise', () => {
    expect(chooseVideoFormat('out.webm', true)).toEqual({ format: 'webm', path: 'out.webm' });
    expect(chooseVideoFormat('out.webm', false)).toMatchObject({ format: 'gif', path: 'out.gif' });
  });

  it('rejects other extensions, naming them', () => {
    expect(() => chooseVideoFormat('out.avi', true)).toThrow(/unsupported video extension "\.avi"/);
    expect(() => chooseVideoFormat('out', true)).toThrow(/has no extension/);
    expect(() => chooseVideoFormat('out.mov', false)).toThrowError(expect.objectContaining({ reason: 'INVALID_PARAMETER' }));
  });
});

describe('ffmpeg helpers', () => {
  it('reports a binary that does not exist as unavailable', async () => {
    expect(await ffmpegAvailable('/nonexistent/diffmesh-test/ffmpeg')).toBe(false);
  });

  it('finds ffprobe beside ffmpeg', () => {
    expect(ffprobePathFor('ffmpeg')).toBe('ffprobe');
    expect(ffprobePathFor('/opt/ff/bin/ffmpeg')).toBe('/opt/ff/bin/ffprobe');
    expect(ffprobePathFor('/opt/ff/bin/ffmpeg-6')).toBe('/opt/ff/bin/ffprobe-6');
  });
});

describe('encodeVideo mp4', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'diffmesh-media-test-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('fails with FAILED_PRECONDITION when the ffmpeg binary is missing', async () => {
    const frames = clip(2, 16, 16);
    await expect(
      encodeVideo(frames, { width: 16, height: 16, fps: 8, format: 'mp4', ffmpegPath: '/nonexistent/diffmesh-test/ffmpeg' }),
    ).rejects.toMatchObject({ reason: 'STAGE_FAILED', message: expect.stringMatching(/not found/) });
  });

  it.skipIf(!isPosix)('passes on the end of ffmpeg stderr when it fails', async () => {
    const fake = join(dir, 'failing-ffmpeg');
    const noise = Array.from({ length: 40 }, (_, i) => `echo "noise line ${i}" >&2`).join('\n');
    await writeFile(fake, `#!/bin/sh\n${noise}\necho "Unknown encoder 'libx264'" >&2\nexit 1\n`);
    await chmod(fake, 0o755);
    const err = await encodeVideo(clip(2, 16, 16), { width: 16, height: 16, fps: 8, format: 'mp4', ffmpegPath: fake }).catch(
      (e: unknown) => e as Error,
    );
    expect(err).toMatchObject({ reason: 'STAGE_FAILED' });
    expect((err as Error).message).toMatch(/exited with code 1/);
    expect((err as Error).message).toMatch(/Unknown encoder 'libx264'$/);
    expect((err as Error).message).not.toMatch(/noise line 3\b/); // only the tail
  });

  it.skipIf(!isPosix)('kills ffmpeg and fails with CANCELLED when aborted mid-encode', async () => {
    // The fake ffmpeg announces itself through a FIFO, then hangs.
    const fifo = join(dir, 'started');
    execFileSync('mkfifo', [fifo]);
    const fake = join(dir, 'hanging-ffmpeg');
    await writeFile(fake, `#!/bin/sh\necho started > "${fifo}"\nexec sleep 60\n`);
    await chmod(fake, 0o755);
    const ac = new AbortController();
    const encoding = encodeVideo(clip(2, 16, 16), {
      width: 16,
      height: 16,
      fps: 8,
      format: 'mp4',
      ffmpegPath: fake,
      signal: ac.signal,
    });
    expect((await readFile(fifo, 'utf8')).trim()).toBe('started');
    ac.abort();
    await expect(encoding).rejects.toMatchObject({ reason: 'CANCELLED' });
  });

  it.skipIf(!hasFfmpeg)(`encodes 8 frames that probe as an 8-frame H.264 mp4${NO_FFMPEG}`, async () => {
    const mp4 = await encodeVideo(clip(8, 64, 48), { width: 64, height: 48, fps: 8, format: 'mp4' });
    expect(mp4).toMatchObject({ format: 'mp4', mimeType: 'video/mp4', width: 64, height: 48, frames: 8 });
    const path = join(dir, 'eight.mp4');
    await writeFile(path, mp4.bytes);
    expect(await probeVideo(path)).toEqual({ format: 'mp4', frames: 8, width: 64, height: 48 });
    if (hasFfprobe) expect((await ffprobeVideo(path)).codec).toBe('h264');
    // Without ffprobe the frame count comes from the container's sample table.
    expect(await probeVideo(mp4.bytes, { ffprobePath: '/nonexistent/diffmesh-test/ffprobe' })).toEqual({
      format: 'mp4',
      frames: 8,
      width: 64,
      height: 48,
    });
  });

  it.skipIf(!hasFfmpeg)(`pads odd sizes to even for yuv420p${NO_FFMPEG}`, async () => {
    const mp4 = await encodeVideo(clip(3, 33, 17), { width: 33, height: 17, fps: 12, format: 'mp4' });
    expect(mp4).toMatchObject({ width: 34, height: 18, frames: 3 });
    const info = await probeVideo(mp4.bytes, hasFfprobe ? {} : { ffprobePath: '/nonexistent/diffmesh-test/ffprobe' });
    expect(info).toEqual({ format: 'mp4', frames: 3, width: 34, height: 18 });
  });

  it.skipIf(!hasFfmpeg)(`keeps colours through an ffmpeg decode (BT.709 tagged)${NO_FFMPEG}`, async () => {
    const colours = [
      [255, 0, 0],
      [0, 255, 0],
      [0, 0, 255],
      [128, 128, 128],
      [200, 150, 50],
      [30, 60, 200],
      [255, 255, 255],
      [0, 0, 0],
    ];
    const frames = colours.map((c) => {
      const rgb = new Uint8Array(32 * 32 * 3);
      for (let p = 0; p < 32 * 32; p++) rgb.set(c, p * 3);
      return rgb;
    });
    const mp4 = await encodeVideo(frames, { width: 32, height: 32, fps: 8, format: 'mp4' });
    const path = join(dir, 'colours.mp4');
    await writeFile(path, mp4.bytes);
    const { stdout } = await promisify(execFile)('ffmpeg', ['-v', 'error', '-i', path, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], {
      encoding: 'buffer',
      maxBuffer: 1 << 24,
    });
    expect(stdout.length).toBe(colours.length * 32 * 32 * 3);
    colours.forEach((c, i) => {
      const centre = i * 32 * 32 * 3 + (16 * 32 + 16) * 3;
      const got = [...stdout.subarray(centre, centre + 3)];
      got.forEach((v, ch) =>
        expect(Math.abs(v - c[ch]), `frame ${i} ${JSON.stringify(got)} vs ${JSON.stringify(c)}`).toBeLessThanOrEqual(3),
      );
    });
  });
});
