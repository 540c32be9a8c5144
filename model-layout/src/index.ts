/**
 * @diffmesh/model-layout: model directories in the diffusers/optimum ONNX layout, read from
 * their JSON files and graph headers: the pipeline kind, components, configs, VAE factors, the
 * graphs' inputs and outputs (checked against the pipeline), and the execution plan with its
 * defaults. No onnxruntime: the scheduler and the CLI use it as well as the stage services.
 */
export { checkDirectoryGraphs, sequenceOutputName } from './directory-graphs.js';
export type { DirectoryGraphs } from './directory-graphs.js';
export { DIRECTORY_MAX_SIZE, directoryPlan, directorySlug, looksLikePath, stageComponents } from './directory-plan.js';
export type { DirectoryPlan, DirectoryStage } from './directory-plan.js';
export { isDiffusersDirectory, isLayoutError, ONNX_COMPONENTS, readDiffusersLayout } from './diffusers-layout.js';
export type {
  DiffusersLayout,
  GuidanceMode,
  JsonObject,
  LayoutDefaults,
  OnnxComponent,
  OnnxComponentName,
  PipelineKind,
  TextEncoderName,
  TextEncoderSpec,
  TokenizerName,
  VaeFactors,
} from './diffusers-layout.js';
export { layoutError } from './layout-error.js';
export { formatShape, readGraphIo } from './onnx-graph-io.js';
export type { GraphDim, GraphIo, GraphValue, OnnxElementType } from './onnx-graph-io.js';
export { parsePythonJson } from './python-json.js';
