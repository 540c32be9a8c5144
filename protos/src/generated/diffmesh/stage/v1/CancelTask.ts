// Original file: proto/diffmesh/stage/v1/stage.proto


/**
 * Scheduler -> instance: stop this task (the request was cancelled or timed
 * out). The instance answers with TaskFailed (reason CANCELLED).
 */
export interface CancelTask {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'attempt'?: (number);
  'reason'?: (string);
}

/**
 * Scheduler -> instance: stop this task (the request was cancelled or timed
 * out). The instance answers with TaskFailed (reason CANCELLED).
 */
export interface CancelTask__Output {
  'reqId': (string);
  'stageIndex': (number);
  'attempt': (number);
  'reason': (string);
}
