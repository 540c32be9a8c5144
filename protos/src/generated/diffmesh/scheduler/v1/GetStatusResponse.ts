// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { PoolStatus as _diffmesh_scheduler_v1_PoolStatus, PoolStatus__Output as _diffmesh_scheduler_v1_PoolStatus__Output } from '../../../diffmesh/scheduler/v1/PoolStatus.js';
import type { RecentRequest as _diffmesh_scheduler_v1_RecentRequest, RecentRequest__Output as _diffmesh_scheduler_v1_RecentRequest__Output } from '../../../diffmesh/scheduler/v1/RecentRequest.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';

export interface GetStatusResponse {
  /**
   * Instance id of the scheduler that answered.
   */
  'schedulerId'?: (string);
  /**
   * Version of that scheduler: its package version, or its --version.
   */
  'version'?: (string);
  /**
   * Requests accepted and not yet finished.
   */
  'inFlight'?: (number);
  /**
   * Every pool the scheduler has had an instance, a queue or a request for,
   * sorted by name.
   */
  'pools'?: (_diffmesh_scheduler_v1_PoolStatus)[];
  /**
   * The most recent requests (up to 50), newest first; running ones included.
   */
  'recentRequests'?: (_diffmesh_scheduler_v1_RecentRequest)[];
  'time'?: (_google_protobuf_Timestamp | null);
}

export interface GetStatusResponse__Output {
  /**
   * Instance id of the scheduler that answered.
   */
  'schedulerId': (string);
  /**
   * Version of that scheduler: its package version, or its --version.
   */
  'version': (string);
  /**
   * Requests accepted and not yet finished.
   */
  'inFlight': (number);
  /**
   * Every pool the scheduler has had an instance, a queue or a request for,
   * sorted by name.
   */
  'pools': (_diffmesh_scheduler_v1_PoolStatus__Output)[];
  /**
   * The most recent requests (up to 50), newest first; running ones included.
   */
  'recentRequests': (_diffmesh_scheduler_v1_RecentRequest__Output)[];
  'time': (_google_protobuf_Timestamp__Output | null);
}
