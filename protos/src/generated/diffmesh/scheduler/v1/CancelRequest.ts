// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface CancelRequest {
  'reqId'?: (string);
  /**
   * Recorded in the request and sent to watchers.
   */
  'reason'?: (string);
}

export interface CancelRequest__Output {
  'reqId': (string);
  /**
   * Recorded in the request and sent to watchers.
   */
  'reason': (string);
}
