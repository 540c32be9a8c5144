import { invalidOption } from './errors.js';
import { checkStrength } from './img2img-start.js';
import type { CreateSchedulerOptions } from './types.js';

/** `CreateSchedulerOptions` checked, with defaults filled in. */
export interface RunOptions {
  steps: number;
  strength: number;
  imageSeqLen?: number;
  mu?: number;
  sigmas?: readonly number[];
  eta: number;
  batchSize: number;
}

export function checkRunOptions(o: CreateSchedulerOptions): RunOptions {
  if (typeof o !== 'object' || o === null) throw invalidOption('steps', 'options with `steps` are required');
  if (!Number.isInteger(o.steps) || o.steps < 1) throw invalidOption('steps', `must be a positive integer, got ${String(o.steps)}`);
  const strength = checkStrength(o.strength);
  if (o.imageSeqLen !== undefined && !(Number.isInteger(o.imageSeqLen) && o.imageSeqLen > 0)) {
    throw invalidOption('imageSeqLen', `must be a positive integer, got ${String(o.imageSeqLen)}`);
  }
  if (o.mu !== undefined && !Number.isFinite(o.mu)) throw invalidOption('mu', `must be a finite number, got ${String(o.mu)}`);
  if (o.sigmas !== undefined) {
    if (!Array.isArray(o.sigmas) || o.sigmas.some((s) => typeof s !== 'number' || !Number.isFinite(s))) {
      throw invalidOption('sigmas', 'must be an array of finite numbers');
    }
    if (o.sigmas.length !== o.steps) throw invalidOption('sigmas', `has ${o.sigmas.length} values, steps is ${o.steps}`);
  }
  const eta = o.eta ?? 0;
  if (typeof eta !== 'number' || !(eta >= 0) || !Number.isFinite(eta))
    throw invalidOption('eta', `must be a number ≥ 0, got ${String(o.eta)}`);
  const batchSize = o.batchSize ?? 1;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw invalidOption('batchSize', `must be a positive integer, got ${String(o.batchSize)}`);
  return { steps: o.steps, strength, imageSeqLen: o.imageSeqLen, mu: o.mu, sigmas: o.sigmas, eta, batchSize };
}
