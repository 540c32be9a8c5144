// Original file: proto/diffmesh/tensor/v1/tensor.proto


export interface TouchRequest {
  'objectId'?: (string);
  /**
   * New time to live; 0 = keep the current one.
   */
  'ttlMs'?: (number);
  /**
   * The object's capability, from its ObjectRef (required when the tensor
   * service issues capabilities; see ObjectRef.capability).
   */
  'capability'?: (string);
}

export interface TouchRequest__Output {
  'objectId': (string);
  /**
   * New time to live; 0 = keep the current one.
   */
  'ttlMs': (number);
  /**
   * The object's capability, from its ObjectRef (required when the tensor
   * service issues capabilities; see ObjectRef.capability).
   */
  'capability': (string);
}
