// Original file: proto/diffmesh/common/v1/error.proto

/**
 * Why a diffmesh call failed. On gRPC errors the same value travels, without
 * the `ERROR_REASON_` prefix, in `google.rpc.ErrorInfo.reason` (domain
 * `diffmesh.io`), and in the `Diffmesh-Error-Reason` NATS header.
 */
export const ErrorReason = {
  ERROR_REASON_UNSPECIFIED: 'ERROR_REASON_UNSPECIFIED',
  /**
   * A request parameter is invalid; ErrorInfo metadata `field` names it.
   */
  ERROR_REASON_INVALID_PARAMETER: 'ERROR_REASON_INVALID_PARAMETER',
  /**
   * No execution plan matches the model.
   */
  ERROR_REASON_UNKNOWN_MODEL: 'ERROR_REASON_UNKNOWN_MODEL',
  ERROR_REASON_REQUEST_NOT_FOUND: 'ERROR_REASON_REQUEST_NOT_FOUND',
  ERROR_REASON_OBJECT_NOT_FOUND: 'ERROR_REASON_OBJECT_NOT_FOUND',
  ERROR_REASON_OBJECT_EXPIRED: 'ERROR_REASON_OBJECT_EXPIRED',
  ERROR_REASON_CHECKSUM_MISMATCH: 'ERROR_REASON_CHECKSUM_MISMATCH',
  /**
   * The stage queue is full; retry after RetryInfo.retry_delay.
   */
  ERROR_REASON_QUEUE_FULL: 'ERROR_REASON_QUEUE_FULL',
  ERROR_REASON_TOO_MANY_REQUESTS: 'ERROR_REASON_TOO_MANY_REQUESTS',
  /**
   * The tensor store has no room left.
   */
  ERROR_REASON_STORE_FULL: 'ERROR_REASON_STORE_FULL',
  /**
   * The pool has no healthy instance.
   */
  ERROR_REASON_POOL_UNAVAILABLE: 'ERROR_REASON_POOL_UNAVAILABLE',
  /**
   * No instance satisfies the plan's version range.
   */
  ERROR_REASON_NO_MATCHING_VERSION: 'ERROR_REASON_NO_MATCHING_VERSION',
  ERROR_REASON_BREAKER_OPEN: 'ERROR_REASON_BREAKER_OPEN',
  /**
   * The service is shutting down and takes no new work.
   */
  ERROR_REASON_DRAINING: 'ERROR_REASON_DRAINING',
  ERROR_REASON_CANCELLED: 'ERROR_REASON_CANCELLED',
  ERROR_REASON_TIMEOUT: 'ERROR_REASON_TIMEOUT',
  ERROR_REASON_STAGE_FAILED: 'ERROR_REASON_STAGE_FAILED',
  ERROR_REASON_MODEL_LOAD_FAILED: 'ERROR_REASON_MODEL_LOAD_FAILED',
  ERROR_REASON_UNAUTHENTICATED: 'ERROR_REASON_UNAUTHENTICATED',
  ERROR_REASON_RATE_LIMITED: 'ERROR_REASON_RATE_LIMITED',
  /**
   * An unexpected failure; the message is generic.
   */
  ERROR_REASON_INTERNAL: 'ERROR_REASON_INTERNAL',
  /**
   * A gRPC status that carried no diffmesh ErrorInfo: raised by the transport
   * (connection refused or reset, message too large, method not implemented)
   * or by a peer that is not a diffmesh service. The status code tells what
   * happened.
   */
  ERROR_REASON_TRANSPORT: 'ERROR_REASON_TRANSPORT',
  /**
   * The request has not completed (it is still running, failed or was
   * cancelled), so it has no result to give.
   */
  ERROR_REASON_REQUEST_NOT_FINISHED: 'ERROR_REASON_REQUEST_NOT_FINISHED',
  /**
   * A stage instance takes work from one scheduler at a time: another scheduler
   * holds its Work stream.
   */
  ERROR_REASON_INSTANCE_HELD: 'ERROR_REASON_INSTANCE_HELD',
  /**
   * A tensor read, touch or delete without the object's capability (or with a
   * wrong one).
   */
  ERROR_REASON_CAPABILITY_REQUIRED: 'ERROR_REASON_CAPABILITY_REQUIRED',
  /**
   * The caller's tenant is over one of its limits (requests per minute, cost of
   * its running or of its waiting work); the error says which and when to retry.
   */
  ERROR_REASON_TENANT_QUOTA: 'ERROR_REASON_TENANT_QUOTA',
  /**
   * A task gave its slot to a more urgent one at a step boundary (see
   * diffmesh.stage.v1.PreemptTask); the scheduler queues it again.
   */
  ERROR_REASON_PREEMPTED: 'ERROR_REASON_PREEMPTED',
  /**
   * The request cannot finish by its deadline at the pool's measured step
   * time; the message names the estimate.
   */
  ERROR_REASON_DEADLINE_UNREACHABLE: 'ERROR_REASON_DEADLINE_UNREACHABLE',
} as const;

