// Original file: proto/diffmesh/tensor/v1/tensor.proto


export interface TouchRequest {
  'objectId'?: (string);
  /**
   * New time to live; 0 = keep the current one.
   */
  'ttlMs'?: (number);
}

export interface TouchRequest__Output {
  'objectId': (string);
  /**
   * New time to live; 0 = keep the current one.
   */
  'ttlMs': (number);
}
