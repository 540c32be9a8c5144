// Original file: proto/third_party/google/rpc/code.proto

/**
 * The canonical error codes for gRPC APIs.
 * 
 * Sometimes multiple error codes may apply.  Services should return
 * the most specific error code that applies.  For example, prefer
 * `OUT_OF_RANGE` over `FAILED_PRECONDITION` if both codes apply.
 * Similarly prefer `NOT_FOUND` or `ALREADY_EXISTS` over `FAILED_PRECONDITION`.
 */
export const Code = {
  /**
   * Not an error; returned on success.
   * 
   * HTTP Mapping: 200 OK
   */
  OK: 'OK',
  /**
   * The operation was cancelled, typically by the caller.
   * 
   * HTTP Mapping: 499 Client Closed Request
   */
  CANCELLED: 'CANCELLED',
  /**
   * Unknown error.  For example, this error may be returned when
   * a `Status` value received from another address space belongs to
   * an error space that is not known in this address space.  Also
   * errors raised by APIs that do not return enough error information
   * may be converted to this error.
   * 
   * HTTP Mapping: 500 Internal Server Error
   */
  UNKNOWN: 'UNKNOWN',
  /**
   * The client specified an invalid argument.  Note that this differs
   * from `FAILED_PRECONDITION`.  `INVALID_ARGUMENT` indicates arguments
   * that are problematic regardless of the state of the system
   * (e.g., a malformed file name).
   * 
   * HTTP Mapping: 400 Bad Request
   */
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  /**
   * The deadline expired before the operation could complete. For operations
   * that change the state of the system, this error may be returned
   * even if the operation has completed successfully.  For example, a
   * successful response from a server could have been delayed long
   * enough for the deadline to expire.
   * 
   * HTTP Mapping: 504 Gateway Timeout
   */
  DEADLINE_EXCEEDED: 'DEADLINE_EXCEEDED',
  /**
   * Some requested entity (e.g., file or directory) was not found.
   * 
   * HTTP Mapping: 404 Not Found
   */
  NOT_FOUND: 'NOT_FOUND',
  /**
   * The entity that a client attempted to create (e.g., file or directory)
   * already exists.
   * 
   * HTTP Mapping: 409 Conflict
   */
  ALREADY_EXISTS: 'ALREADY_EXISTS',
  /**
   * The caller does not have permission to execute the specified
   * operation. `PERMISSION_DENIED` must not be used for rejections
   * caused by exhausting some resource (use `RESOURCE_EXHAUSTED`
   * instead for those errors). `PERMISSION_DENIED` must not be
   * used if the caller can not be identified (use `UNAUTHENTICATED`
   * instead for those errors).
   * 
   * HTTP Mapping: 403 Forbidden
   */
  PERMISSION_DENIED: 'PERMISSION_DENIED',
  /**
   * The request does not have valid authentication credentials for the
   * operation.
   * 
   * HTTP Mapping: 401 Unauthorized
   */
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  /**
   * Some resource has been exhausted, perhaps a per-user quota, or
   * perhaps the entire file system is out of space.
   * 
   * HTTP Mapping: 429 Too Many Requests
   */
  RESOURCE_EXHAUSTED: 'RESOURCE_EXHAUSTED',
  /**
   * The operation was rejected because the system is not in a state
   * required for the operation's execution.  For example, the directory
   * to be deleted is non-empty, an rmdir operation is applied to
   * a non-directory, etc.
   * 
   * HTTP Mapping: 400 Bad Request
   */
  FAILED_PRECONDITION: 'FAILED_PRECONDITION',
  /**
   * The operation was aborted, typically due to a concurrency issue such as
   * a sequencer check failure or transaction abort.
   * 
   * HTTP Mapping: 409 Conflict
   */
  ABORTED: 'ABORTED',
  /**
   * The operation was attempted past the valid range.  E.g., seeking or
   * reading past end-of-file.
   * 
   * HTTP Mapping: 400 Bad Request
   */
  OUT_OF_RANGE: 'OUT_OF_RANGE',
  /**
   * The operation is not implemented or is not supported/enabled in this
   * service.
   * 
   * HTTP Mapping: 501 Not Implemented
   */
  UNIMPLEMENTED: 'UNIMPLEMENTED',
  /**
   * Internal errors.  This means that some invariants expected by the
   * underlying system have been broken.  This error code is reserved
   * for serious errors.
   * 
   * HTTP Mapping: 500 Internal Server Error
   */
  INTERNAL: 'INTERNAL',
  /**
   * The service is currently unavailable.  This is most likely a
   * transient condition, which can be corrected by retrying with
   * a backoff.
   * 
   * HTTP Mapping: 503 Service Unavailable
   */
  UNAVAILABLE: 'UNAVAILABLE',
  /**
   * Unrecoverable data loss or corruption.
   * 
   * HTTP Mapping: 500 Internal Server Error
   */
  DATA_LOSS: 'DATA_LOSS',
} as const;

