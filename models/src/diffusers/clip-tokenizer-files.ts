import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { VOCABULARY_WORDS, wordMeaning, SEMANTIC_DIMS } from './vocabulary.js';

/**
 * A small CLIP byte-level BPE vocabulary in the real CLIP file formats (`vocab.json`,
 * `merges.txt`, `tokenizer_config.json`, `special_tokens_map.json`, optionally the
 * `tokenizer.json` that transformers' CLIPConverter writes).
 *
 * Layout of the ids, as in openai/clip-vit-*: the 256 byte symbols of GPT-2's
 * `bytes_to_unicode` (ids 0–255, `!` = 0, `a` = 64), the same symbols with the end-of-word
 * suffix `</w>` (256–511, `a</w>` = 320), one token per merge in merge order, then
 * `<|startoftext|>` and `<|endoftext|>` as the last two ids.
 *
 * The merges are derived from VOCABULARY_WORDS: each word gets merges until the BPE (run
 * with the library) turns the word into one token, so every vocabulary word is one token and
 * any other word falls apart into pieces the usual way.
 */

export const CLIP_BOS = '<|startoftext|>';
export const CLIP_EOS = '<|endoftext|>';
export const CLIP_EOW = '</w>';

/** GPT-2/CLIP `bytes_to_unicode`: the symbol of each byte, and the order symbols enter the vocabulary. */
export function bytesToUnicode(): { byteToChar: string[]; order: number[] } {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b += 1) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b += 1) bs.push(b);
  for (let b = 0xae; b <= 0xff; b += 1) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b += 1) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n += 1;
    }
  }
  const byteToChar = new Array<string>(256);
  bs.forEach((b, i) => {
    byteToChar[b] = String.fromCodePoint(cs[i]);
  });
  return { byteToChar, order: bs };
}

/** A CLIP BPE vocabulary: token → id, the ranked merges, and the special ids. */
export interface ClipVocab {
  vocab: Record<string, number>;
  /** Merges in rank order (the lines of merges.txt after the header). */
  merges: Array<[string, string]>;
  bosId: number;
  eosId: number;
  size: number;
  /** Meaning (SEMANTIC_DIMS values) of each id, row-major. */
  meanings: Float32Array;
}

let cached: ClipVocab | undefined;

/** The CLIP vocabulary of the test model directories (built once per process, deterministic). */
export function clipVocab(): ClipVocab {
  if (cached) return cached;
  const { byteToChar, order } = bytesToUnicode();
  const tokens: string[] = order.map((b) => byteToChar[b]);
  tokens.push(...order.map((b) => byteToChar[b] + CLIP_EOW));
  const vocab: Record<string, number> = {};
  tokens.forEach((t, i) => {
    vocab[t] = i;
  });
  const merges: Array<[string, string]> = [];
  const known = new Set<string>();
  for (const word of VOCABULARY_WORDS) {
    // The words are lower-case ASCII letters, so their byte symbols are the letters themselves.
    for (;;) {
      const bpe = new Tokenizer(
        {
          added_tokens: [],
          normalizer: null,
          pre_tokenizer: null,
          post_processor: null,
          decoder: null,
          model: { type: 'BPE', vocab, merges, end_of_word_suffix: CLIP_EOW, continuing_subword_prefix: '' },
        },
        {},
      );
      const pieces = bpe.tokenize(word);
      if (pieces.length === 1) break;
      const [a, b] = pieces;
      const key = `${a} ${b}`;
      if (known.has(key)) throw new Error(`merge "${key}" exists but "${word}" did not merge`);
      known.add(key);
      merges.push([a, b]);
      if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
    }
  }
  const bosId = Object.keys(vocab).length;
  vocab[CLIP_BOS] = bosId;
  vocab[CLIP_EOS] = bosId + 1;
  const size = bosId + 2;
  const meanings = new Float32Array(size * SEMANTIC_DIMS);
  for (const [token, id] of Object.entries(vocab)) {
    if (!token.endsWith(CLIP_EOW)) continue;
    const m = wordMeaning(token.slice(0, -CLIP_EOW.length));
    for (let k = 0; k < SEMANTIC_DIMS; k += 1) meanings[id * SEMANTIC_DIMS + k] = m[k];
  }
  cached = { vocab, merges, bosId, eosId: bosId + 1, size, meanings };
  return cached;
}

