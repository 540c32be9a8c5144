// Original file: proto/diffmesh/tensor/v1/tensor.proto


export interface DeleteRequest {
  'objectId'?: (string);
}

export interface DeleteRequest__Output {
  'objectId': (string);
}
