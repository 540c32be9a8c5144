/**
 * Domain types shared by every diffmesh component. They mirror the wire messages in
 * protos/ (diffmesh.common.v1) with idiomatic TypeScript shapes; `wire.ts` converts.
 */

/** Element types a tensor may hold. */
export type Dtype = 'float32' | 'float16' | 'int64' | 'int32' | 'uint8';

/** Names of the stages a plan may contain, in pipeline order. */
export const STAGE_NAMES = [
  'text_encoding',
  'text_encoding_2',
  'image_encoding',
  'denoising',
  'vae_decoding',
] as const;
export type StageName = (typeof STAGE_NAMES)[number];

/**
 * A handle on a tensor held by a tensor store. Stages pass refs, never bytes.
 * `objectId` is `{requestId}:{name}:{unique}`.
 */
export interface ObjectRef {
  objectId: string;
  /** gRPC address of the tensor-svc that owns the bytes ('' for the in-process store). */
  ownerAddress: string;
  ownerNodeId: string;
  shape: number[];
  dtype: Dtype;
  sizeBytes: number;
  /** Milliseconds since the Unix epoch. */
  createdAt: number;
  /** Logical name within the request, e.g. `prompt_embeds`, `latents`. */
  name: string;
  /** Time to live in milliseconds from the last touch; 0 = store default. */
  ttlMs: number;
  /** `crc32c:<hex>` of the bytes. */
  checksum: string;
  /** The bytes, for a small object passed by value (no owner, nothing to delete). */
  inlineData?: Uint8Array;
}

/** One stage of an execution plan. */
export interface PlanStage {
  name: StageName;
  /** Worker pool that serves this stage. */
  pool: string;
  /** Optional semver range the serving instances must satisfy, e.g. `^1.2.0`. */
  version?: string;
}

/** How a model's request is executed: an ordered list of stages. */
export interface ExecutionPlan {
  model: string;
  stages: PlanStage[];
}

/** Parameters of one generation request, as the user gave them plus defaults. */
export interface GenerationParams {
  prompt: string;
  negativePrompt: string;
  width: number;
  height: number;
  /** 1 for an image. */
  numFrames: number;
  numInferenceSteps: number;
  guidanceScale: number;
  /** Unsigned 64-bit seed as a decimal string (JSON-safe). */
  seed: string;
  /** Frames per second of a video result. */
  fps: number;
}

export type RequestStatus = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';

/** The state of one generation request as it moves through its plan. */
export interface RequestContext {
  reqId: string;
  model: string;
  params: GenerationParams;
  executionPlan: ExecutionPlan;
  currentStageIndex: number;
  /** Named objects produced so far (name → ref). */
  refs: Record<string, ObjectRef>;
  status: RequestStatus;
  /** Milliseconds since the Unix epoch. */
  createdAt: number;
  updatedAt: number;
  /** Larger runs first. */
  priority: number;
  /** Request timeout in milliseconds; 0 = none. */
  timeoutMs: number;
  retryCount: number;
  error?: { code: string; reason: string; message: string; field?: string };
  /** W3C trace context (`traceparent`, `tracestate`). */
  traceContext: Record<string, string>;
}
