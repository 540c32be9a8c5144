export { VaeDecodingStage } from './vae-decoding-stage.js';
export type { VaeDecodingStageOptions } from './vae-decoding-stage.js';
