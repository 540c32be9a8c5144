// Original file: proto/diffmesh/scheduler/v1/scheduler.proto

import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from '../../../diffmesh/common/v1/GenerationParams.js';

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
}
