export { tensorToFrames } from './frames.js';
export type { RgbFrames } from './frames.js';
export { decodePng, encodePng } from './png.js';
export type { DecodedPng } from './png.js';
export { countGifFrames, gifDelays } from './gif.js';
export { ffmpegAvailable, ffprobePathFor } from './ffmpeg.js';
export { VIDEO_FORMATS, chooseVideoFormat, encodeVideo, probeVideo } from './video.js';
export type {
  EncodeVideoOptions,
  EncodedVideo,
  ProbeVideoOptions,
  VideoFormat,
  VideoFormatChoice,
  VideoInfo,
} from './video.js';
