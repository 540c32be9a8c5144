import { Code } from '@diffmesh/core';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildFluxDir, buildSdxlDir, clipTokenizerJson, clipVocab, t5Vocab, writeClipTokenizer, writeT5Tokenizer } from '@diffmesh/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clipTokenizerJsonFromSlowFiles, loadTokenizer, parseClipMerges, type PromptTokenizer } from './index.js';

/*
 * Expected ids are derived by hand from the BPE rules, the way transformers' CLIPTokenizer
 * tokenises: NFC, whitespace collapsed, lower-cased; split by CLIP's regex
 * ('s|'t|'re|'ve|'m|'ll|'d|letters+|one digit|other non-space runs); each piece's UTF-8 bytes
 * mapped through bytes_to_unicode, `</w>` appended to its last symbol, then the
 * lowest-ranked merge of merges.txt applied repeatedly until none applies.
 *
 * The test vocabulary (models/src/diffusers/clip-tokenizer-files.ts) has the CLIP layout:
 * byte symbols 0–255 in bytes_to_unicode order ('!' = 0, letter x = code(x) − 33), the same
 * with `</w>` at +256, merged tokens in merge order, BOS and EOS last. Its merges begin
 * "r e | re d</w> | g re | … | h o | … | s e | … | c a | ca t</w> | … | s u | su n | sun se |
 * sunse t</w> | … | p ho | pho t | phot o</w> | …" (every vocabulary word ends as one token).
 */

