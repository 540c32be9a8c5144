export { createScheduler, SUPPORTED_SCHEDULERS } from './create-scheduler.js';
export { parseSchedulerConfigJson } from './config.js';
export { SchedulerError } from './errors.js';
export type { SchedulerErrorCode } from './errors.js';
export { calculateShift, fluxPipelineSigmas } from './flow-match-euler-scheduler.js';
export { schedulerTraits } from './scheduler-traits.js';
export type { GuidanceMode, PredictionType, SchedulerTraits } from './scheduler-traits.js';
export { encodeSchedulerState, decodeSchedulerState } from './state-codec.js';
export type { CreateSchedulerOptions, DiffusionScheduler, NoiseSource, SchedulerClassName, SchedulerState } from './types.js';
