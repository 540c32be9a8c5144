import { invalidParameter } from '@diffmesh/core';
import { encodeImage, imageMediaType, IMAGE_FORMATS, type ImageFormat } from './image.js';
import { encodeVideo, VIDEO_FORMATS, type VideoFormat } from './video.js';

/** Every encoding a finished result can be served in: still pictures, then clips. */
export const RESULT_FORMATS = [...IMAGE_FORMATS, ...VIDEO_FORMATS] as const;
export type ResultFormat = ImageFormat | VideoFormat;

/** A result's frames: packed 8-bit RGB, all of one size. */
export interface ResultFrames {
  width: number;
  height: number;
  frames: readonly Uint8Array[];
}

/** An encoded result. */
export interface EncodedResult {
  format: ResultFormat;
  /** e.g. `image/png`, `video/mp4`. */
  mediaType: string;
  bytes: Uint8Array;
  /** Encoded size (MP4 and WebM pad odd sizes to even). */
  width: number;
  height: number;
  frames: number;
}

/** Options of {@link encodeResult}. */
export interface EncodeResultOptions {
  /** Frames per second of a clip. */
  fps: number;
  /** JPEG and WebP quality, 1–100. Default 90. */
  quality?: number;
  /** ffmpeg for MP4 and WebM. Default `ffmpeg` on PATH. */
  ffmpegPath?: string;
  signal?: AbortSignal;
}

function isImageFormat(f: string): f is ImageFormat {
  return (IMAGE_FORMATS as readonly string[]).includes(f);
}

/**
 * The format to encode a result of `frames` frames in: `requested` when the result can take
 * it (a still format needs a single frame), else PNG for a picture and MP4 for a clip.
 * `jpg` is accepted for `jpeg`. An unknown format, or a still format for a clip, is
 * INVALID_ARGUMENT naming `field`.
 */
export function resultFormatFor(frames: number, requested = '', field = 'format'): ResultFormat {
  const want = requested.trim().toLowerCase().replace(/^jpg$/, 'jpeg');
  if (want === '') return frames > 1 ? 'mp4' : 'png';
  if (!(RESULT_FORMATS as readonly string[]).includes(want)) {
    throw invalidParameter(field, `unknown format "${requested}"; use ${RESULT_FORMATS.join(', ')}`);
  }
  if (isImageFormat(want) && frames > 1) {
    throw invalidParameter(field, `a ${frames}-frame video cannot be encoded as ${want}; use ${VIDEO_FORMATS.join(', ')}`);
  }
  return want as ResultFormat;
}

/**
 * Encodes a finished result: PNG, JPEG or WebP for a picture (sharp), MP4 (H.264) or WebM
 * (VP9) through ffmpeg, GIF or APNG in JavaScript for a clip. The same encoders serve the
 * CLI's files, the gateway's HTTP results and the scheduler's GetResult.
 */
export async function encodeResult(result: ResultFrames, format: ResultFormat, opts: EncodeResultOptions): Promise<EncodedResult> {
  const { width, height, frames } = result;
  if (isImageFormat(format)) {
    if (frames.length !== 1) throw invalidParameter('format', `a ${frames.length}-frame video cannot be encoded as ${format}`);
    const bytes = await encodeImage(
      { width, height, data: frames[0] },
      format,
      opts.quality === undefined ? {} : { quality: opts.quality },
    );
    return { format, mediaType: imageMediaType(format), bytes, width, height, frames: 1 };
  }
  const video = await encodeVideo(frames, {
    width,
    height,
    fps: opts.fps,
    format,
    ...(opts.ffmpegPath ? { ffmpegPath: opts.ffmpegPath } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  return { format, mediaType: video.mimeType, bytes: video.bytes, width: video.width, height: video.height, frames: video.frames };
}
