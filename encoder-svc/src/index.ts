export { TextEncodingStage } from './text-encoding-stage.js';
export type { TextEncodingStageOptions } from './text-encoding-stage.js';
