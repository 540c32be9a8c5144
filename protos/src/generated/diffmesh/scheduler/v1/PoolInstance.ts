// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { BreakerState as _diffmesh_scheduler_v1_BreakerState, BreakerState__Output as _diffmesh_scheduler_v1_BreakerState__Output } from '../../../diffmesh/scheduler/v1/BreakerState.js';

/**
 * A stage instance of a pool with its load.
 */
export interface PoolInstance {
  'id'?: (string);
  'version'?: (string);
  'nodeId'?: (string);
  /**
   * gRPC address; empty for an in-process instance.
   */
  'address'?: (string);
  /**
   * Tasks it may run at once.
   */
  'capacity'?: (number);
  /**
   * Tasks it runs now.
   */
  'active'?: (number);
  'breaker'?: (_diffmesh_scheduler_v1_BreakerState);
  /**
   * False while it gets no new work (breaker open, connection lost, draining).
   */
  'available'?: (boolean);
  /**
   * Models served; empty = any.
   */
  'models'?: (string)[];
}

/**
 * A stage instance of a pool with its load.
 */
export interface PoolInstance__Output {
  'id': (string);
  'version': (string);
  'nodeId': (string);
  /**
   * gRPC address; empty for an in-process instance.
   */
  'address': (string);
  /**
   * Tasks it may run at once.
   */
  'capacity': (number);
  /**
   * Tasks it runs now.
   */
  'active': (number);
  'breaker': (_diffmesh_scheduler_v1_BreakerState__Output);
  /**
   * False while it gets no new work (breaker open, connection lost, draining).
   */
  'available': (boolean);
  /**
   * Models served; empty = any.
   */
  'models': (string)[];
}
