// Original file: proto/diffmesh/stage/v1/stage.proto


/**
 * Instance -> scheduler: what the instance can take.
 */
export interface InstanceStatus {
  'instanceId'?: (string);
  /**
   * Tasks the instance runs at once.
   */
  'capacity'?: (number);
  /**
   * Tasks running now.
   */
  'inFlight'?: (number);
  /**
   * True while shutting down: assign nothing more.
   */
  'draining'?: (boolean);
}

/**
 * Instance -> scheduler: what the instance can take.
 */
export interface InstanceStatus__Output {
  'instanceId': (string);
  /**
   * Tasks the instance runs at once.
   */
  'capacity': (number);
  /**
   * Tasks running now.
   */
  'inFlight': (number);
  /**
   * True while shutting down: assign nothing more.
   */
  'draining': (boolean);
}
