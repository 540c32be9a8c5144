// Original file: proto/diffmesh/common/v1/error.proto

import type { Code as _google_rpc_Code, Code__Output as _google_rpc_Code__Output } from '../../../google/rpc/Code.js';
import type { ErrorReason as _diffmesh_common_v1_ErrorReason, ErrorReason__Output as _diffmesh_common_v1_ErrorReason__Output } from '../../../diffmesh/common/v1/ErrorReason.js';

/**
 * An error as recorded in a request or reported by a task.
 */
export interface ErrorDetail {
  /**
   * gRPC status code.
   */
  'code'?: (_google_rpc_Code);
  'reason'?: (_diffmesh_common_v1_ErrorReason);
  /**
   * Message safe to show to the caller.
   */
  'message'?: (string);
  /**
   * The request field the error is about (snake_case), if any.
   */
  'field'?: (string);
  /**
   * Extra key/values, as in ErrorInfo.metadata.
   */
  'metadata'?: ({[key: string]: string});
  /**
   * Suggested client back-off in milliseconds; 0 = none.
   */
  'retryAfterMs'?: (number);
}

/**
 * An error as recorded in a request or reported by a task.
 */
export interface ErrorDetail__Output {
  /**
   * gRPC status code.
   */
  'code': (_google_rpc_Code__Output);
  'reason': (_diffmesh_common_v1_ErrorReason__Output);
  /**
   * Message safe to show to the caller.
   */
  'message': (string);
  /**
   * The request field the error is about (snake_case), if any.
   */
  'field': (string);
  /**
   * Extra key/values, as in ErrorInfo.metadata.
   */
  'metadata': ({[key: string]: string});
  /**
   * Suggested client back-off in milliseconds; 0 = none.
   */
  'retryAfterMs': (number);
}
