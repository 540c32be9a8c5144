// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestEvent as _diffmesh_common_v1_RequestEvent, RequestEvent__Output as _diffmesh_common_v1_RequestEvent__Output } from '../../../diffmesh/common/v1/RequestEvent.js';

export interface GenerateResponse {
  /**
   * Events in the order they happened (their `sequence` numbers count up from 1).
   * Events that happen together, such as a stage finishing and the next one being
   * queued and started, come in one response.
   */
  'events'?: (_diffmesh_common_v1_RequestEvent)[];
}

export interface GenerateResponse__Output {
  /**
   * Events in the order they happened (their `sequence` numbers count up from 1).
   * Events that happen together, such as a stage finishing and the next one being
   * queued and started, come in one response.
   */
  'events': (_diffmesh_common_v1_RequestEvent__Output)[];
}
