/**
 * Builds the fast `tokenizer.json` of a CLIP tokenizer folder that ships only the slow files
 * (`vocab.json`, `merges.txt`, `tokenizer_config.json`, `special_tokens_map.json`, as most
 * Stable Diffusion repositories do), the way transformers' `convert_slow_tokenizer.CLIPConverter`
 * does: byte-level BPE with end-of-word suffix `</w>`, an NFC → collapse-whitespace → lowercase
 * normaliser, CLIP's split regex followed by ByteLevel pre-tokenisation, and
 * `<|startoftext|> … <|endoftext|>` post-processing. The result is loaded by the tokenizers
 * library like any tokenizer.json; nothing here applies BPE itself.
 */

/** A special token as tokenizer_config.json / special_tokens_map.json write it. */
export type SpecialTokenValue =
  string | { content: string; normalized?: boolean; lstrip?: boolean; rstrip?: boolean; single_word?: boolean } | null | undefined;

/** The content of a special-token value (string or AddedToken object). */
export function specialTokenContent(v: SpecialTokenValue): string | undefined {
  if (v == null) return undefined;
  return typeof v === 'string' ? v : v.content;
}

/**
 * transformers' CLIPTokenizer reads `merges.txt` as `read().strip().split("\n")[1 : 49152 - 256 - 2 + 1]`:
 * the first line (the `#version` header) is dropped and at most 48,894 merges are used.
 */
export const CLIP_MAX_MERGES = 49152 - 256 - 2;

export function parseClipMerges(text: string): Array<[string, string]> {
  const lines = text
    .trim()
    .split('\n')
    .slice(1, CLIP_MAX_MERGES + 1);
  return lines.map((line, i) => {
    const parts = line.trim().split(' ');
    if (parts.length !== 2) throw new Error(`merges.txt line ${i + 2}: expected two symbols, got "${line}"`);
    return [parts[0], parts[1]];
  });
}

export interface ClipSlowFiles {
  /** vocab.json: token → id. */
  vocab: Record<string, number>;
  /** merges.txt, whole text. */
  merges: string;
  /** tokenizer_config.json (may be empty). */
  config: Record<string, unknown>;
  /** special_tokens_map.json (may be empty). */
  specialTokensMap: Record<string, unknown>;
}

/** The tokenizer.json transformers' CLIPConverter makes from the slow CLIP files. */
export function clipTokenizerJsonFromSlowFiles(files: ClipSlowFiles): Record<string, unknown> {
  const pick = (key: string, fallback: string) =>
    specialTokenContent(files.config[key] as SpecialTokenValue) ??
    specialTokenContent(files.specialTokensMap[key] as SpecialTokenValue) ??
    fallback;
  const bos = pick('bos_token', '<|startoftext|>');
  const eos = pick('eos_token', '<|endoftext|>');
  const unk = pick('unk_token', '<|endoftext|>');
  const idOf = (token: string) => {
    const id = files.vocab[token];
    if (id === undefined) throw new Error(`special token "${token}" is not in vocab.json`);
    return id;
  };
  // Added (special) tokens: from added_tokens_decoder when present, else BOS/EOS/UNK/PAD that the vocabulary holds.
  const added = new Map<number, Record<string, unknown>>();
  const decoder = files.config.added_tokens_decoder as Record<string, Record<string, unknown>> | undefined;
  if (decoder) {
    for (const [id, t] of Object.entries(decoder)) {
      added.set(Number(id), {
        id: Number(id),
        content: t.content,
        single_word: t.single_word ?? false,
        lstrip: t.lstrip ?? false,
        rstrip: t.rstrip ?? false,
        normalized: t.normalized ?? true,
        special: t.special ?? true,
      });
    }
  } else {
    for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
      const raw = (files.config[key] ?? files.specialTokensMap[key]) as SpecialTokenValue;
      const content = specialTokenContent(raw);
      if (content === undefined || files.vocab[content] === undefined) continue;
      const id = files.vocab[content];
      // A pad token that is an ordinary vocabulary entry (SD 2's "!") stays ordinary.
      if (key === 'pad_token' && !content.startsWith('<|')) continue;
      const obj: Exclude<SpecialTokenValue, string | null | undefined> | Record<string, never> = typeof raw === 'object' && raw ? raw : {};
      added.set(id, {
        id,
        content,
        single_word: obj.single_word ?? false,
        lstrip: obj.lstrip ?? false,
        rstrip: obj.rstrip ?? false,
        normalized: obj.normalized ?? true,
        special: true,
      });
    }
  }
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [...added.values()].sort((a, b) => (a.id as number) - (b.id as number)),
    normalizer: {
      type: 'Sequence',
      normalizers: [{ type: 'NFC' }, { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' }, { type: 'Lowercase' }],
    },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        {
          type: 'Split',
          pattern: { Regex: "'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+" },
          behavior: 'Removed',
          invert: true,
        },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: {
      type: 'RobertaProcessing',
      sep: [eos, idOf(eos)],
      cls: [bos, idOf(bos)],
      trim_offsets: false,
      add_prefix_space: false,
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: unk,
      continuing_subword_prefix: '',
      end_of_word_suffix: '</w>',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: files.vocab,
      merges: parseClipMerges(files.merges).map(([a, b]) => `${a} ${b}`),
    },
  };
}
