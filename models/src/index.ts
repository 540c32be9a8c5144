export {
  BUILD_HASH_FILE,
  BUILTIN_MODELS,
  BuildModelsError,
  buildModels,
  builderHash,
  builtinModelDir,
  defaultModelsRoot,
  isBuiltinModel,
} from './build.js';
export type { BuildModelsOptions, BuildResult, ModelBuilder } from './build.js';
export {
  SYNTHETIC_DIT_IMAGE,
  SYNTHETIC_DIT_VIDEO,
  buildSyntheticDit,
  buildSyntheticDitImage,
  buildSyntheticDitVideo,
  syntheticDitManifest,
} from './builders/synthetic-dit.js';
export type { SyntheticDitConfig } from './builders/synthetic-dit.js';
export { buildTinyShapes } from './builders/tiny-shapes.js';
export { GraphBuilder, WeightRng } from './onnx/graph.js';
export { wordPieceTokenizerJson } from './tokenizer.js';
