// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

/**
 * State of a stage instance's circuit breaker.
 */
export const BreakerState = {
  /**
   * The instance has no breaker (an in-process instance).
   */
  BREAKER_STATE_UNSPECIFIED: 'BREAKER_STATE_UNSPECIFIED',
  BREAKER_STATE_CLOSED: 'BREAKER_STATE_CLOSED',
  /**
   * Lets one probe task through.
   */
  BREAKER_STATE_HALF_OPEN: 'BREAKER_STATE_HALF_OPEN',
  /**
   * Gets no work until the breaker half-opens.
   */
  BREAKER_STATE_OPEN: 'BREAKER_STATE_OPEN',
} as const;

/**
 * State of a stage instance's circuit breaker.
 */
export type BreakerState =
  /**
   * The instance has no breaker (an in-process instance).
   */
  | 'BREAKER_STATE_UNSPECIFIED'
  | 0
  | 'BREAKER_STATE_CLOSED'
  | 1
  /**
   * Lets one probe task through.
   */
  | 'BREAKER_STATE_HALF_OPEN'
  | 2
  /**
   * Gets no work until the breaker half-opens.
   */
  | 'BREAKER_STATE_OPEN'
  | 3

/**
 * State of a stage instance's circuit breaker.
 */
export type BreakerState__Output = typeof BreakerState[keyof typeof BreakerState]
