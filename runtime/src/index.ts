export { STAGE_NAMES } from './domain.js';
export type {
  Dtype,
  ExecutionPlan,
  GenerationParams,
  ObjectRef,
  PlanStage,
  RequestContext,
  RequestStatus,
  StageName,
} from './domain.js';
export {
  Code,
  DiffmeshError,
  REASONS,
  asDiffmeshError,
  cancelled,
  invalidParameter,
  isRetryableCode,
  unknownModel,
} from './errors/index.js';
export type { DiffmeshErrorOptions, Reason } from './errors/index.js';
export { ModelManifestSchema, latentFrames, readModelManifest } from './models/manifest.js';
export type { LoadedManifest, ModelManifest, ModelManifestInput } from './models/manifest.js';