/**
 * Why a diffmesh call failed. On gRPC errors the same value travels, without
 * the `ERROR_REASON_` prefix, in `google.rpc.ErrorInfo.reason` (domain
 * `diffmesh.io`), and in the `Diffmesh-Error-Reason` NATS header.
 */
export type ErrorReason =
  | 'ERROR_REASON_UNSPECIFIED'
  | 0
  /**
   * A request parameter is invalid; ErrorInfo metadata `field` names it.
   */
  | 'ERROR_REASON_INVALID_PARAMETER'
  | 1
  /**
   * No execution plan matches the model.
   */
  | 'ERROR_REASON_UNKNOWN_MODEL'
  | 2
  | 'ERROR_REASON_REQUEST_NOT_FOUND'
  | 3
  | 'ERROR_REASON_OBJECT_NOT_FOUND'
  | 4
  | 'ERROR_REASON_OBJECT_EXPIRED'
  | 5
  | 'ERROR_REASON_CHECKSUM_MISMATCH'
  | 6
  /**
   * The stage queue is full; retry after RetryInfo.retry_delay.
   */
  | 'ERROR_REASON_QUEUE_FULL'
  | 7
  | 'ERROR_REASON_TOO_MANY_REQUESTS'
  | 8
  /**
   * The tensor store has no room left.
   */
  | 'ERROR_REASON_STORE_FULL'
  | 9
  /**
   * The pool has no healthy instance.
   */
  | 'ERROR_REASON_POOL_UNAVAILABLE'
  | 10
  /**
   * No instance satisfies the plan's version range.
   */
  | 'ERROR_REASON_NO_MATCHING_VERSION'
  | 11
  | 'ERROR_REASON_BREAKER_OPEN'
  | 12
  /**
   * The service is shutting down and takes no new work.
   */
  | 'ERROR_REASON_DRAINING'
  | 13
  | 'ERROR_REASON_CANCELLED'
  | 14
  | 'ERROR_REASON_TIMEOUT'
  | 15
  | 'ERROR_REASON_STAGE_FAILED'
  | 16
  | 'ERROR_REASON_MODEL_LOAD_FAILED'
  | 17
  | 'ERROR_REASON_UNAUTHENTICATED'
  | 18
  | 'ERROR_REASON_RATE_LIMITED'
  | 19
  /**
   * An unexpected failure; the message is generic.
   */
  | 'ERROR_REASON_INTERNAL'
  | 20
  /**
   * A gRPC status that carried no diffmesh ErrorInfo: raised by the transport
   * (connection refused or reset, message too large, method not implemented)
   * or by a peer that is not a diffmesh service. The status code tells what
   * happened.
   */
  | 'ERROR_REASON_TRANSPORT'
  | 21
  /**
   * The request has not completed (it is still running, failed or was
   * cancelled), so it has no result to give.
   */
  | 'ERROR_REASON_REQUEST_NOT_FINISHED'
  | 22
  /**
   * A stage instance takes work from one scheduler at a time: another scheduler
   * holds its Work stream.
   */
  | 'ERROR_REASON_INSTANCE_HELD'
  | 23
  /**
   * A tensor read, touch or delete without the object's capability (or with a
   * wrong one).
   */
  | 'ERROR_REASON_CAPABILITY_REQUIRED'
  | 24
  /**
   * The caller's tenant is over one of its limits (requests per minute, cost of
   * its running or of its waiting work); the error says which and when to retry.
   */
  | 'ERROR_REASON_TENANT_QUOTA'
  | 25
  /**
   * A task gave its slot to a more urgent one at a step boundary (see
   * diffmesh.stage.v1.PreemptTask); the scheduler queues it again.
   */
  | 'ERROR_REASON_PREEMPTED'
  | 26
  /**
   * The request cannot finish by its deadline at the pool's measured step
   * time; the message names the estimate.
   */
  | 'ERROR_REASON_DEADLINE_UNREACHABLE'
  | 27

/**
 * Why a diffmesh call failed. On gRPC errors the same value travels, without
 * the `ERROR_REASON_` prefix, in `google.rpc.ErrorInfo.reason` (domain
 * `diffmesh.io`), and in the `Diffmesh-Error-Reason` NATS header.
 */
export type ErrorReason__Output = typeof ErrorReason[keyof typeof ErrorReason]
