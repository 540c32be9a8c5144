// Original file: proto/diffmesh/common/v1/request.proto

import type { InputImage as _diffmesh_common_v1_InputImage, InputImage__Output as _diffmesh_common_v1_InputImage__Output } from '../../../diffmesh/common/v1/InputImage.js';
import type { StepCacheParams as _diffmesh_common_v1_StepCacheParams, StepCacheParams__Output as _diffmesh_common_v1_StepCacheParams__Output } from '../../../diffmesh/common/v1/StepCacheParams.js';
import type { PreviewParams as _diffmesh_common_v1_PreviewParams, PreviewParams__Output as _diffmesh_common_v1_PreviewParams__Output } from '../../../diffmesh/common/v1/PreviewParams.js';
import type { AdapterParams as _diffmesh_common_v1_AdapterParams, AdapterParams__Output as _diffmesh_common_v1_AdapterParams__Output } from '../../../diffmesh/common/v1/AdapterParams.js';
import type { Long } from '@grpc/proto-loader';

/**
 * Parameters of one generation request. Unset optional fields take the
 * model's defaults.
 */
export interface GenerationParams {
  'prompt'?: (string);
  'negativePrompt'?: (string);
  /**
   * Output size in pixels.
   */
  'width'?: (number);
  'height'?: (number);
  /**
   * 1 for an image.
   */
  'numFrames'?: (number);
  'numInferenceSteps'?: (number);
  'guidanceScale'?: (number | string);
  'seed'?: (number | string | Long);
  /**
   * Frames per second of a video result.
   */
  'fps'?: (number | string);
  /**
   * The image to start from: img2img for image-to-image models, the first frame
   * for image-to-video models. A model whose plan has no stage that takes an
   * image refuses it (INVALID_ARGUMENT naming `input_image`).
   */
  'inputImage'?: (_diffmesh_common_v1_InputImage | null);
  /**
   * img2img strength in (0, 1]: how much of the input image is noised away
   * (1 = start from pure noise). Only with `input_image`; default 0.8.
   */
  'strength'?: (number | string);
  /**
   * Step caching (TeaCache-style): the denoiser is not run at a step whose input
   * changed little since the last step it ran at; that run's prediction is used
   * again. Unset fields take the model's plan defaults; off unless a threshold
   * above 0 is set here or in the plan.
   */
  'stepCache'?: (_diffmesh_common_v1_StepCacheParams | null);
  /**
   * Live previews every N denoising steps; absent = none.
   */
  'preview'?: (_diffmesh_common_v1_PreviewParams | null);
  /**
   * LoRA adapters to apply to the model, by name (files the denoising stage
   * serves from its adapter directory), each at its scale; several at once
   * add up. An unknown name is INVALID_ARGUMENT naming `adapters[i].name`.
   */
  'adapters'?: (_diffmesh_common_v1_AdapterParams)[];
  '_negativePrompt'?: "negativePrompt";
  '_width'?: "width";
  '_height'?: "height";
  '_numFrames'?: "numFrames";
  '_numInferenceSteps'?: "numInferenceSteps";
  '_guidanceScale'?: "guidanceScale";
  '_seed'?: "seed";
  '_fps'?: "fps";
  '_strength'?: "strength";
}

/**
 * Parameters of one generation request. Unset optional fields take the
 * model's defaults.
 */
export interface GenerationParams__Output {
  'prompt': (string);
  'negativePrompt'?: (string);
  /**
   * Output size in pixels.
   */
  'width'?: (number);
  'height'?: (number);
  /**
   * 1 for an image.
   */
  'numFrames'?: (number);
  'numInferenceSteps'?: (number);
  'guidanceScale'?: (number);
  'seed'?: (string);
  /**
   * Frames per second of a video result.
   */
  'fps'?: (number);
  /**
   * The image to start from: img2img for image-to-image models, the first frame
   * for image-to-video models. A model whose plan has no stage that takes an
   * image refuses it (INVALID_ARGUMENT naming `input_image`).
   */
  'inputImage': (_diffmesh_common_v1_InputImage__Output | null);
  /**
   * img2img strength in (0, 1]: how much of the input image is noised away
   * (1 = start from pure noise). Only with `input_image`; default 0.8.
   */
  'strength'?: (number);
  /**
   * Step caching (TeaCache-style): the denoiser is not run at a step whose input
   * changed little since the last step it ran at; that run's prediction is used
   * again. Unset fields take the model's plan defaults; off unless a threshold
   * above 0 is set here or in the plan.
   */
  'stepCache': (_diffmesh_common_v1_StepCacheParams__Output | null);
  /**
   * Live previews every N denoising steps; absent = none.
   */
  'preview': (_diffmesh_common_v1_PreviewParams__Output | null);
  /**
   * LoRA adapters to apply to the model, by name (files the denoising stage
   * serves from its adapter directory), each at its scale; several at once
   * add up. An unknown name is INVALID_ARGUMENT naming `adapters[i].name`.
   */
  'adapters': (_diffmesh_common_v1_AdapterParams__Output)[];
  '_negativePrompt'?: "negativePrompt";
  '_width'?: "width";
  '_height'?: "height";
  '_numFrames'?: "numFrames";
  '_numInferenceSteps'?: "numInferenceSteps";
  '_guidanceScale'?: "guidanceScale";
  '_seed'?: "seed";
  '_fps'?: "fps";
  '_strength'?: "strength";
}
