// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface WatchRequest {
  'reqId'?: (string);
  /**
   * Resume after this event: only events with a larger `sequence` are sent
   * (0 = from the first). A client whose stream broke re-attaches on any
   * scheduler with the last sequence it received and misses nothing.
   */
  'afterSequence'?: (number);
}

export interface WatchRequest__Output {
  'reqId': (string);
  /**
   * Resume after this event: only events with a larger `sequence` are sent
   * (0 = from the first). A client whose stream broke re-attaches on any
   * scheduler with the last sequence it received and misses nothing.
   */
  'afterSequence': (number);
}
