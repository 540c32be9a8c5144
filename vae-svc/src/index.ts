export { VaeDecodingStage } from './vae-decoding-stage.js';
export type { VaeDecodingStageOptions } from './vae-decoding-stage.js';
export { ImageEncodingStage, INPUT_IMAGE } from './image-encoding-stage.js';
export type { ImageEncodingStageOptions } from './image-encoding-stage.js';
