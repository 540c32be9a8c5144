import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Code, DiffmeshError, cancelled } from '@diffmesh/core';
import { checkFrames } from './frames.js';
import { checkFps } from './png.js';

const STDERR_KEEP_BYTES = 16 * 1024;
const STDERR_TAIL_LINES = 15;
const VERSION_CHECK_TIMEOUT_MS = 10_000;

interface RunOptions {
  signal?: AbortSignal;
  /** Chunks written to the child's stdin, which is then closed. */
  input?: Iterable<Uint8Array>;
  timeoutMs?: number;
}

interface RunResult {
  code: number | null;
  stdout: string;
  /** The last STDERR_KEEP_BYTES of stderr. */
  stderr: string;
  /** Set when the process could not be started or was aborted. */
  error?: NodeJS.ErrnoException;
}

/** Runs a tool to completion. Never rejects: start failures and aborts come back in `error`. */
async function run(bin: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const child = spawn(bin, args, {
    stdio: [opts.input ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    signal: opts.signal,
    // The output is a temp file that is thrown away on abort, so nothing is lost by SIGKILL.
    killSignal: 'SIGKILL',
    timeout: opts.timeoutMs,
    windowsHide: true,
  });
  let stdout = '';
  let stderr = Buffer.alloc(0);
  let error: NodeJS.ErrnoException | undefined;
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr!.on('data', (b: Buffer) => {
    stderr = Buffer.concat([stderr, b]);
    if (stderr.length > STDERR_KEEP_BYTES) stderr = stderr.subarray(stderr.length - STDERR_KEEP_BYTES);
  });
  child.on('error', (err) => (error ??= err));
  // A child that exits early closes its stdin (EPIPE); its exit status explains why.
  const feeding = opts.input
    ? pipeline(Readable.from(opts.input, { objectMode: false }), child.stdin!).catch(() => undefined)
    : Promise.resolve();
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  await feeding;
  return { code, stdout, stderr: stderr.toString('utf8'), ...(error ? { error } : {}) };
}

function tail(stderr: string): string {
  const lines = stderr.trimEnd().split(/\r?\n/);
  return lines.slice(-STDERR_TAIL_LINES).join('\n');
}

/** Turns a failed run into a DiffmeshError that names the tool and quotes its stderr tail. */
function toolError(bin: string, what: string, res: RunResult): DiffmeshError {
  if (res.error?.name === 'AbortError') return cancelled(`${what} cancelled`);
  if (res.error?.code === 'ENOENT') {
    return new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'STAGE_FAILED',
      `${what} failed: ${bin} not found (install it or point DIFFMESH_FFMPEG at it)`,
    );
  }
  const how = res.error ? res.error.message : `${bin} exited with code ${res.code}`;
  const err = tail(res.stderr);
  return new DiffmeshError(Code.INTERNAL, 'STAGE_FAILED', `${what} failed: ${how}${err ? `\n${err}` : ''}`);
}

const availability = new Map<string, Promise<boolean>>();

/**
 * Whether `ffmpegPath` (a name looked up on PATH, or a path) runs `-version` successfully.
 * The answer is cached per path for the life of the process. `signal` only stops this
 * caller's wait; the shared check goes on.
 */
export function ffmpegAvailable(ffmpegPath = 'ffmpeg', signal?: AbortSignal): Promise<boolean> {
  return toolAvailable(ffmpegPath, signal);
}

