export {
  buildAnalyticFluxOnnx,
  FLUX_LATENT_CHANNELS,
  fluxCleanLatent,
  latentImageIds,
  packLatents,
  unpackLatents,
} from './analytic-flux.js';
export type { AnalyticFluxOptions } from './analytic-flux.js';
export { buildAnalyticUnetOnnx, unetCleanLatent, unetPattern } from './analytic-unet.js';
export type { AnalyticUnetOptions, PredictionType, TimestepType } from './analytic-unet.js';
export { buildVaeDecoderOnnx, buildVaeEncoderOnnx, toUint8Image, vaeDecode, VAE_LOGVAR, VAE_SCALE } from './analytic-vae.js';
export {
  bytesToUnicode,
  CLIP_BOS,
  CLIP_EOS,
  clipTokenizerJson,
  clipVocab,
  referenceClipIds,
  writeClipTokenizer,
} from './clip-tokenizer-files.js';
export type { ClipTokenizerFilesOptions, ClipVocab } from './clip-tokenizer-files.js';
export { buildFluxDir, FluxTestModel } from './flux-layout.js';
export type { FluxDirOptions } from './flux-layout.js';
export { meanAbsoluteError, TEST_MODEL_FILE } from './layout-files.js';
export type { ExpectedImage, ExpectedImageRequest } from './layout-files.js';
export { buildSdDir, SdTestModel } from './sd-layout.js';
export type { SdDirOptions } from './sd-layout.js';
export { buildAnalyticSd3Onnx } from './analytic-sd3.js';
export type { AnalyticSd3Options } from './analytic-sd3.js';
export { buildSd3Dir, Sd3TestModel } from './sd3-layout.js';
export type { Sd3Conditioning, Sd3DirOptions } from './sd3-layout.js';
export { buildSdxlDir, SdxlTestModel } from './sdxl-layout.js';
export type { SdxlConditioning, SdxlDirOptions } from './sdxl-layout.js';
export { referenceT5Ids, T5_EOS, T5_PAD, T5_UNK, t5TokenizerJson, t5Vocab, writeT5Tokenizer } from './t5-tokenizer-files.js';
export type { T5TokenizerFilesOptions, T5Vocab } from './t5-tokenizer-files.js';
export { buildBrokenDir, buildTestModelDir, buildTestModelDirs, readTestModel, TEST_MODEL_DIRS } from './test-model-dirs.js';
export type { BrokenDirKind, TestModel } from './test-model-dirs.js';
export { alphasCumprod, logSigmas, sigmaAtTimestep, trainingBetas } from './training-schedule.js';
export type { TrainingScheduleConfig } from './training-schedule.js';
export { NEUTRAL_WORDS, VOCABULARY_WORDS, WORD_MEANINGS } from './vocabulary.js';
export { testLoraTensors, writeTestLora } from './lora-files.js';
export type { TestLoraOptions, TestLoraTextEncoder } from './lora-files.js';
export { clipEncoderLayerLinears } from './clip-encoder-layer.js';
export { attentionBlockLinears, BLOCK_DIM } from './unet-attention-block.js';
