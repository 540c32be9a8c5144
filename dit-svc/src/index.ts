export { DenoisingStage } from './denoising-stage.js';
export type { DenoisingStageOptions } from './denoising-stage.js';
export { DdimSampler, FlowEulerSampler, alphasCumprod, applyGuidance, samplerFor } from './samplers.js';
export type { DdimConfig, Sampler } from './samplers.js';
export { MicroBatcher } from './batching.js';
export { NoiseRng } from './rng.js';
export { familyProjection, latentPreview, manifestProjection, previewDue } from './latent-preview.js';
export type { LatentRgbProjection } from './latent-preview.js';