/**
 * The canonical error codes for gRPC APIs.
 * 
 * Sometimes multiple error codes may apply.  Services should return
 * the most specific error code that applies.  For example, prefer
 * `OUT_OF_RANGE` over `FAILED_PRECONDITION` if both codes apply.
 * Similarly prefer `NOT_FOUND` or `ALREADY_EXISTS` over `FAILED_PRECONDITION`.
 */
export type Code =
  /**
   * Not an error; returned on success.
   * 
   * HTTP Mapping: 200 OK
   */
  | 'OK'
  | 0
  /**
   * The operation was cancelled, typically by the caller.
   * 
   * HTTP Mapping: 499 Client Closed Request
   */
  | 'CANCELLED'
  | 1
  /**
   * Unknown error.  For example, this error may be returned when
   * a `Status` value received from another address space belongs to
   * an error space that is not known in this address space.  Also
   * errors raised by APIs that do not return enough error information
   * may be converted to this error.
   * 
   * HTTP Mapping: 500 Internal Server Error
   */
  | 'UNKNOWN'
  | 2
  /**
   * The client specified an invalid argument.  Note that this differs
   * from `FAILED_PRECONDITION`.  `INVALID_ARGUMENT` indicates arguments
   * that are problematic regardless of the state of the system
   * (e.g., a malformed file name).
   * 
   * HTTP Mapping: 400 Bad Request
   */
  | 'INVALID_ARGUMENT'
  | 3
  /**
   * The deadline expired before the operation could complete. For operations
   * that change the state of the system, this error may be returned
   * even if the operation has completed successfully.  For example, a
   * successful response from a server could have been delayed long
   * enough for the deadline to expire.
   * 
   * HTTP Mapping: 504 Gateway Timeout
   */
  | 'DEADLINE_EXCEEDED'
  | 4
  /**
   * Some requested entity (e.g., file or directory) was not found.
   * 
   * HTTP Mapping: 404 Not Found
   */
  | 'NOT_FOUND'
  | 5
  /**
   * The entity that a client attempted to create (e.g., file or directory)
   * already exists.
   * 
   * HTTP Mapping: 409 Conflict
   */
  | 'ALREADY_EXISTS'
  | 6
  /**
   * The caller does not have permission to execute the specified
   * operation. `PERMISSION_DENIED` must not be used for rejections
   * caused by exhausting some resource (use `RESOURCE_EXHAUSTED`
   * instead for those errors). `PERMISSION_DENIED` must not be
   * used if the caller can not be identified (use `UNAUTHENTICATED`
   * instead for those errors).
   * 
   * HTTP Mapping: 403 Forbidden
   */
  | 'PERMISSION_DENIED'
  | 7
  /**
   * The request does not have valid authentication credentials for the
   * operation.
   * 
   * HTTP Mapping: 401 Unauthorized
   */
  | 'UNAUTHENTICATED'
  | 16
  /**
   * Some resource has been exhausted, perhaps a per-user quota, or
   * perhaps the entire file system is out of space.
   * 
   * HTTP Mapping: 429 Too Many Requests
   */
  | 'RESOURCE_EXHAUSTED'
  | 8
  /**
   * The operation was rejected because the system is not in a state
   * required for the operation's execution.  For example, the directory
   * to be deleted is non-empty, an rmdir operation is applied to
   * a non-directory, etc.
   * 
   * HTTP Mapping: 400 Bad Request
   */
  | 'FAILED_PRECONDITION'
  | 9
  /**
   * The operation was aborted, typically due to a concurrency issue such as
   * a sequencer check failure or transaction abort.
   * 
   * HTTP Mapping: 409 Conflict
   */
  | 'ABORTED'
  | 10
  /**
   * The operation was attempted past the valid range.  E.g., seeking or
   * reading past end-of-file.
   * 
   * HTTP Mapping: 400 Bad Request
   */
  | 'OUT_OF_RANGE'
  | 11
  /**
   * The operation is not implemented or is not supported/enabled in this
   * service.
   * 
   * HTTP Mapping: 501 Not Implemented
   */
  | 'UNIMPLEMENTED'
  | 12
  /**
   * Internal errors.  This means that some invariants expected by the
   * underlying system have been broken.  This error code is reserved
   * for serious errors.
   * 
   * HTTP Mapping: 500 Internal Server Error
   */
  | 'INTERNAL'
  | 13
  /**
   * The service is currently unavailable.  This is most likely a
   * transient condition, which can be corrected by retrying with
   * a backoff.
   * 
   * HTTP Mapping: 503 Service Unavailable
   */
  | 'UNAVAILABLE'
  | 14
  /**
   * Unrecoverable data loss or corruption.
   * 
   * HTTP Mapping: 500 Internal Server Error
   */
  | 'DATA_LOSS'
  | 15

/**
 * The canonical error codes for gRPC APIs.
 * 
 * Sometimes multiple error codes may apply.  Services should return
 * the most specific error code that applies.  For example, prefer
 * `OUT_OF_RANGE` over `FAILED_PRECONDITION` if both codes apply.
 * Similarly prefer `NOT_FOUND` or `ALREADY_EXISTS` over `FAILED_PRECONDITION`.
 */
export type Code__Output = typeof Code[keyof typeof Code]
