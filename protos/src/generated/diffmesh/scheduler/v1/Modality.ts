// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

/**
 * What a model can generate.
 */
export const Modality = {
  MODALITY_UNSPECIFIED: 'MODALITY_UNSPECIFIED',
  MODALITY_TEXT_TO_IMAGE: 'MODALITY_TEXT_TO_IMAGE',
  MODALITY_TEXT_TO_VIDEO: 'MODALITY_TEXT_TO_VIDEO',
  MODALITY_IMAGE_TO_VIDEO: 'MODALITY_IMAGE_TO_VIDEO',
  /**
   * img2img: a prompt and an input image make an image.
   */
  MODALITY_IMAGE_TO_IMAGE: 'MODALITY_IMAGE_TO_IMAGE',
} as const;

/**
 * What a model can generate.
 */
export type Modality =
  | 'MODALITY_UNSPECIFIED'
  | 0
  | 'MODALITY_TEXT_TO_IMAGE'
  | 1
  | 'MODALITY_TEXT_TO_VIDEO'
  | 2
  | 'MODALITY_IMAGE_TO_VIDEO'
  | 3
  /**
   * img2img: a prompt and an input image make an image.
   */
  | 'MODALITY_IMAGE_TO_IMAGE'
  | 4

/**
 * What a model can generate.
 */
export type Modality__Output = typeof Modality[keyof typeof Modality]
