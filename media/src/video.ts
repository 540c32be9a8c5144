import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { Code, DiffmeshError, invalidParameter } from '@diffmesh/core';
import { encodeMp4, encodeWebm, ffprobeVideo, toolAvailable } from './ffmpeg.js';
import { encodeGif, gifInfo, isGif } from './gif.js';
import { isMp4, mp4Info } from './mp4.js';
import { encodeApng, isPng, pngInfo } from './png.js';

/** Container formats diffmesh writes for clips. */
export const VIDEO_FORMATS = ['mp4', 'webm', 'gif', 'apng'] as const;
export type VideoFormat = (typeof VIDEO_FORMATS)[number];

const MIME_TYPES: Record<VideoFormat, string> = {
  mp4: 'video/mp4',
  webm: 'video/webm',
  gif: 'image/gif',
  apng: 'image/apng',
};

export interface EncodeVideoOptions {
  /** Size of every input frame (packed RGB). */
  width: number;
  height: number;
  /** Frames per second; any positive number (GIF stores centisecond delays, see gifDelays). */
  fps: number;
  format: VideoFormat;
  /** ffmpeg binary for `mp4` and `webm`: a name looked up on PATH or a path. Default `ffmpeg`. */
  ffmpegPath?: string;
  signal?: AbortSignal;
}

export interface EncodedVideo {
  format: VideoFormat;
  mimeType: string;
  bytes: Uint8Array;
  /** Encoded size: for mp4, odd input sizes are padded to even. */
  width: number;
  height: number;
  frames: number;
}

/**
 * Encodes packed RGB frames as a looping clip. `gif` and `apng` are pure JavaScript; `mp4`
 * (H.264) and `webm` (VP9) run ffmpeg and fails with a FAILED_PRECONDITION error when it is missing. An
 * abort ends the work (and the ffmpeg process) with a CANCELLED error.
 */
export async function encodeVideo(frames: readonly Uint8Array[], opts: EncodeVideoOptions): Promise<EncodedVideo> {
  const { width, height, fps, format, signal } = opts;
  const done = (bytes: Uint8Array, w = width, h = height): EncodedVideo => ({
    format,
    mimeType: MIME_TYPES[format],
    bytes,
    width: w,
    height: h,
    frames: frames.length,
  });
  switch (format) {
    case 'gif':
      return done(await encodeGif(frames, width, height, fps, signal));
    case 'apng':
      return done(await encodeApng(frames, width, height, fps, signal));
    case 'mp4':
    case 'webm': {
      const encode = format === 'mp4' ? encodeMp4 : encodeWebm;
      const mp4 = await encode(frames, {
        width,
        height,
        fps,
        ...(opts.ffmpegPath ? { ffmpegPath: opts.ffmpegPath } : {}),
        ...(signal ? { signal } : {}),
      });
      return done(mp4.bytes, mp4.width, mp4.height);
    }
    default:
      throw invalidParameter('format', `unknown video format "${String(format)}" (use ${VIDEO_FORMATS.join(', ')})`);
  }
}

/** The format and path chosen for a requested output path. */
export interface VideoFormatChoice {
  format: VideoFormat;
  path: string;
  /** Set when the choice differs from what was asked, to tell the user why. */
  note?: string;
}

/**
 * Picks the clip format from the output path's extension (case-insensitive): `.mp4` needs
 * ffmpeg and falls back to an animated GIF beside it (same base name, `.gif`) with a note;
 * `.gif` → gif; `.apng` and `.png` → animated PNG. Any other extension is an
 * INVALID_ARGUMENT error on field `output`.
 */
export function chooseVideoFormat(requestedPath: string, ffmpegPresent: boolean): VideoFormatChoice {
  const ext = extname(requestedPath);
  switch (ext.toLowerCase()) {
    case '.mp4': {
      if (ffmpegPresent) return { format: 'mp4', path: requestedPath };
      const path = `${requestedPath.slice(0, -ext.length)}.gif`;
      return {
        format: 'gif',
        path,
        note: `ffmpeg not found on PATH; wrote ${path} (animated GIF) instead of ${requestedPath}`,
      };
    }
    case '.webm': {
      if (ffmpegPresent) return { format: 'webm', path: requestedPath };
      const path = `${requestedPath.slice(0, -ext.length)}.gif`;
      return { format: 'gif', path, note: `ffmpeg not found on PATH; wrote ${path} (animated GIF) instead of ${requestedPath}` };
    }
    case '.gif':
      return { format: 'gif', path: requestedPath };
    case '.apng':
    case '.png':
      return { format: 'apng', path: requestedPath };
    case '':
      throw invalidParameter('output', `"${requestedPath}" has no extension; use .mp4, .webm, .gif or .apng for a video`);
    default:
      throw invalidParameter('output', `unsupported video extension "${ext}" in "${requestedPath}"; use .mp4, .webm, .gif or .apng`);
  }
}

/** What a clip file holds. `format` is `png` for a still PNG. */
export interface VideoInfo {
  format: VideoFormat | 'png';
  frames: number;
  width: number;
  height: number;
}

export interface ProbeVideoOptions {
  /** ffprobe binary used for MP4 frame counts; default `ffprobe` (see ffprobePathFor). */
  ffprobePath?: string;
  signal?: AbortSignal;
}

/**
 * Reads format, frame count and size of a GIF, PNG/APNG, MP4 or WebM (a path or its bytes).
 * GIF and PNG are read from their blocks. For MP4, frames are counted by decoding with
 * `ffprobe -count_frames` when ffprobe runs; otherwise they come from the video track's
 * sample table.
 */
export async function probeVideo(input: string | Uint8Array, opts: ProbeVideoOptions = {}): Promise<VideoInfo> {
  const { signal } = opts;
  const bytes = typeof input === 'string' ? await readFile(input, signal ? { signal } : {}) : input;
  if (isGif(bytes)) return { format: 'gif', ...gifInfo(bytes) };
  if (isPng(bytes)) {
    const { animated, frames, width, height } = pngInfo(bytes);
    return { format: animated ? 'apng' : 'png', frames, width, height };
  }
  if (isWebm(bytes)) {
    const ffprobe = opts.ffprobePath ?? 'ffprobe';
    if (!(await toolAvailable(ffprobe, signal))) {
      throw new DiffmeshError(Code.FAILED_PRECONDITION, 'STAGE_FAILED', `reading WebM needs ${ffprobe} (install ffmpeg)`);
    }
    const { frames, width, height } = await ffprobeVideo(input, { ffprobePath: ffprobe, ...(signal ? { signal } : {}) });
    return { format: 'webm', frames, width, height };
  }
  if (isMp4(bytes)) {
    const ffprobe = opts.ffprobePath ?? 'ffprobe';
    if (await toolAvailable(ffprobe, signal)) {
      const { frames, width, height } = await ffprobeVideo(input, { ffprobePath: ffprobe, ...(signal ? { signal } : {}) });
      return { format: 'mp4', frames, width, height };
    }
    const info = mp4Info(bytes);
    if (!info) throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'MP4 has no video track');
    return { format: 'mp4', ...info };
  }
  throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'not a GIF, PNG, MP4 or WebM file');
}

/** Whether `bytes` start with the EBML magic of Matroska/WebM. */
function isWebm(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3;
}
