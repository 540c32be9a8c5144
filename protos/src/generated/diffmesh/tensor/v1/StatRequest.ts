// Original file: proto/diffmesh/tensor/v1/tensor.proto


export interface StatRequest {
  'objectId'?: (string);
}

export interface StatRequest__Output {
  'objectId': (string);
}
