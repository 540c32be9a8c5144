// Original file: proto/diffmesh/common/v1/events.proto


/**
 * The request was accepted and waits in the first stage's queue.
 */
export interface QueuedEvent {
  'pool'?: (string);
  /**
   * Tasks ahead of this one in the queue, when known.
   */
  'position'?: (number);
}

/**
 * The request was accepted and waits in the first stage's queue.
 */
export interface QueuedEvent__Output {
  'pool': (string);
  /**
   * Tasks ahead of this one in the queue, when known.
   */
  'position': (number);
}
