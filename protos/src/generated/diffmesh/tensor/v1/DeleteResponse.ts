// Original file: proto/diffmesh/tensor/v1/tensor.proto


export interface DeleteResponse {
  /**
   * False when the object did not exist.
   */
  'deleted'?: (boolean);
}

export interface DeleteResponse__Output {
  /**
   * False when the object did not exist.
   */
  'deleted': (boolean);
}
