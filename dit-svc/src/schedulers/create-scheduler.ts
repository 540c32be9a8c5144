import { ConfigReader } from './config.js';
import { createDdimScheduler } from './ddim-scheduler.js';
import { createDpmSolverMultistepScheduler } from './dpm-solver-multistep-scheduler.js';
import { SchedulerError } from './errors.js';
import { createEulerAncestralScheduler } from './euler-ancestral-scheduler.js';
import { createEulerDiscreteScheduler } from './euler-discrete-scheduler.js';
import { createFlowMatchEulerScheduler } from './flow-match-euler-scheduler.js';
import { createLcmScheduler } from './lcm-scheduler.js';
import { createPndmScheduler } from './pndm-scheduler.js';
import { checkRunOptions, type RunOptions } from './run-options.js';
import type { SchedulerBase } from './scheduler-base.js';
import type { CreateSchedulerOptions, DiffusionScheduler, SchedulerClassName } from './types.js';

const FACTORIES: Record<SchedulerClassName, (r: ConfigReader, o: RunOptions) => SchedulerBase> = {
  PNDMScheduler: createPndmScheduler,
  DDIMScheduler: createDdimScheduler,
  EulerDiscreteScheduler: createEulerDiscreteScheduler,
  EulerAncestralDiscreteScheduler: createEulerAncestralScheduler,
  DPMSolverMultistepScheduler: createDpmSolverMultistepScheduler,
  LCMScheduler: createLcmScheduler,
  FlowMatchEulerDiscreteScheduler: createFlowMatchEulerScheduler,
};

/** The `_class_name`s `createScheduler` accepts. */
export const SUPPORTED_SCHEDULERS: readonly SchedulerClassName[] = Object.keys(FACTORIES) as SchedulerClassName[];

/** The raw config as an object, and the class to build (option override, else `_class_name`). */
export function resolveClass(
  config: unknown,
  override?: SchedulerClassName,
): { raw: Record<string, unknown>; className: SchedulerClassName } {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    throw new SchedulerError('INVALID_FIELD', 'scheduler config must be a JSON object (scheduler/scheduler_config.json)');
  }
  const raw = config as Record<string, unknown>;
  const name = override ?? raw._class_name;
  if (typeof name !== 'string') {
    throw new SchedulerError(
      'UNKNOWN_SCHEDULER',
      `scheduler config has no \`_class_name\`; supported: ${SUPPORTED_SCHEDULERS.join(', ')}`,
      '_class_name',
    );
  }
  if (!(name in FACTORIES)) {
    throw new SchedulerError(
      'UNKNOWN_SCHEDULER',
      `scheduler class "${name}" is not supported; supported: ${SUPPORTED_SCHEDULERS.join(', ')}`,
      '_class_name',
    );
  }
  return { raw, className: name as SchedulerClassName };
}

/**
 * A scheduler for one run, from a diffusers `scheduler_config.json` object (unknown keys are
 * ignored, as diffusers does) and the run's options. Throws `SchedulerError` naming the field
 * for an unknown class, a bad value, or an option this implementation does not support.
 */
export function createScheduler(config: unknown, options: CreateSchedulerOptions): DiffusionScheduler {
  const { raw, className } = resolveClass(config, options?.className);
  const o = checkRunOptions(options);
  if (o.sigmas && className !== 'FlowMatchEulerDiscreteScheduler') {
    throw new SchedulerError(
      'INVALID_FIELD',
      `scheduler option \`sigmas\`: custom sigmas are only supported for FlowMatchEulerDiscreteScheduler, not ${className}`,
      'sigmas',
    );
  }
  return FACTORIES[className](new ConfigReader(className, raw), o);
}
