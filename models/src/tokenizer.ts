/**
 * Writes a `tokenizer.json` in the Hugging Face tokenizers format: a lower-casing BERT
 * normaliser and pre-tokeniser with a whole-word WordPiece vocabulary. Unknown words map
 * to `[UNK]`. Ids 0 and 1 are `[PAD]` and `[UNK]`.
 */
export function wordPieceTokenizerJson(words: readonly string[]): string {
  const specials = ['[PAD]', '[UNK]'];
  const vocab: Record<string, number> = {};
  for (const [i, w] of [...specials, ...words].entries()) {
    if (w in vocab) throw new Error(`duplicate vocabulary word "${w}"`);
    vocab[w] = i;
  }
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'BertNormalizer',
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: null,
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab,
    },
  };
  return `${JSON.stringify(json, null, 1)}\n`;
}
