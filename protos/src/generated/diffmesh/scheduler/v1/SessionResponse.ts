// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { SessionAnswer as _diffmesh_scheduler_v1_SessionAnswer, SessionAnswer__Output as _diffmesh_scheduler_v1_SessionAnswer__Output } from '../../../diffmesh/scheduler/v1/SessionAnswer.js';
import type { RequestEvent as _diffmesh_common_v1_RequestEvent, RequestEvent__Output as _diffmesh_common_v1_RequestEvent__Output } from '../../../diffmesh/common/v1/RequestEvent.js';

/**
 * Answers and events of a Session. A request's answer comes before its events,
 * in the same response or an earlier one; events of one request keep their order.
 */
export interface SessionResponse {
  'answers'?: (_diffmesh_scheduler_v1_SessionAnswer)[];
  /**
   * Events of the session's accepted requests (each names its `req_id`).
   */
  'events'?: (_diffmesh_common_v1_RequestEvent)[];
}

/**
 * Answers and events of a Session. A request's answer comes before its events,
 * in the same response or an earlier one; events of one request keep their order.
 */
export interface SessionResponse__Output {
  'answers': (_diffmesh_scheduler_v1_SessionAnswer__Output)[];
  /**
   * Events of the session's accepted requests (each names its `req_id`).
   */
  'events': (_diffmesh_common_v1_RequestEvent__Output)[];
}
