export { TextEncodingStage } from './text-encoding-stage.js';
export type { TextEncodingStageOptions } from './text-encoding-stage.js';
export { CLIP_MAX_MERGES, clipTokenizerJsonFromSlowFiles, loadTokenizer, parseClipMerges, PromptTokenizer } from './tokenizers/index.js';
export type { EncodeOptions, PromptTokenizerInfo, TokenizedPrompt, TokenizerKind } from './tokenizers/index.js';
export { isLoraEncoder, TextEncoderAdapters } from './text-encoder-adapters.js';
export type { TextEncoderAdaptersOptions } from './text-encoder-adapters.js';
