// Original file: proto/diffmesh/common/v1/request.proto

/**
 * Lifecycle of a request.
 */
export const RequestStatus = {
  REQUEST_STATUS_UNSPECIFIED: 'REQUEST_STATUS_UNSPECIFIED',
  REQUEST_STATUS_PENDING: 'REQUEST_STATUS_PENDING',
  REQUEST_STATUS_RUNNING: 'REQUEST_STATUS_RUNNING',
  REQUEST_STATUS_COMPLETED: 'REQUEST_STATUS_COMPLETED',
  REQUEST_STATUS_FAILED: 'REQUEST_STATUS_FAILED',
  REQUEST_STATUS_CANCELLED: 'REQUEST_STATUS_CANCELLED',
} as const;

/**
 * Lifecycle of a request.
 */
export type RequestStatus =
  | 'REQUEST_STATUS_UNSPECIFIED'
  | 0
  | 'REQUEST_STATUS_PENDING'
  | 1
  | 'REQUEST_STATUS_RUNNING'
  | 2
  | 'REQUEST_STATUS_COMPLETED'
  | 3
  | 'REQUEST_STATUS_FAILED'
  | 4
  | 'REQUEST_STATUS_CANCELLED'
  | 5

/**
 * Lifecycle of a request.
 */
export type RequestStatus__Output = typeof RequestStatus[keyof typeof RequestStatus]
