// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { Long } from '@grpc/proto-loader';

/**
 * What the encoded result is; the first message of GetResult.
 */
export interface ResultHeader {
  /**
   * e.g. `image/png`, `video/mp4`.
   */
  'mediaType'?: (string);
  /**
   * The format encoded, e.g. `png`, `mp4`.
   */
  'format'?: (string);
  /**
   * Length of the encoded file: the chunks that follow add up to it.
   */
  'sizeBytes'?: (number | string | Long);
  /**
   * Size in pixels (MP4 and WebM pad odd sizes to even).
   */
  'width'?: (number);
  'height'?: (number);
  'frames'?: (number);
  /**
   * Frames per second of a video.
   */
  'fps'?: (number | string);
  /**
   * A file name to save it under, e.g. `<req_id>.png`.
   */
  'fileName'?: (string);
}

/**
 * What the encoded result is; the first message of GetResult.
 */
export interface ResultHeader__Output {
  /**
   * e.g. `image/png`, `video/mp4`.
   */
  'mediaType': (string);
  /**
   * The format encoded, e.g. `png`, `mp4`.
   */
  'format': (string);
  /**
   * Length of the encoded file: the chunks that follow add up to it.
   */
  'sizeBytes': (string);
  /**
   * Size in pixels (MP4 and WebM pad odd sizes to even).
   */
  'width': (number);
  'height': (number);
  'frames': (number);
  /**
   * Frames per second of a video.
   */
  'fps': (number);
  /**
   * A file name to save it under, e.g. `<req_id>.png`.
   */
  'fileName': (string);
}
