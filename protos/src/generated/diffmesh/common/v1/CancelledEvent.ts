// Original file: proto/diffmesh/common/v1/events.proto


/**
 * The request was cancelled.
 */
export interface CancelledEvent {
  'reason'?: (string);
}

/**
 * The request was cancelled.
 */
export interface CancelledEvent__Output {
  'reason': (string);
}