let root: string;
let sd1: PromptTokenizer;
let sd1Fast: PromptTokenizer;
let sd2: PromptTokenizer;
let t5: PromptTokenizer;
const v = clipVocab();
const id = (token: string) => {
  const x = v.vocab[token];
  if (x === undefined) throw new Error(`no token ${token}`);
  return x;
};
const byte = (ch: string) => ch.charCodeAt(0) - 33; // printable ASCII byte symbols
const BOS = v.bosId;
const EOS = v.eosId;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-tok-'));
  await writeClipTokenizer(path.join(root, 'sd1'), { padToken: '<|endoftext|>', style: 'legacy' });
  await writeClipTokenizer(path.join(root, 'sd1-fast'), { padToken: '<|endoftext|>', style: 'legacy', tokenizerJson: true });
  await writeClipTokenizer(path.join(root, 'sd2'), { padToken: '!', style: 'modern' });
  await writeT5Tokenizer(path.join(root, 't5'));
  [sd1, sd1Fast, sd2, t5] = await Promise.all(['sd1', 'sd1-fast', 'sd2', 't5'].map((d) => loadTokenizer(path.join(root, d))));
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe('CLIP tokenizer from vocab.json + merges.txt', () => {
  it('reads pad, length and special tokens from the files', () => {
    expect(sd1.info).toMatchObject({
      kind: 'clip-bpe',
      source: 'vocab.json+merges.txt',
      modelMaxLength: 77,
      padToken: '<|endoftext|>',
      padId: EOS,
      bosId: BOS,
      eosId: EOS,
      prefixIds: [BOS],
      suffixIds: [EOS],
    });
    expect(sd2.info).toMatchObject({ padToken: '!', padId: 0, modelMaxLength: 77 });
    expect(sd1Fast.info.source).toBe('tokenizer.json');
  });

  it('whole words, lower-casing and whitespace: "  A photo\\tof   A RED cat "', () => {
    const r = sd1.encode('  A photo\tof   A RED cat ');
    expect(r.ids.slice(0, 8)).toEqual([BOS, 320, id('photo</w>'), id('of</w>'), 320, id('red</w>'), id('cat</w>'), EOS]);
    expect(320).toBe(id('a</w>')); // 256 + ('a' − 33), as in the real CLIP vocabulary
    expect(r.ids).toHaveLength(77);
    expect(r.ids.slice(8)).toEqual(new Array(69).fill(EOS)); // SD 1.x pads with <|endoftext|>
    expect(r.attentionMask.slice(0, 9)).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 0]);
    expect(r).toMatchObject({ length: 8, truncated: false, droppedTokens: 0, droppedText: '' });
  });

  it('SD 2 pads with "!" (id 0)', () => {
    const r = sd2.encode('red cat');
    expect(r.ids.slice(0, 6)).toEqual([BOS, id('red</w>'), id('cat</w>'), EOS, 0, 0]);
  });

  it('unknown words fall apart by merge rank', () => {
    // "cats": [c, a, t, s</w>] — only "c a" applies ("ca t</w>" needs t</w>) → ca, t, s</w>
    expect(sd1.tokens('cats')).toEqual(['ca', 't', 's</w>']);
    expect(sd1.tokenIds('cats')).toEqual([id('ca'), byte('t'), 256 + byte('s')]);
    // "photos": "h o" (rank 44) first, then "p ho", "pho t"; "phot o</w>" needs o</w> → phot, o, s</w>
    expect(sd1.tokens('photos')).toEqual(['phot', 'o', 's</w>']);
    // "sunsets": "s e" (from "sea") outranks "s u" → se; then s u, su n, sun se → sunse, t, s</w>
    expect(sd1.tokens('sunsets')).toEqual(['sunse', 't', 's</w>']);
  });

  it('punctuation runs, contractions, digits and bytes: "it\'s 2 cafés!!"', () => {
    // pieces: it | 's | 2 | cafés | !!  (é = C3 A9 → symbols Ã (byte 0xC3) and © (0xA9))
    const ids = sd1.tokenIds("it's 2 cafés!!");
    const atilde = 106 + (0xc3 - 0xae); // third printable range of bytes_to_unicode starts at index 106
    const copy = 94 + (0xa9 - 0xa1); // second range starts at index 94
    expect(ids).toEqual([
      byte('i'),
      256 + byte('t'),
      byte("'"),
      256 + byte('s'),
      256 + byte('2'),
      id('ca'),
      byte('f'),
      atilde,
      copy,
      256 + byte('s'),
      byte('!'),
      256 + byte('!'),
    ]);
    // NFC: a decomposed é (e + U+0301) gives the same ids.
    expect(sd1.tokenIds("it's 2 cafe\u0301s!!")).toEqual(ids);
  });

  it('truncates to 77 keeping BOS … EOS and reports what was dropped', () => {
    const words = Array.from({ length: 80 }, (_, i) => (i < 75 ? 'red' : 'blue'));
    const r = sd1.encode(words.join(' '));
    expect(r.ids).toHaveLength(77);
    expect(r.ids[0]).toBe(BOS);
    expect(r.ids[76]).toBe(EOS);
    expect(r.ids[75]).toBe(id('red</w>'));
    expect(r).toMatchObject({ truncated: true, droppedTokens: 5, droppedText: 'blue blue blue blue blue', length: 77 });
    // A shorter maxLength (e.g. a pipeline argument) applies the same way.
    const s = sd1.encode('a red cat on a tree', { maxLength: 5 });
    expect(s.ids).toEqual([BOS, 320, id('red</w>'), id('cat</w>'), EOS]);
    expect(s.droppedTokens).toBe(3);
  });

  it('the converted tokenizer.json equals the one written beside the files, and both load to the same ids', async () => {
    const dir = path.join(root, 'sd1');
    const converted = clipTokenizerJsonFromSlowFiles({
      vocab: JSON.parse(await readFile(path.join(dir, 'vocab.json'), 'utf8')),
      merges: await readFile(path.join(dir, 'merges.txt'), 'utf8'),
      config: JSON.parse(await readFile(path.join(dir, 'tokenizer_config.json'), 'utf8')),
      specialTokensMap: JSON.parse(await readFile(path.join(dir, 'special_tokens_map.json'), 'utf8')),
    });
    expect(converted).toEqual(clipTokenizerJson());
    for (const p of ['', 'a photo of a red cat', "it's 2 cafés!!", 'sunsets over the SEA', '<|endoftext|> red']) {
      expect(sd1Fast.encode(p).ids, p).toEqual(sd1.encode(p).ids);
    }
  });

  it('merges.txt: the header line is skipped like CLIPTokenizer does', () => {
    expect(parseClipMerges('#version: 0.2\na b\nab c</w>\n')).toEqual([
      ['a', 'b'],
      ['ab', 'c</w>'],
    ]);
  });

  it('fails clearly without tokenizer files', async () => {
    await expect(loadTokenizer(path.join(root, 'nothing-here'))).rejects.toThrow(/no tokenizer.json/);
  });
});