/** The `tokenizer.json` transformers' CLIPConverter makes from this vocabulary. */
export function clipTokenizerJson(v: ClipVocab = clipVocab()): Record<string, unknown> {
  const added = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: true,
    special: true,
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [added(v.bosId, CLIP_BOS), added(v.eosId, CLIP_EOS)],
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
      sep: [CLIP_EOS, v.eosId],
      cls: [CLIP_BOS, v.bosId],
      trim_offsets: false,
      add_prefix_space: false,
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: CLIP_EOS,
      continuing_subword_prefix: '',
      end_of_word_suffix: CLIP_EOW,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: v.vocab,
      merges: v.merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

export interface ClipTokenizerFilesOptions {
  /** The padding token: `<|endoftext|>` (SD 1.x, FLUX, SDXL tokenizer) or `!` (SD 2.x, SDXL tokenizer_2). */
  padToken?: string;
  /** `model_max_length` in tokenizer_config.json (default 77). */
  modelMaxLength?: number;
  /** Also write the fast `tokenizer.json` (default false: SD repositories ship only vocab.json + merges.txt). */
  tokenizerJson?: boolean;
  /**
   * `legacy`: special tokens as `{"__type": "AddedToken", ...}` objects (SD 1.5 era files);
   * `modern`: plain strings plus `added_tokens_decoder` (files saved by transformers ≥ 4.34).
   */
  style?: 'legacy' | 'modern';
}

/** Writes a CLIP tokenizer folder (`vocab.json`, `merges.txt`, config files, optionally `tokenizer.json`). */
export async function writeClipTokenizer(dir: string, opts: ClipTokenizerFilesOptions = {}): Promise<void> {
  const v = clipVocab();
  const pad = opts.padToken ?? CLIP_EOS;
  const maxLen = opts.modelMaxLength ?? 77;
  const style = opts.style ?? 'legacy';
  await mkdir(dir, { recursive: true });
  const addedToken = (content: string, legacy: boolean) =>
    legacy ? { __type: 'AddedToken', content, lstrip: false, normalized: true, rstrip: false, single_word: false } : content;
  const specialMapToken = (content: string) => ({ content, lstrip: false, normalized: true, rstrip: false, single_word: false });
  const config: Record<string, unknown> =
    style === 'legacy'
      ? {
          add_prefix_space: false,
          bos_token: addedToken(CLIP_BOS, true),
          do_lower_case: true,
          eos_token: addedToken(CLIP_EOS, true),
          errors: 'replace',
          model_max_length: maxLen,
          name_or_path: 'openai/clip-vit-large-patch14',
          pad_token: pad,
          special_tokens_map_file: './special_tokens_map.json',
          tokenizer_class: 'CLIPTokenizer',
          unk_token: addedToken(CLIP_EOS, true),
        }
      : {
          add_prefix_space: false,
          added_tokens_decoder: Object.fromEntries(
            [
              [v.bosId, CLIP_BOS],
              [v.eosId, CLIP_EOS],
            ].map(([id, content]) => [
              String(id),
              { content, lstrip: false, normalized: true, rstrip: false, single_word: false, special: true },
            ]),
          ),
          bos_token: CLIP_BOS,
          clean_up_tokenization_spaces: true,
          do_lower_case: true,
          eos_token: CLIP_EOS,
          errors: 'replace',
          model_max_length: maxLen,
          pad_token: pad,
          tokenizer_class: 'CLIPTokenizer',
          unk_token: CLIP_EOS,
        };
  const specialMap =
    style === 'legacy'
      ? {
          bos_token: specialMapToken(CLIP_BOS),
          eos_token: specialMapToken(CLIP_EOS),
          pad_token: pad,
          unk_token: specialMapToken(CLIP_EOS),
        }
      : {
          bos_token: specialMapToken(CLIP_BOS),
          eos_token: specialMapToken(CLIP_EOS),
          pad_token: pad === CLIP_EOS ? specialMapToken(pad) : pad,
          unk_token: specialMapToken(CLIP_EOS),
        };
  const merges = `#version: 0.2\n${v.merges.map(([a, b]) => `${a} ${b}`).join('\n')}\n`;
  await Promise.all([
    writeFile(path.join(dir, 'vocab.json'), JSON.stringify(v.vocab)),
    writeFile(path.join(dir, 'merges.txt'), merges),
    writeFile(path.join(dir, 'tokenizer_config.json'), `${JSON.stringify(config, null, 2)}\n`),
    writeFile(path.join(dir, 'special_tokens_map.json'), `${JSON.stringify(specialMap, null, 2)}\n`),
    opts.tokenizerJson ? writeFile(path.join(dir, 'tokenizer.json'), JSON.stringify(clipTokenizerJson(v), null, 2)) : Promise.resolve(),
  ]);
}

// @huggingface/tokenizers' declarations use extensionless paths that NodeNext resolution
// cannot follow, so its types arrive as `any`.
// eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents
let referenceTokenizer: Tokenizer | undefined;

/**
 * Reference token ids of a prompt the way diffusers asks CLIPTokenizer for them
 * (`padding="max_length", max_length=model_max_length, truncation=True`): BOS, the first
 * maxLength − 2 tokens, EOS, then `padId` up to maxLength. Used by the expected-image code;
 * the serving path has its own loader (encoder-svc) that is tested against hand-derived ids.
 */
export function referenceClipIds(prompt: string, maxLength: number, padId: number): number[] {
  referenceTokenizer ??= new Tokenizer(clipTokenizerJson(), {});
  const v = clipVocab();
  const body = referenceTokenizer.encode(prompt, { add_special_tokens: false }).ids.slice(0, maxLength - 2);
  const ids = [v.bosId, ...body, v.eosId];
  while (ids.length < maxLength) ids.push(padId);
  return ids;
}
