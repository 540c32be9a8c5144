// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestEvent as _diffmesh_common_v1_RequestEvent, RequestEvent__Output as _diffmesh_common_v1_RequestEvent__Output } from '../../../diffmesh/common/v1/RequestEvent.js';

export interface WatchResponse {
  /**
   * As in GenerateResponse: in order, several together when they happened together.
   */
  'events'?: (_diffmesh_common_v1_RequestEvent)[];
}

export interface WatchResponse__Output {
  /**
   * As in GenerateResponse: in order, several together when they happened together.
   */
  'events': (_diffmesh_common_v1_RequestEvent__Output)[];
}