describe('T5 tokenizer (tokenizer.json, Unigram)', () => {
  const tv = t5Vocab();
  const piece = (p: string) => tv.pieces.findIndex(([x]) => x === p);

  it('reads pad and length; appends </s> and pads with <pad>', () => {
    expect(t5.info).toMatchObject({
      kind: 't5-unigram',
      padToken: '<pad>',
      padId: 0,
      eosId: 1,
      prefixIds: [],
      suffixIds: [1],
      modelMaxLength: 512,
    });
    const r = t5.encode('a red cat', { maxLength: 8 });
    expect(r.ids).toEqual([piece('▁a'), piece('▁red'), piece('▁cat'), 1, 0, 0, 0, 0]);
  });

  it('Unigram picks the best-scoring split: "cats" → ▁cat + s; "painted" → ▁ + letters + ed', () => {
    // ▁cat (−6.10) + s (−8) beats ▁ (−3) + four letters (−9.5 each).
    expect(t5.tokenIds('cats')).toEqual([piece('▁cat'), piece('s')]);
    // No ▁paint… piece: ▁ + p, a, i, n, t (−9.5 each) + ed (−8) beats spelling e, d.
    expect(t5.tokenIds('painted')).toEqual(['▁', 'p', 'a', 'i', 'n', 't', 'ed'].map(piece));
    expect(t5.tokenIds('  a   red  ')).toEqual([piece('▁a'), piece('▁red')]);
  });

  it('truncates keeping </s> and reports it', () => {
    const r = t5.encode('a red cat on a green tree at sunset', { maxLength: 8 });
    expect(r.ids).toEqual([piece('▁a'), piece('▁red'), piece('▁cat'), piece('▁on'), piece('▁a'), piece('▁green'), piece('▁tree'), 1]);
    expect(r).toMatchObject({ truncated: true, droppedTokens: 2, droppedText: 'at sunset' });
  });
});

describe('tokenizers of built model directories', () => {
  it('SDXL: tokenizer pads with <|endoftext|>, tokenizer_2 with "!"', async () => {
    const dir = path.join(root, 'sdxl');
    const m = await buildSdxlDir(dir);
    const [a, b] = await Promise.all([loadTokenizer(path.join(dir, 'tokenizer')), loadTokenizer(path.join(dir, 'tokenizer_2'))]);
    for (const p of ['a photo of a yellow house', '', 'cats and dogs']) {
      expect(a.encode(p).ids).toEqual(m.promptIds(p));
      expect(b.encode(p).ids).toEqual(m.promptIds2(p));
    }
  });

  it('FLUX: CLIP tokenizer and T5 tokenizer_2 at max_sequence_length 512', async () => {
    const dir = path.join(root, 'flux');
    const m = await buildFluxDir(dir);
    const [a, b] = await Promise.all([loadTokenizer(path.join(dir, 'tokenizer')), loadTokenizer(path.join(dir, 'tokenizer_2'))]);
    expect(b.encode('a photo of a blue sea').ids).toEqual(m.promptIdsT5('a photo of a blue sea', 512));
    expect(a.encode('a photo of a blue sea').ids).toEqual(m.promptIds('a photo of a blue sea'));
  });

  it('a model_max_length of int(1e30) means "no limit": maxLength must be given', async () => {
    const dir = path.join(root, 'nolimit');
    await writeClipTokenizer(dir, { modelMaxLength: 1000000000000000019884624838656 });
    const t = await loadTokenizer(dir);
    expect(t.info.modelMaxLength).toBeUndefined();
    expect(() => t.encode('red')).toThrow(/maxLength/);
    expect(t.encode('red', { maxLength: 4 }).ids).toEqual([BOS, id('red</w>'), EOS, EOS]);
  });

  it('tokenizer_config with added_tokens_decoder and a tokenizer.json that is not CLIP', async () => {
    const dir = path.join(root, 'odd');
    await writeClipTokenizer(dir, { style: 'modern' });
    await writeFile(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ tokenizer_class: 'T5Tokenizer' }));
    await expect(loadTokenizer(dir)).rejects.toThrow(/only CLIP tokenizers/);
  });
});

describe('a CLIP tokenizer folder without tokenizer_config.json or special_tokens_map.json', () => {
  it("takes CLIPTokenizer's defaults, as transformers does", async () => {
    const dir = path.join(root, 'bare');
    await writeClipTokenizer(dir, { padToken: '<|endoftext|>', style: 'legacy' });
    await rm(path.join(dir, 'tokenizer_config.json'));
    await rm(path.join(dir, 'special_tokens_map.json'));
    const bare = await loadTokenizer(dir);
    expect(bare.info).toMatchObject({ padToken: '<|endoftext|>', padId: EOS, bosId: BOS, eosId: EOS });
    expect(bare.maxLength).toBeUndefined(); // the encoder's max_position_embeddings decides
    expect(bare.encode('a red cat', { maxLength: 8 }).ids).toEqual(sd1.encode('a red cat', { maxLength: 8 }).ids);
  });

  it('refuses a pad token missing from the vocabulary with MODEL_LOAD_FAILED naming the folder', async () => {
    const dir = path.join(root, 'bad-pad');
    await writeClipTokenizer(dir, { padToken: '<|endoftext|>', style: 'legacy' });
    const config = JSON.parse(await readFile(path.join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    await writeFile(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ ...config, pad_token: '<pad-nowhere>' }));
    await expect(loadTokenizer(dir)).rejects.toMatchObject({
      code: Code.FAILED_PRECONDITION,
      reason: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining(dir),
    });
  });
});
