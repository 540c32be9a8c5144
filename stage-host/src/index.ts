/**
 * @diffmesh/stage-host: what every stage service (encoder-svc, dit-svc, vae-svc) runs on.
 * The StageService and its Work stream, ONNX sessions, model manifests and the catalog,
 * stage metrics, and the process that wires them.
 */
export { defaultLatentSize, ModelCatalog } from './model-catalog.js';
export type { ModelCatalogOptions, ResolvedModel } from './model-catalog.js';
export { LoadedModelDirectory } from './loaded-model-directory.js';
export { latentFrames, ModelManifestSchema, readModelManifest } from './model-manifest.js';
export type { LoadedManifest, ModelManifest, ModelManifestInput } from './model-manifest.js';
export {
  availableExecutionProviders,
  checkExecutionProviders,
  checkProviderNames,
  EXECUTION_PROVIDERS,
  GPU_PROVIDERS,
  INSTALLABLE_PROVIDERS,
  onnxruntimeBinDir,
  PROVIDER_FILES,
  providerStatuses,
} from './execution-providers.js';
export { describeMissing, ldLibraryPathFor, locateLibraries, PROVIDER_LIBRARIES, pythonWheelLibDirs } from './cuda-libraries.js';
export type { LibraryLocation, LibraryNeed } from './cuda-libraries.js';
export { libraryVersion, onnxruntimeNodeVersion, providerFilesVersion } from './onnxruntime-version.js';
export type { LibraryVersion, ProviderFilesVersion } from './onnxruntime-version.js';
export type { ExecutionProvider, InstallableProvider, ProviderStatus } from './execution-providers.js';
export { ort, probeInstalledProviders, SessionCache } from './onnx-sessions.js';
export type {
  ModelOutputs,
  ModelRunOptions,
  ModelSession,
  OrtOptions,
  SessionGetOptions,
  SessionRewrites,
  SessionVariant,
  SkippedProvider,
} from './onnx-sessions.js';
export { OnnxRunner } from './onnx-runner.js';
export type { RunnerState } from './onnx-runner.js';
export type { ProviderChoice, WireSessionOptions } from './onnx-runner-protocol.js';
export { installProvider, providerInstallPlan } from './provider-install.js';
export type { ProviderInstallPlan, ProviderInstallResult } from './provider-install.js';
export { openProviderSource, PROVIDER_FILE_NAMES } from './provider-source.js';
export type { ProviderSource } from './provider-source.js';
export { isMissingF16, probeProvider } from './provider-probe.js';
export type { ProviderProbe } from './provider-probe.js';
export { InlineHost } from './session-host.js';
export type { SessionHost } from './session-host.js';
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
export {
  decodeModel,
  dequantizeInt4,
  encodeModel,
  fuseAttention,
  fuseGelu,
  fuseLayerNorm,
  fuseSkipLayerNorm,
  GraphIndex,
  graphPassesFor,
  INT4_BLOCK,
  int4Weights,
  KERNEL_CHOICES,
  moveToExternalData,
  quantizeInt4,
  readModelFile,
  rewriteModelFile,
  runGraphPasses,
  weightBytes,
  WEIGHT_CHOICES,
} from './graph-passes/index.js';
export type {
  GraphPass,
  GraphRewriteOptions,
  Int4Options,
  Int4Weight,
  ModelProto,
  NodeProto,
  PassRefusal,
  PassReport,
  RewrittenModel,
} from './graph-passes/index.js';
