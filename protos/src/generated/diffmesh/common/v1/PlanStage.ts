// Original file: proto/diffmesh/common/v1/plan.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';

/**
 * One stage of an execution plan.
 */
export interface PlanStage {
  'name'?: (_diffmesh_common_v1_StageName);
  /**
   * Worker pool that serves this stage.
   */
  'pool'?: (string);
  /**
   * Semver range the serving instances must satisfy, e.g. `^1.2.0`; unset = any.
   */
  'version'?: (string);
  /**
   * A request input the stage needs, by its object name: `input_image` (the
   * only one today). The stage runs only for requests that have it and is left
   * out of the plan of those that do not. Unset = the stage always runs.
   */
  'requires'?: (string);
  '_version'?: "version";
  '_requires'?: "requires";
}

/**
 * One stage of an execution plan.
 */
export interface PlanStage__Output {
  'name': (_diffmesh_common_v1_StageName__Output);
  /**
   * Worker pool that serves this stage.
   */
  'pool': (string);
  /**
   * Semver range the serving instances must satisfy, e.g. `^1.2.0`; unset = any.
   */
  'version'?: (string);
  /**
   * A request input the stage needs, by its object name: `input_image` (the
   * only one today). The stage runs only for requests that have it and is left
   * out of the plan of those that do not. Unset = the stage always runs.
   */
  'requires'?: (string);
  '_version'?: "version";
  '_requires'?: "requires";
}
