// Original file: proto/diffmesh/stage/v1/stage.proto


/**
 * Progress inside a task, e.g. a denoising step.
 */
export interface TaskProgress {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'attempt'?: (number);
  /**
   * Steps done so far, 1..total_steps.
   */
  'step'?: (number);
  'totalSteps'?: (number);
}

/**
 * Progress inside a task, e.g. a denoising step.
 */
export interface TaskProgress__Output {
  'reqId': (string);
  'stageIndex': (number);
  'attempt': (number);
  /**
   * Steps done so far, 1..total_steps.
   */
  'step': (number);
  'totalSteps': (number);
}
