import sharp, { type Metadata } from 'sharp';
import { Code, DiffmeshError, invalidParameter, MAX_MESSAGE_BYTES } from '@diffmesh/core';

/**
 * Largest encoded input image accepted, in bytes (15 MiB): a request carries its image in
 * one gRPC message, so the image and the rest of the request must fit in
 * {@link MAX_MESSAGE_BYTES} (16 MiB).
 */
export const MAX_INPUT_IMAGE_BYTES = MAX_MESSAGE_BYTES - 1024 * 1024;
/** Largest input image accepted, in pixels (width × height). */
export const MAX_INPUT_IMAGE_PIXELS = 8192 * 8192;

/** Formats an input image may come in. */
export const INPUT_IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
export type InputImageType = (typeof INPUT_IMAGE_TYPES)[number];

/** What a quick look at an encoded image tells. */
export interface ImageInfo {
  mediaType: InputImageType;
  width: number;
  height: number;
}

/** Interleaved 8-bit RGB pixels, row by row. */
export interface RgbImage {
  width: number;
  height: number;
  /** `width × height × 3` bytes. */
  data: Uint8Array;
}

const FORMAT_TYPES: Record<string, InputImageType> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

function badImage(field: string, what: string): DiffmeshError {
  return invalidParameter(field, what);
}

/**
 * Reads an encoded image's format and size without decoding its pixels. Throws
 * INVALID_ARGUMENT naming `field` for an empty, oversized, corrupt or unsupported image.
 */
export async function probeImage(bytes: Uint8Array, field = 'input_image'): Promise<ImageInfo> {
  if (bytes.byteLength === 0) throw badImage(field, 'is empty');
  if (bytes.byteLength > MAX_INPUT_IMAGE_BYTES) {
    throw badImage(field, `is ${bytes.byteLength} bytes; at most ${MAX_INPUT_IMAGE_BYTES} are accepted`);
  }
  let meta: Metadata;
  try {
    // Only the header is read here, so no pixel limit is needed; it is checked below.
    meta = await sharp(bytes, { limitInputPixels: false, failOn: 'error' }).metadata();
  } catch (err) {
    throw badImage(field, `is not a readable PNG, JPEG or WebP image (${shortReason(err)})`);
  }
  const mediaType = meta.format ? FORMAT_TYPES[meta.format] : undefined;
  if (!mediaType) throw badImage(field, `has format ${meta.format ?? 'unknown'}; use PNG, JPEG or WebP`);
  if (!meta.width || !meta.height) throw badImage(field, 'has no size');
  if ((meta.pages ?? 1) > 1) throw badImage(field, 'is animated; give a single frame');
  if (meta.width * meta.height > MAX_INPUT_IMAGE_PIXELS) {
    throw badImage(field, `is ${meta.width}×${meta.height}; at most ${MAX_INPUT_IMAGE_PIXELS} pixels are accepted`);
  }
  return { mediaType, width: meta.width, height: meta.height };
}

/**
 * Checks that an encoded image is whole: {@link probeImage}'s checks, then a decode of all of
 * its data (scaled down as it is read, so memory stays small) that fails on truncated or
 * corrupt pixel data, which the header alone does not show. It costs a decode (milliseconds for
 * a photo): the edges (the gateway, the CLI) use it to refuse a damaged upload at once, while
 * the scheduler only probes and the stage's decode catches what is left. Throws
 * INVALID_ARGUMENT naming `field`.
 */
export async function verifyImage(bytes: Uint8Array, field = 'input_image'): Promise<ImageInfo> {
  const info = await probeImage(bytes, field);
  try {
    await sharp(bytes, { limitInputPixels: MAX_INPUT_IMAGE_PIXELS, failOn: 'error' }).resize(64, 64, { fit: 'inside' }).raw().toBuffer();
  } catch (err) {
    throw badImage(field, `is truncated or corrupt (${shortReason(err)})`);
  }
  return info;
}

/**
 * Decodes an encoded image to RGB (alpha dropped onto black, EXIF orientation applied),
 * resized to `width × height` when given: scaled to cover the box and centre-cropped, with
 * Lanczos resampling as diffusers' image processor does. Throws INVALID_ARGUMENT naming
 * `field` for an image that cannot be decoded.
 */
export async function decodeImage(bytes: Uint8Array, size?: { width: number; height: number }, field = 'input_image'): Promise<RgbImage> {
  await probeImage(bytes, field);
  try {
    let img = sharp(bytes, { limitInputPixels: MAX_INPUT_IMAGE_PIXELS, failOn: 'error' }).rotate().removeAlpha().toColourspace('srgb');
    if (size) img = img.resize(size.width, size.height, { fit: 'cover', position: 'centre', kernel: 'lanczos3' });
    const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`decoded to ${info.channels} channels`);
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  } catch (err) {
    if (err instanceof DiffmeshError) throw err;
    throw badImage(field, `could not be decoded (${shortReason(err)})`);
  }
}

/** Encodings of a still picture. */
export const IMAGE_FORMATS = ['png', 'jpeg', 'webp'] as const;
export type ImageFormat = (typeof IMAGE_FORMATS)[number];

/** Options of {@link encodeImage}. */
export interface EncodeImageOptions {
  /** JPEG and WebP quality, 1–100. Default 90. */
  quality?: number;
}

/** Encodes RGB pixels as PNG, JPEG or WebP. */
export async function encodeImage(image: RgbImage, format: ImageFormat, opts: EncodeImageOptions = {}): Promise<Buffer> {
  if (image.data.byteLength !== image.width * image.height * 3) {
    throw new DiffmeshError(
      Code.INTERNAL,
      'INTERNAL',
      `image data is ${image.data.byteLength} bytes, expected ${image.width}×${image.height}×3`,
    );
  }
  const img = sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } });
  const quality = opts.quality ?? 90;
  switch (format) {
    case 'png':
      return img.png().toBuffer();
    case 'jpeg':
      return img.jpeg({ quality, mozjpeg: false }).toBuffer();
    case 'webp':
      return img.webp({ quality }).toBuffer();
  }
}

/** The media type of an image format. */
export function imageMediaType(format: ImageFormat): string {
  return format === 'jpeg' ? 'image/jpeg' : `image/${format}`;
}

function shortReason(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  const first = msg.split('\n')[0].trim();
  return first.length > 100 ? `${first.slice(0, 97)}…` : first;
}
