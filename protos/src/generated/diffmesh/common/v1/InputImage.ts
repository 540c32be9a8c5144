// Original file: proto/diffmesh/common/v1/request.proto

import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';

/**
 * The input image of an image-to-image or image-to-video request. The scheduler
 * checks it at admission (a corrupt, oversized or foreign image is
 * INVALID_ARGUMENT naming `input_image`), stores its encoded bytes as the
 * request's object `input_image` (dtype uint8, shape [byte length]) and hands
 * that ref to the stage that takes it; the bytes go no further in the params.
 */
export interface InputImage {
  /**
   * An encoded image held by a tensor service: a uint8 object of shape
   * [byte length]. The scheduler copies it into the request (the original
   * stays with its owner).
   */
  'ref'?: (_diffmesh_common_v1_ObjectRef | null);
  /**
   * An encoded image: PNG, JPEG or WebP, one frame, at most 15 MiB and
   * 8192×8192 pixels. Base64 in JSON (the gateway's /api/v1 routes).
   */
  'data'?: (Buffer | Uint8Array | string);
  /**
   * Media type of `data`, e.g. `image/png`; optional: the bytes decide.
   */
  'mediaType'?: (string);
  'kind'?: "ref"|"data";
}

/**
 * The input image of an image-to-image or image-to-video request. The scheduler
 * checks it at admission (a corrupt, oversized or foreign image is
 * INVALID_ARGUMENT naming `input_image`), stores its encoded bytes as the
 * request's object `input_image` (dtype uint8, shape [byte length]) and hands
 * that ref to the stage that takes it; the bytes go no further in the params.
 */
export interface InputImage__Output {
  /**
   * An encoded image held by a tensor service: a uint8 object of shape
   * [byte length]. The scheduler copies it into the request (the original
   * stays with its owner).
   */
  'ref'?: (_diffmesh_common_v1_ObjectRef__Output | null);
  /**
   * An encoded image: PNG, JPEG or WebP, one frame, at most 15 MiB and
   * 8192×8192 pixels. Base64 in JSON (the gateway's /api/v1 routes).
   */
  'data'?: (Buffer);
  /**
   * Media type of `data`, e.g. `image/png`; optional: the bytes decide.
   */
  'mediaType': (string);
  'kind'?: "ref"|"data";
}
