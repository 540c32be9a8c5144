// Original file: proto/diffmesh/stage/v1/stage.proto

import type { AdapterReport as _diffmesh_stage_v1_AdapterReport, AdapterReport__Output as _diffmesh_stage_v1_AdapterReport__Output } from '../../../diffmesh/stage/v1/AdapterReport.js';

/**
 * Instance -> scheduler: what the instance can take.
 */
export interface InstanceStatus {
  'instanceId'?: (string);
  /**
   * Tasks the instance runs at once.
   */
  'capacity'?: (number);
  /**
   * Tasks running now.
   */
  'inFlight'?: (number);
  /**
   * True while shutting down: assign nothing more.
   */
  'draining'?: (boolean);
  /**
   * The instance's LoRA adapters; unset for an instance that does not report
   * them (a stage other than denoising, an older build, a denoiser whose
   * adapter directory is not listed yet). A denoiser without an adapter
   * directory reports none held and none available. Sent again whenever they
   * change (an adapter loaded or dropped, the adapter directory changed).
   */
  'adapters'?: (_diffmesh_stage_v1_AdapterReport | null);
}

/**
 * Instance -> scheduler: what the instance can take.
 */
export interface InstanceStatus__Output {
  'instanceId': (string);
  /**
   * Tasks the instance runs at once.
   */
  'capacity': (number);
  /**
   * Tasks running now.
   */
  'inFlight': (number);
  /**
   * True while shutting down: assign nothing more.
   */
  'draining': (boolean);
  /**
   * The instance's LoRA adapters; unset for an instance that does not report
   * them (a stage other than denoising, an older build, a denoiser whose
   * adapter directory is not listed yet). A denoiser without an adapter
   * directory reports none held and none available. Sent again whenever they
   * change (an adapter loaded or dropped, the adapter directory changed).
   */
  'adapters': (_diffmesh_stage_v1_AdapterReport__Output | null);
}
