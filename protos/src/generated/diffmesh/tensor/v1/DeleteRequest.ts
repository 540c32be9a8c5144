// Original file: proto/diffmesh/tensor/v1/tensor.proto


export interface DeleteRequest {
  'objectId'?: (string);
  /**
   * The object's capability, from its ObjectRef (required when the tensor
   * service issues capabilities; see ObjectRef.capability).
   */
  'capability'?: (string);
}

export interface DeleteRequest__Output {
  'objectId': (string);
  /**
   * The object's capability, from its ObjectRef (required when the tensor
   * service issues capabilities; see ObjectRef.capability).
   */
  'capability': (string);
}
