// Original file: proto/third_party/google/rpc/error_details.proto


/**
 * A message type used to describe a single bad request field.
 */
export interface _google_rpc_BadRequest_FieldViolation {
  /**
   * A path that leads to a field in the request body. The value will be a
   * sequence of dot-separated identifiers that identify a protocol buffer
   * field.
   */
  'field'?: (string);
  /**
   * A description of why the request element is bad.
   */
  'description'?: (string);
}

/**
 * A message type used to describe a single bad request field.
 */
export interface _google_rpc_BadRequest_FieldViolation__Output {
  /**
   * A path that leads to a field in the request body. The value will be a
   * sequence of dot-separated identifiers that identify a protocol buffer
   * field.
   */
  'field': (string);
  /**
   * A description of why the request element is bad.
   */
  'description': (string);
}

/**
 * Describes violations in a client request. This error type focuses on the
 * syntactic aspects of the request.
 */
export interface BadRequest {
  /**
   * Describes all violations in a client request.
   */
  'fieldViolations'?: (_google_rpc_BadRequest_FieldViolation)[];
}

/**
 * Describes violations in a client request. This error type focuses on the
 * syntactic aspects of the request.
 */
export interface BadRequest__Output {
  /**
   * Describes all violations in a client request.
   */
  'fieldViolations': (_google_rpc_BadRequest_FieldViolation__Output)[];
}
