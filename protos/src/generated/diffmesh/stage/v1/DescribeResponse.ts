// Original file: proto/diffmesh/stage/v1/stage.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';
import type { AdapterReport as _diffmesh_stage_v1_AdapterReport, AdapterReport__Output as _diffmesh_stage_v1_AdapterReport__Output } from '../../../diffmesh/stage/v1/AdapterReport.js';

export interface DescribeResponse {
  'stage'?: (_diffmesh_common_v1_StageName);
  'pool'?: (string);
  /**
   * Models this instance serves.
   */
  'models'?: (string)[];
  /**
   * Tasks the instance runs at once.
   */
  'capacity'?: (number);
  /**
   * Tasks running now.
   */
  'inFlight'?: (number);
  /**
   * Semver of the instance's build.
   */
  'version'?: (string);
  'instanceId'?: (string);
  'nodeId'?: (string);
  /**
   * gRPC address of the tensor service the instance writes outputs to.
   */
  'tensorAddress'?: (string);
  /**
   * Its LoRA adapters, as in InstanceStatus.adapters (unset: not reported).
   */
  'adapters'?: (_diffmesh_stage_v1_AdapterReport | null);
}

export interface DescribeResponse__Output {
  'stage': (_diffmesh_common_v1_StageName__Output);
  'pool': (string);
  /**
   * Models this instance serves.
   */
  'models': (string)[];
  /**
   * Tasks the instance runs at once.
   */
  'capacity': (number);
  /**
   * Tasks running now.
   */
  'inFlight': (number);
  /**
   * Semver of the instance's build.
   */
  'version': (string);
  'instanceId': (string);
  'nodeId': (string);
  /**
   * gRPC address of the tensor service the instance writes outputs to.
   */
  'tensorAddress': (string);
  /**
   * Its LoRA adapters, as in InstanceStatus.adapters (unset: not reported).
   */
  'adapters': (_diffmesh_stage_v1_AdapterReport__Output | null);
}
