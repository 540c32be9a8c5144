// Original file: proto/diffmesh/stage/v1/stage.proto


/**
 * Scheduler -> instance: give this task's slot back at its next step
 * boundary (preemption). A denoiser stores a checkpoint at that boundary,
 * reports it in a TaskProgress, then answers TaskFailed with reason
 * PREEMPTED; the scheduler queues the task again and its next try resumes
 * from the checkpoint. A stage without steps may ignore it and finish.
 */
export interface PreemptTask {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'attempt'?: (number);
  'reason'?: (string);
}

/**
 * Scheduler -> instance: give this task's slot back at its next step
 * boundary (preemption). A denoiser stores a checkpoint at that boundary,
 * reports it in a TaskProgress, then answers TaskFailed with reason
 * PREEMPTED; the scheduler queues the task again and its next try resumes
 * from the checkpoint. A stage without steps may ignore it and finish.
 */
export interface PreemptTask__Output {
  'reqId': (string);
  'stageIndex': (number);
  'attempt': (number);
  'reason': (string);
}
