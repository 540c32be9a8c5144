export { HELM_PACKAGE, extractZipEntry, helmBinary, helmTemplate, runHelm } from './helm.js';
export type { HelmResult, HelmTemplateOptions } from './helm.js';
export {
  API_VERSION,
  CEL_RULES,
  GROUP,
  KIND,
  PLURAL,
  REPO_ID,
  VERSION,
  canonicalStage,
  checkCrdRules,
  crdFile,
  defaultChartDir,
  loadPipelineSchema,
  toJsonSchema,
} from './pipeline.js';
export type {
  AutoscalingSpec,
  Condition,
  DiffusionPipeline,
  DiffusionPipelineSpec,
  DiffusionPipelineStatus,
  ModelPathStatus,
  PipelineSchema,
  SpecProblem,
  StageAlias,
  StageName,
  StageSpec,
} from './pipeline.js';
export { pipelineToValues, resolveModelPaths } from './values.js';
export { MANAGED_BY, PIPELINE_LABEL, adopt, objectKey, parseManifests, renderPipeline, sortForApply } from './render.js';
export type { K8sObject, RenderedPipeline } from './render.js';
export { CONDITIONS, FIELD_MANAGER, PRUNABLE_KINDS, Reconciler, readiness } from './reconcile.js';
export type { ObjectApi, ReconcileResult, ReconcilerOptions, StatusWriter } from './reconcile.js';
export { Controller } from './controller.js';
export type { PipelineSource } from './controller.js';
export { kubeAdapters } from './kube.js';
export type { KubeAdapters } from './kube.js';
