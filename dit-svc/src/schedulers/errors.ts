/** Why a scheduler config or option was refused. */
export type SchedulerErrorCode =
  /** `_class_name` is missing or not one of the supported classes. */
  | 'UNKNOWN_SCHEDULER'
  /** A field has the wrong type or an impossible value. */
  | 'INVALID_FIELD'
  /** A valid diffusers option that this implementation does not support. */
  | 'UNSUPPORTED_OPTION'
  /** The scheduler was driven wrongly (step out of order, wrong lengths, missing noise). */
  | 'INVALID_USE';

/**
 * A refused scheduler config, option or call. `field` names the config field
 * (`scheduler_config.json` key) or option it is about, when there is one.
 */
export class SchedulerError extends Error {
  override readonly name = 'SchedulerError';

  constructor(
    readonly code: SchedulerErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export function invalidField(field: string, message: string): SchedulerError {
  return new SchedulerError('INVALID_FIELD', `scheduler config field \`${field}\`: ${message}`, field);
}

export function unsupported(className: string, field: string, message: string): SchedulerError {
  return new SchedulerError('UNSUPPORTED_OPTION', `${className}: \`${field}\` ${message}`, field);
}

export function invalidOption(option: string, message: string): SchedulerError {
  return new SchedulerError('INVALID_FIELD', `scheduler option \`${option}\`: ${message}`, option);
}

export function invalidUse(message: string): SchedulerError {
  return new SchedulerError('INVALID_USE', message);
}
