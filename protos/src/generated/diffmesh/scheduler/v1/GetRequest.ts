// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface GetRequest {
  'reqId'?: (string);
}

export interface GetRequest__Output {
  'reqId': (string);
}
