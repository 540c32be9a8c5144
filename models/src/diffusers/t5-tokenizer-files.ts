import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { SEMANTIC_DIMS, VOCABULARY_WORDS, wordMeaning } from './vocabulary.js';

/**
 * A small T5 SentencePiece-Unigram tokenizer in the `tokenizer.json` form transformers'
 * T5Converter writes (as in FLUX's and SD3's `tokenizer_2`/`tokenizer_3`): `<pad>` = 0,
 * `</s>` = 1, `<unk>` = 2, then `▁` and the pieces with their log-probability scores, then
 * `<extra_id_N>` sentinels (N descending) at the end. Whitespace split + Metaspace (`▁`)
 * pre-tokenisation, `$A </s>` post-processing.
 *
 * Every vocabulary word is a piece `▁word` with a good score; single letters, digits and a
 * few punctuation marks have poor scores, so an unknown word becomes `▁` + letters unless a
 * word piece covers part of it (e.g. `cats` → `▁cat`, `s`).
 *
 * The real files use a `Precompiled` (nmt_nfkc) normaliser whose char map cannot be made
 * here; this one uses NFKC plus whitespace collapsing, which is what the JS tokenizers
 * library applies for `Precompiled` anyway.
 */

export const T5_PAD = '<pad>';
export const T5_EOS = '</s>';
export const T5_UNK = '<unk>';
const EXTRA_IDS = 100;

export interface T5Vocab {
  /** [piece, score] in id order. */
  pieces: Array<[string, number]>;
  padId: number;
  eosId: number;
  unkId: number;
  size: number;
  /** Meaning (SEMANTIC_DIMS values) of each id, row-major. */
  meanings: Float32Array;
}

let cached: T5Vocab | undefined;

/** The T5 vocabulary of the test model directories (deterministic). */
export function t5Vocab(): T5Vocab {
  if (cached) return cached;
  const pieces: Array<[string, number]> = [
    [T5_PAD, 0],
    [T5_EOS, 0],
    [T5_UNK, 0],
    ['▁', -3],
  ];
  VOCABULARY_WORDS.forEach((w, i) => pieces.push([`▁${w}`, -6 - i / 100]));
  for (const s of ['s', 'ing', 'ed', 'er']) pieces.push([s, -8]);
  for (let c = 'a'.charCodeAt(0); c <= 'z'.charCodeAt(0); c += 1) {
    const letter = String.fromCharCode(c);
    if (!pieces.some(([p]) => p === letter)) pieces.push([letter, -9.5]);
  }
  for (let d = 0; d <= 9; d += 1) pieces.push([String(d), -9.5]);
  for (const p of [',', '.', '!', '?', "'", '-']) pieces.push([p, -9]);
  for (let i = EXTRA_IDS - 1; i >= 0; i -= 1) pieces.push([`<extra_id_${i}>`, 0]);
  const meanings = new Float32Array(pieces.length * SEMANTIC_DIMS);
  pieces.forEach(([p], id) => {
    if (!p.startsWith('▁')) return;
    const m = wordMeaning(p.slice(1));
    for (let k = 0; k < SEMANTIC_DIMS; k += 1) meanings[id * SEMANTIC_DIMS + k] = m[k];
  });
  cached = { pieces, padId: 0, eosId: 1, unkId: 2, size: pieces.length, meanings };
  return cached;
}

/** The `tokenizer.json` of the T5 tokenizer. */
export function t5TokenizerJson(v: T5Vocab = t5Vocab()): Record<string, unknown> {
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const added = [special(v.padId, T5_PAD), special(v.eosId, T5_EOS), special(v.unkId, T5_UNK)];
  v.pieces.forEach(([p], id) => {
    if (p.startsWith('<extra_id_')) added.push(special(id, p));
  });
  const metaspace = { type: 'Metaspace', replacement: '▁', add_prefix_space: true, prepend_scheme: 'always', split: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: {
      type: 'Sequence',
      normalizers: [{ type: 'NFKC' }, { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }],
    },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, metaspace] },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: T5_EOS, type_id: 0 } }],
      pair: [
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: T5_EOS, type_id: 0 } },
        { Sequence: { id: 'B', type_id: 0 } },
        { SpecialToken: { id: T5_EOS, type_id: 0 } },
      ],
      special_tokens: { [T5_EOS]: { id: T5_EOS, ids: [v.eosId], tokens: [T5_EOS] } },
    },
    decoder: metaspace,
    model: { type: 'Unigram', unk_id: v.unkId, vocab: v.pieces, byte_fallback: false },
  };
}

export interface T5TokenizerFilesOptions {
  /** `model_max_length` in tokenizer_config.json (default 512, as FLUX's tokenizer_2). */
  modelMaxLength?: number;
}

/** Writes a T5 tokenizer folder (`tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`). */
export async function writeT5Tokenizer(dir: string, opts: T5TokenizerFilesOptions = {}): Promise<void> {
  const v = t5Vocab();
  await mkdir(dir, { recursive: true });
  const extras = v.pieces.filter(([p]) => p.startsWith('<extra_id_')).map(([p]) => p);
  extras.sort((a, b) => Number(a.slice(10, -1)) - Number(b.slice(10, -1)));
  const decoder: Record<string, unknown> = {};
  v.pieces.forEach(([p], id) => {
    if (id <= 2 || p.startsWith('<extra_id_')) {
      decoder[String(id)] = { content: p, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
    }
  });
  const config = {
    add_prefix_space: true,
    added_tokens_decoder: decoder,
    additional_special_tokens: extras,
    clean_up_tokenization_spaces: true,
    eos_token: T5_EOS,
    extra_ids: EXTRA_IDS,
    legacy: true,
    model_max_length: opts.modelMaxLength ?? 512,
    pad_token: T5_PAD,
    sp_model_kwargs: {},
    tokenizer_class: 'T5Tokenizer',
    unk_token: T5_UNK,
  };
  const specialMap = {
    additional_special_tokens: extras,
    eos_token: { content: T5_EOS, lstrip: false, normalized: false, rstrip: false, single_word: false },
    pad_token: { content: T5_PAD, lstrip: false, normalized: false, rstrip: false, single_word: false },
    unk_token: { content: T5_UNK, lstrip: false, normalized: false, rstrip: false, single_word: false },
  };
  await Promise.all([
    writeFile(path.join(dir, 'tokenizer.json'), JSON.stringify(t5TokenizerJson(v), null, 2)),
    writeFile(path.join(dir, 'tokenizer_config.json'), `${JSON.stringify(config, null, 2)}\n`),
    writeFile(path.join(dir, 'special_tokens_map.json'), `${JSON.stringify(specialMap, null, 2)}\n`),
  ]);
}

// @huggingface/tokenizers' declarations use extensionless paths that NodeNext resolution
// cannot follow, so its types arrive as `any`.
// eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents
let referenceTokenizer: Tokenizer | undefined;

/**
 * Reference ids the way FluxPipeline asks the T5 tokenizer for them (`padding="max_length",
 * max_length=max_sequence_length, truncation=True`): the first maxLength − 1 tokens, `</s>`,
 * then `<pad>` up to maxLength.
 */
export function referenceT5Ids(prompt: string, maxLength: number): number[] {
  referenceTokenizer ??= new Tokenizer(t5TokenizerJson(), { eos_token: T5_EOS });
  const v = t5Vocab();
  const body = referenceTokenizer.encode(prompt, { add_special_tokens: false }).ids.slice(0, maxLength - 1);
  const ids = [...body, v.eosId];
  while (ids.length < maxLength) ids.push(v.padId);
  return ids;
}
