export { Code, DiffmeshError, REASONS, asDiffmeshError, cancelled, invalidParameter, isRetryableCode, unknownModel } from './errors.js';
export type { DiffmeshErrorOptions, Reason } from './errors.js';
