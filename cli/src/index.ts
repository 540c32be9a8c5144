export { EMBEDDED_LIMITS, startEmbedded } from './embedded.js';
export type { Embedded, EmbeddedOptions } from './embedded.js';
export { generate, planOutput } from './generate.js';
export type { GenerateArgs, GenerateOutcome, OutputPlan } from './generate.js';
export { EXIT, main } from './main.js';
