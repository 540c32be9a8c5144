// Original file: proto/diffmesh/common/v1/request.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';

/**
 * The input image of an image-to-video request.
 */
export interface InputImage {
  /**
   * A tensor already held by a tensor service.
   */
  'ref'?: (_diffmesh_common_v1_ObjectRef | null);
  /**
   * An encoded image (PNG or JPEG).
   */
  'data'?: (Buffer | Uint8Array | string);
  /**
   * Media type of `data`, e.g. `image/png`.
   */
  'mediaType'?: (string);
  'kind'?: "ref"|"data";
}

/**
 * The input image of an image-to-video request.
 */
export interface InputImage__Output {
  /**
   * A tensor already held by a tensor service.
   */
  'ref'?: (_diffmesh_common_v1_ObjectRef__Output | null);
  /**
   * An encoded image (PNG or JPEG).
   */
  'data'?: (Buffer);
  /**
   * Media type of `data`, e.g. `image/png`.
   */
  'mediaType': (string);
  'kind'?: "ref"|"data";
}
