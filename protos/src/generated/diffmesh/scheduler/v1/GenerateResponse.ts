// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { RequestEvent as _diffmesh_common_v1_RequestEvent, RequestEvent__Output as _diffmesh_common_v1_RequestEvent__Output } from '../../../diffmesh/common/v1/RequestEvent.js';

export interface GenerateResponse {
  'event'?: (_diffmesh_common_v1_RequestEvent | null);
}

export interface GenerateResponse__Output {
  'event': (_diffmesh_common_v1_RequestEvent__Output | null);
}
