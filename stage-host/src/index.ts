/**
 * @diffmesh/stage-host: what every stage service (encoder-svc, dit-svc, vae-svc) runs on.
 * The StageService and its Work stream, ONNX sessions, model manifests and the catalog,
 * stage metrics, and the process that wires them.
 */
export { ModelCatalog } from './model-catalog.js';
export type { ModelCatalogOptions, ResolvedModel } from './model-catalog.js';
export { ModelDirectory } from './model-directory.js';
export { latentFrames, ModelManifestSchema, readModelManifest } from './model-manifest.js';
export type { LoadedManifest, ModelManifest, ModelManifestInput } from './model-manifest.js';
export { availableExecutionProviders, checkExecutionProviders, EXECUTION_PROVIDERS, ort, SessionCache } from './onnx-sessions.js';
export type { ExecutionProvider, OrtOptions } from './onnx-sessions.js';
export { feedTensor, floatOutput } from './ort-tensors.js';
export type { FeedType } from './ort-tensors.js';
export { OnnxStage } from './onnx-stage.js';
export type { OnnxStageDeps } from './onnx-stage.js';
export { StageMetrics } from './stage-metrics.js';
export type { ModelRunObserver, StageMetricsOptions, StageTaskOutcome } from './stage-metrics.js';
export {
  runStageServiceMain,
  servedModels,
  servedStage,
  stageServiceConfig,
  StageServiceConfigSchema,
  startStageService,
} from './stage-process.js';
export type { RunningStageService, StageServiceConfig, StageServiceMain, StartStageServiceOptions } from './stage-process.js';
export { StageService } from './stage-service.js';
export type { StageInstanceIdentity } from './stage-service.js';
