// Original file: proto/diffmesh/common/v1/events.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';

/**
 * The request's running stage gave its slot to a more urgent task (a higher
 * priority, or a deadline at risk) at a step boundary: it kept a checkpoint
 * there and waits in its queue again; its next try resumes from that step
 * with the same result. Not a failure: the try does not count against the
 * request's attempts.
 */
export interface PreemptedEvent {
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
  'pool'?: (string);
  'instanceId'?: (string);
  /**
   * The try that was stopped (the next one is attempt + 1).
   */
  'attempt'?: (number);
  /**
   * Steps done when it stopped, of total_steps (the next try goes on from there).
   */
  'step'?: (number);
  'totalSteps'?: (number);
  /**
   * Why, e.g. `priority 10 > 0` or `deadline at risk`.
   */
  'reason'?: (string);
}

/**
 * The request's running stage gave its slot to a more urgent task (a higher
 * priority, or a deadline at risk) at a step boundary: it kept a checkpoint
 * there and waits in its queue again; its next try resumes from that step
 * with the same result. Not a failure: the try does not count against the
 * request's attempts.
 */
export interface PreemptedEvent__Output {
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
  'pool': (string);
  'instanceId': (string);
  /**
   * The try that was stopped (the next one is attempt + 1).
   */
  'attempt': (number);
  /**
   * Steps done when it stopped, of total_steps (the next try goes on from there).
   */
  'step': (number);
  'totalSteps': (number);
  /**
   * Why, e.g. `priority 10 > 0` or `deadline at risk`.
   */
  'reason': (string);
}
