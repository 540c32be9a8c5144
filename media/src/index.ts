/**
 * @diffmesh/media: turning generated frames into files — PNG, JPEG, WebP, GIF, MP4/WebM
 * (ffmpeg) — and reading input images (PNG, JPEG, WebP) for image-to-image and
 * image-to-video requests.
 */
export { ffmpegAvailable, ffprobePathFor } from './ffmpeg.js';
export { tensorToFrames } from './frames.js';
export type { RgbFrames } from './frames.js';
export { countGifFrames, gifDelays } from './gif.js';
export {
  decodeImage,
  encodeImage,
  IMAGE_FORMATS,
  imageMediaType,
  INPUT_IMAGE_TYPES,
  MAX_INPUT_IMAGE_BYTES,
  MAX_INPUT_IMAGE_PIXELS,
  probeImage,
  verifyImage,
} from './image.js';
export type { EncodeImageOptions, ImageFormat, ImageInfo, InputImageType, RgbImage } from './image.js';
export { decodePng, encodePng } from './png.js';
export type { DecodedPng } from './png.js';
export { encodeResult, RESULT_FORMATS, resultFormatFor } from './result.js';
export type { EncodedResult, EncodeResultOptions, ResultFormat, ResultFrames } from './result.js';
export { chooseVideoFormat, encodeVideo, probeVideo, VIDEO_FORMATS } from './video.js';
export type { EncodedVideo, EncodeVideoOptions, ProbeVideoOptions, VideoFormat, VideoFormatChoice, VideoInfo } from './video.js';