/** As ffmpegAvailable, for any tool that answers `-version` (ffprobe does). */
export function toolAvailable(bin: string, signal?: AbortSignal): Promise<boolean> {
  let check = availability.get(bin);
  if (!check) {
    check = run(bin, ['-version'], { timeoutMs: VERSION_CHECK_TIMEOUT_MS }).then((res) => !res.error && res.code === 0);
    availability.set(bin, check);
  }
  if (!signal) return check;
  if (signal.aborted) return Promise.reject(cancelled(`${bin} check cancelled`));
  return new Promise<boolean>((resolve, reject) => {
    const onAbort = () => reject(cancelled(`${bin} check cancelled`));
    signal.addEventListener('abort', onAbort, { once: true });
    check.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * The ffprobe that ships beside an ffmpeg: `/opt/ff/bin/ffmpeg` → `/opt/ff/bin/ffprobe`,
 * bare `ffmpeg` → `ffprobe` (looked up on PATH).
 */
export function ffprobePathFor(ffmpegPath: string): string {
  const name = basename(ffmpegPath).replace(/ffmpeg/i, 'ffprobe');
  const probe = name === basename(ffmpegPath) ? 'ffprobe' : name;
  const dir = dirname(ffmpegPath);
  return ffmpegPath.includes('/') || ffmpegPath.includes('\\') ? join(dir, probe) : probe;
}

/** Copies a frame into even dimensions by repeating its last column and/or row. */
function padToEven(frame: Uint8Array, width: number, height: number): Uint8Array {
  const w2 = width + (width & 1);
  const h2 = height + (height & 1);
  if (w2 === width && h2 === height) return frame;
  const out = new Uint8Array(w2 * h2 * 3);
  for (let y = 0; y < h2; y++) {
    const src = Math.min(y, height - 1) * width * 3;
    const dst = y * w2 * 3;
    out.set(frame.subarray(src, src + width * 3), dst);
    if (w2 !== width) out.copyWithin(dst + width * 3, dst + (width - 1) * 3, dst + width * 3);
  }
  return out;
}

export interface Mp4Options {
  width: number;
  height: number;
  fps: number;
  ffmpegPath?: string;
  signal?: AbortSignal;
}

/** The ffmpeg encoder arguments of each container diffmesh writes through ffmpeg. */
const CODEC_ARGS = {
  // H.264, BT.709, with the index up front so players can start before the end.
  mp4: ['-c:v', 'libx264', '-preset', 'medium', '-crf', '18', '-movflags', '+faststart'],
  // VP9 in constant-quality mode (-b:v 0), as browsers play WebM.
  webm: ['-c:v', 'libvpx-vp9', '-crf', '30', '-b:v', '0', '-row-mt', '1', '-deadline', 'good', '-cpu-used', '4'],
} as const;

/**
 * Encodes packed RGB frames as H.264 (yuv420p, BT.709) MP4 with ffmpeg. Odd widths or
 * heights are padded to even by repeating the edge pixels, as yuv420p requires; the
 * result reports the encoded size.
 */
export function encodeMp4(frames: readonly Uint8Array[], opts: Mp4Options): Promise<{ bytes: Uint8Array; width: number; height: number }> {
  return encodeWithFfmpeg('mp4', frames, opts);
}

/** As {@link encodeMp4}, for VP9 in WebM. */
export function encodeWebm(frames: readonly Uint8Array[], opts: Mp4Options): Promise<{ bytes: Uint8Array; width: number; height: number }> {
  return encodeWithFfmpeg('webm', frames, opts);
}

async function encodeWithFfmpeg(
  container: keyof typeof CODEC_ARGS,
  frames: readonly Uint8Array[],
  opts: Mp4Options,
): Promise<{ bytes: Uint8Array; width: number; height: number }> {
  const { width, height, fps, signal } = opts;
  const what = `${container.toUpperCase()} encoding`;
  const bin = opts.ffmpegPath ?? 'ffmpeg';
  checkFrames(frames, width, height);
  checkFps(fps);
  if (signal?.aborted) throw cancelled(`${what} cancelled`);
  const w2 = width + (width & 1);
  const h2 = height + (height & 1);
  // MP4 with +faststart needs a seekable output, so ffmpeg writes a temp file.
  const dir = await mkdtemp(join(tmpdir(), 'diffmesh-media-'));
  try {
    const out = join(dir, `out.${container}`);
    const args = [
      '-hide_banner',
      '-nostats',
      '-loglevel',
      'error',
      '-f',
      'rawvideo',
      '-pix_fmt',
      'rgb24',
      '-video_size',
      `${w2}x${h2}`,
      '-framerate',
      String(fps),
      '-i',
      'pipe:0',
      '-an',
      '-vf',
      'scale=out_color_matrix=bt709:out_range=tv',
      ...CODEC_ARGS[container],
      '-pix_fmt',
      'yuv420p',
      '-colorspace',
      'bt709',
      '-color_primaries',
      'bt709',
      '-color_trc',
      'bt709',
      '-color_range',
      'tv',
      '-y',
      out,
    ];
    const input = (function* () {
      for (const frame of frames) yield padToEven(frame, width, height);
    })();
    const res = await run(bin, args, { input, ...(signal ? { signal } : {}) });
    if (res.error || res.code !== 0) throw toolError(bin, what, res);
    const buf = await readFile(out);
    return { bytes: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), width: w2, height: h2 };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** What ffprobe reports for the first video stream, decoding every frame to count them. */
export async function ffprobeVideo(
  input: string | Uint8Array,
  opts: { ffprobePath?: string; signal?: AbortSignal } = {},
): Promise<{ codec: string; frames: number; width: number; height: number }> {
  const bin = opts.ffprobePath ?? 'ffprobe';
  let dir: string | undefined;
  try {
    let path: string;
    if (typeof input === 'string') {
      path = input;
    } else {
      dir = await mkdtemp(join(tmpdir(), 'diffmesh-media-'));
      path = join(dir, 'probe.bin');
      await writeFile(path, input);
    }
    const args = [
      '-v',
      'error',
      '-count_frames',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=codec_name,width,height,nb_read_frames',
      '-of',
      'json',
      path,
    ];
    const res = await run(bin, args, opts.signal ? { signal: opts.signal } : {});
    if (res.error || res.code !== 0) throw toolError(bin, `probing ${typeof input === 'string' ? input : 'video'}`, res);
    const stream = (JSON.parse(res.stdout) as { streams?: Record<string, unknown>[] }).streams?.[0];
    if (!stream) {
      throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'ffprobe found no video stream');
    }
    return {
      codec: typeof stream.codec_name === 'string' ? stream.codec_name : '',
      frames: Number(stream.nb_read_frames ?? 0),
      width: Number(stream.width ?? 0),
      height: Number(stream.height ?? 0),
    };
  } finally {
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}
