export { CLIP_MAX_MERGES, clipTokenizerJsonFromSlowFiles, parseClipMerges, specialTokenContent } from './clip-converter.js';
export type { ClipSlowFiles, SpecialTokenValue } from './clip-converter.js';
export { loadTokenizer } from './load-tokenizer.js';
export { PromptTokenizer } from './prompt-tokenizer.js';
export type { EncodeOptions, PromptTokenizerInfo, TokenizedPrompt, TokenizerKind } from './prompt-tokenizer.js';
