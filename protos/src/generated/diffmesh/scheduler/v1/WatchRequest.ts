// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface WatchRequest {
  'reqId'?: (string);
}

export interface WatchRequest__Output {
  'reqId': (string);
}
