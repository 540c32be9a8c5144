// Original file: proto/diffmesh/common/v1/plan.proto

/**
 * The stages a plan may contain, in pipeline order.
 */
export const StageName = {
  STAGE_NAME_UNSPECIFIED: 'STAGE_NAME_UNSPECIFIED',
  STAGE_NAME_TEXT_ENCODING: 'STAGE_NAME_TEXT_ENCODING',
  /**
   * A second text encoder, for models that use two.
   */
  STAGE_NAME_TEXT_ENCODING_2: 'STAGE_NAME_TEXT_ENCODING_2',
  /**
   * Encodes the input image of an image-to-image or image-to-video request.
   */
  STAGE_NAME_IMAGE_ENCODING: 'STAGE_NAME_IMAGE_ENCODING',
  STAGE_NAME_DENOISING: 'STAGE_NAME_DENOISING',
  STAGE_NAME_VAE_DECODING: 'STAGE_NAME_VAE_DECODING',
} as const;

/**
 * The stages a plan may contain, in pipeline order.
 */
export type StageName =
  | 'STAGE_NAME_UNSPECIFIED'
  | 0
  | 'STAGE_NAME_TEXT_ENCODING'
  | 1
  /**
   * A second text encoder, for models that use two.
   */
  | 'STAGE_NAME_TEXT_ENCODING_2'
  | 2
  /**
   * Encodes the input image of an image-to-image or image-to-video request.
   */
  | 'STAGE_NAME_IMAGE_ENCODING'
  | 3
  | 'STAGE_NAME_DENOISING'
  | 4
  | 'STAGE_NAME_VAE_DECODING'
  | 5

/**
 * The stages a plan may contain, in pipeline order.
 */
export type StageName__Output = typeof StageName[keyof typeof StageName]
