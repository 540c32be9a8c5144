import { Tokenizer } from '@huggingface/tokenizers';

/** Token ids of one prompt, padded and truncated the way diffusers asks for them. */
export interface TokenizedPrompt {
  /** Exactly `maxLength` ids: specials + kept tokens, then the pad id. */
  ids: number[];
  /** 1 for real tokens (specials included), 0 for padding. */
  attentionMask: number[];
  /** Number of real tokens (specials included) after truncation. */
  length: number;
  /** True when tokens were cut to fit maxLength. */
  truncated: boolean;
  /** How many prompt tokens were cut. */
  droppedTokens: number;
  /** The cut tokens decoded to text ('' when nothing was cut), for the request's events. */
  droppedText: string;
}

/** Which kind of tokenizer a folder holds. */
export type TokenizerKind = 'clip-bpe' | 't5-unigram' | 'other';

/** What the loader found in a tokenizer folder. */
export interface PromptTokenizerInfo {
  kind: TokenizerKind;
  /** `tokenizer.json`, or `vocab.json+merges.txt` converted like transformers' CLIPConverter. */
  source: 'tokenizer.json' | 'vocab.json+merges.txt';
  /** model_max_length of tokenizer_config.json, when it is a real limit. */
  modelMaxLength?: number;
  padToken: string;
  padId: number;
  bosId?: number;
  eosId?: number;
  /** Ids the post-processor puts before and after the prompt's tokens (CLIP: [BOS] / [EOS]; T5: [] / [EOS]). */
  prefixIds: number[];
  suffixIds: number[];
  vocabSize: number;
}

export interface EncodeOptions {
  /** Pad/truncate to this many ids (default: the tokenizer's model_max_length). */
  maxLength?: number;
}

/**
 * A tokenizer loaded from a model directory, with diffusers' prompt handling on top of the
 * library: `padding="max_length", max_length=…, truncation=True` — the prompt's tokens are cut
 * from the right so that the special tokens still fit, then the pad id fills up to maxLength.
 */
export class PromptTokenizer {
  constructor(
    readonly tokenizer: Tokenizer,
    readonly info: PromptTokenizerInfo,
  ) {}

  get maxLength(): number | undefined {
    return this.info.modelMaxLength;
  }

  /** The prompt's tokens without special tokens. */
  tokenIds(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /** Token strings without special tokens (for diagnostics and tests). */
  tokens(text: string): string[] {
    return this.tokenizer.tokenize(text);
  }

  encode(text: string, opts: EncodeOptions = {}): TokenizedPrompt {
    const maxLength = opts.maxLength ?? this.info.modelMaxLength;
    if (maxLength === undefined) {
      throw new Error('the tokenizer has no model_max_length: pass maxLength');
    }
    const { prefixIds, suffixIds, padId } = this.info;
    const room = maxLength - prefixIds.length - suffixIds.length;
    if (room < 0) throw new Error(`maxLength ${maxLength} cannot hold the ${prefixIds.length + suffixIds.length} special tokens`);
    const body = this.tokenIds(text);
    const kept = body.slice(0, room);
    const dropped = body.slice(room);
    const real = [...prefixIds, ...kept, ...suffixIds];
    const ids = real.concat(new Array<number>(maxLength - real.length).fill(padId));
    const attentionMask = real.map(() => 1).concat(new Array<number>(maxLength - real.length).fill(0));
    return {
      ids,
      attentionMask,
      length: real.length,
      truncated: dropped.length > 0,
      droppedTokens: dropped.length,
      droppedText: dropped.length > 0 ? this.tokenizer.decode(dropped, { skip_special_tokens: true }).trim() : '',
    };
  }
}
