// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from '../../../diffmesh/common/v1/GenerationParams.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';

export interface GenerateRequest {
  'model'?: (string);
  'params'?: (_diffmesh_common_v1_GenerationParams | null);
  /**
   * Larger runs first; 0 is the default.
   */
  'priority'?: (number);
  /**
   * Request timeout in milliseconds; 0 = the scheduler's default.
   */
  'timeoutMs'?: (number);
  /**
   * Optional client-chosen id (URL-safe, no ':'). Submitting the same id
   * again attaches to the existing request instead of starting a new one.
   */
  'requestId'?: (string);
  /**
   * When the request must be done by (absent = none). Within a priority the
   * earliest deadline runs first; a request the pool cannot finish in time
   * (by its measured step time) is refused with DEADLINE_EXCEEDED /
   * DEADLINE_UNREACHABLE, or failed early while running (the scheduler's
   * --deadline-policy).
   */
  'deadline'?: (_google_protobuf_Timestamp | null);
}

export interface GenerateRequest__Output {
  'model': (string);
  'params': (_diffmesh_common_v1_GenerationParams__Output | null);
  /**
   * Larger runs first; 0 is the default.
   */
  'priority': (number);
  /**
   * Request timeout in milliseconds; 0 = the scheduler's default.
   */
  'timeoutMs': (number);
  /**
   * Optional client-chosen id (URL-safe, no ':'). Submitting the same id
   * again attaches to the existing request instead of starting a new one.
   */
  'requestId': (string);
  /**
   * When the request must be done by (absent = none). Within a priority the
   * earliest deadline runs first; a request the pool cannot finish in time
   * (by its measured step time) is refused with DEADLINE_EXCEEDED /
   * DEADLINE_UNREACHABLE, or failed early while running (the scheduler's
   * --deadline-policy).
   */
  'deadline': (_google_protobuf_Timestamp__Output | null);
}
