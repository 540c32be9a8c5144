// Original file: proto/diffmesh/common/v1/events.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';

/**
 * A preview of the picture as it forms: the denoising latent after `step`,
 * projected to RGB by a per-model linear map of its channels (or, for a model
 * without known factors, its first three channels normalised) and encoded as
 * a small image. For a video, the first frame. Only with `preview` in the
 * request's params. Previews are not stored: a preview event carries the
 * sequence of the stored event before it (resuming after it misses nothing),
 * and only those who follow the request while it runs see them.
 */
export interface PreviewEvent {
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
  /**
   * The preview shows the latent after this step, 1..total_steps.
   */
  'step'?: (number);
  'totalSteps'?: (number);
  /**
   * `image/png`.
   */
  'mediaType'?: (string);
  /**
   * The encoded image (base64 in JSON), a few KiB.
   */
  'data'?: (Buffer | Uint8Array | string);
  /**
   * Size of the image in pixels.
   */
  'width'?: (number);
  'height'?: (number);
}

/**
 * A preview of the picture as it forms: the denoising latent after `step`,
 * projected to RGB by a per-model linear map of its channels (or, for a model
 * without known factors, its first three channels normalised) and encoded as
 * a small image. For a video, the first frame. Only with `preview` in the
 * request's params. Previews are not stored: a preview event carries the
 * sequence of the stored event before it (resuming after it misses nothing),
 * and only those who follow the request while it runs see them.
 */
export interface PreviewEvent__Output {
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
  /**
   * The preview shows the latent after this step, 1..total_steps.
   */
  'step': (number);
  'totalSteps': (number);
  /**
   * `image/png`.
   */
  'mediaType': (string);
  /**
   * The encoded image (base64 in JSON), a few KiB.
   */
  'data': (Buffer);
  /**
   * Size of the image in pixels.
   */
  'width': (number);
  'height': (number);
}
