// Original file: proto/diffmesh/stage/v1/stage.proto

import type { StageName as _diffmesh_common_v1_StageName, StageName__Output as _diffmesh_common_v1_StageName__Output } from '../../../diffmesh/common/v1/StageName.js';
import type { GenerationParams as _diffmesh_common_v1_GenerationParams, GenerationParams__Output as _diffmesh_common_v1_GenerationParams__Output } from '../../../diffmesh/common/v1/GenerationParams.js';
import type { ObjectRef as _diffmesh_common_v1_ObjectRef, ObjectRef__Output as _diffmesh_common_v1_ObjectRef__Output } from '../../../diffmesh/common/v1/ObjectRef.js';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp.js';

/**
 * One stage of one request. `(req_id, stage_index)` identifies the task;
 * re-executing it is harmless.
 */
export interface Task {
  'reqId'?: (string);
  'stageIndex'?: (number);
  'stage'?: (_diffmesh_common_v1_StageName);
  /**
   * 1 for the first attempt.
   */
  'attempt'?: (number);
  'model'?: (string);
  'params'?: (_diffmesh_common_v1_GenerationParams | null);
  /**
   * Inputs by name, e.g. `prompt_embeds`, `latents`.
   */
  'inputs'?: ({[key: string]: _diffmesh_common_v1_ObjectRef});
  /**
   * The task fails with DEADLINE_EXCEEDED past this time.
   */
  'deadline'?: (_google_protobuf_Timestamp | null);
  /**
   * W3C trace context (`traceparent`, `tracestate`).
   */
  'traceContext'?: ({[key: string]: string});
  /**
   * This is the last stage of the request's plan: its outputs are the
   * request's result (stores may keep them durably, see PutHeader.final_result).
   */
  'lastStage'?: (boolean);
  /**
   * The tenant of the request (for logs, spans and metrics; empty = `default`).
   */
  'tenant'?: (string);
}

/**
 * One stage of one request. `(req_id, stage_index)` identifies the task;
 * re-executing it is harmless.
 */
export interface Task__Output {
  'reqId': (string);
  'stageIndex': (number);
  'stage': (_diffmesh_common_v1_StageName__Output);
  /**
   * 1 for the first attempt.
   */
  'attempt': (number);
  'model': (string);
  'params': (_diffmesh_common_v1_GenerationParams__Output | null);
  /**
   * Inputs by name, e.g. `prompt_embeds`, `latents`.
   */
  'inputs': ({[key: string]: _diffmesh_common_v1_ObjectRef__Output});
  /**
   * The task fails with DEADLINE_EXCEEDED past this time.
   */
  'deadline': (_google_protobuf_Timestamp__Output | null);
  /**
   * W3C trace context (`traceparent`, `tracestate`).
   */
  'traceContext': ({[key: string]: string});
  /**
   * This is the last stage of the request's plan: its outputs are the
   * request's result (stores may keep them durably, see PutHeader.final_result).
   */
  'lastStage': (boolean);
  /**
   * The tenant of the request (for logs, spans and metrics; empty = `default`).
   */
  'tenant': (string);
}
