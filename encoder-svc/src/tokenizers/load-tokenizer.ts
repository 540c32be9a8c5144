import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { Code, DiffmeshError } from '@diffmesh/core';
import { clipTokenizerJsonFromSlowFiles, specialTokenContent, type SpecialTokenValue } from './clip-converter.js';
import { PromptTokenizer, type PromptTokenizerInfo, type TokenizerKind } from './prompt-tokenizer.js';

/** A tokenizer folder that cannot be used: FAILED_PRECONDITION naming the file. */
function loadFailed(file: string, what: string): DiffmeshError {
  return new DiffmeshError(Code.FAILED_PRECONDITION, 'MODEL_LOAD_FAILED', `${file}: ${what}`, { metadata: { file } });
}

/** transformers' CLIPTokenizer defaults, for a folder whose config does not name its tokens. */
const CLIP_DEFAULT_TOKENS: Record<string, string> = {
  bos_token: '<|startoftext|>',
  eos_token: '<|endoftext|>',
  unk_token: '<|endoftext|>',
  pad_token: '<|endoftext|>',
};

/** transformers writes int(1e30) as model_max_length when a tokenizer has no limit. */
const NO_LIMIT = 1e20;

async function readJsonIfExists(file: string): Promise<Record<string, unknown> | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw loadFailed(file, `not readable JSON (${(err as Error).message})`);
  }
}

async function readTextIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function kindOf(json: Record<string, unknown>): TokenizerKind {
  const model = (json.model ?? {}) as Record<string, unknown>;
  if (model.type === 'Unigram' || Array.isArray(model.vocab)) return 't5-unigram';
  if ((model.type === 'BPE' || 'merges' in model) && model.end_of_word_suffix === '</w>') return 'clip-bpe';
  return 'other';
}

/**
 * Loads the tokenizer of a diffusers model component folder (`tokenizer/`, `tokenizer_2/`, …):
 *
 * - `tokenizer.json` when present (CLIP BPE, T5 Unigram, anything the library reads);
 * - otherwise `vocab.json` + `merges.txt` (+ `tokenizer_config.json`, `special_tokens_map.json`),
 *   converted to the tokenizer.json transformers' CLIPConverter would write.
 *
 * Padding and length come from the folder's files: `pad_token` (CLIP: `<|endoftext|>` in
 * SD 1.x, `!` in SD 2.x and SDXL's tokenizer_2; T5: `<pad>`) and `model_max_length`.
 */
export async function loadTokenizer(dir: string): Promise<PromptTokenizer> {
  const config = (await readJsonIfExists(path.join(dir, 'tokenizer_config.json'))) ?? {};
  const specialMap = (await readJsonIfExists(path.join(dir, 'special_tokens_map.json'))) ?? {};
  let json = await readJsonIfExists(path.join(dir, 'tokenizer.json'));
  let source: PromptTokenizerInfo['source'] = 'tokenizer.json';
  if (!json) {
    const vocab = await readJsonIfExists(path.join(dir, 'vocab.json'));
    const merges = await readTextIfExists(path.join(dir, 'merges.txt'));
    if (!vocab || merges === undefined) {
      throw loadFailed(dir, 'no tokenizer.json, and no vocab.json + merges.txt to build one from');
    }
    const cls = typeof config.tokenizer_class === 'string' ? config.tokenizer_class : 'CLIPTokenizer';
    if (!cls.startsWith('CLIPTokenizer')) {
      throw loadFailed(
        path.join(dir, 'tokenizer_config.json'),
        `only CLIP tokenizers can be built from vocab.json + merges.txt (tokenizer_class ${cls})`,
      );
    }
    json = clipTokenizerJsonFromSlowFiles({
      vocab: vocab as Record<string, number>,
      merges,
      config,
      specialTokensMap: specialMap,
    });
    source = 'vocab.json+merges.txt';
  }
  // The library reads special tokens from this config as plain strings. A CLIP tokenizer built
  // from vocab.json + merges.txt whose config names none takes CLIPTokenizer's defaults.
  const token = (key: string) =>
    specialTokenContent(config[key] as SpecialTokenValue) ??
    specialTokenContent(specialMap[key] as SpecialTokenValue) ??
    (source === 'vocab.json+merges.txt' ? CLIP_DEFAULT_TOKENS[key] : undefined);
  const libConfig: Record<string, unknown> = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
    const v = token(key);
    if (v !== undefined) libConfig[key] = v;
  }
  const tokenizer = new Tokenizer(json, libConfig);
  const kind = kindOf(json);

  const idOf = (t: string | undefined) => (t === undefined ? undefined : tokenizer.token_to_id(t));
  const eosToken = token('eos_token');
  const padToken = token('pad_token') ?? eosToken;
  if (padToken === undefined) throw loadFailed(dir, 'no pad_token (nor eos_token) in tokenizer_config.json or special_tokens_map.json');
  const padId = idOf(padToken);
  if (padId === undefined) throw loadFailed(dir, `pad token "${padToken}" is not in the vocabulary`);

  // Where the post-processor puts its special tokens: compare a probe with and without them.
  const probe = 'a';
  const bare: number[] = tokenizer.encode(probe, { add_special_tokens: false }).ids;
  const full: number[] = tokenizer.encode(probe, { add_special_tokens: true }).ids;
  let at = -1;
  for (let i = 0; i + bare.length <= full.length && at < 0; i += 1) {
    if (bare.every((id, k) => full[i + k] === id)) at = i;
  }
  if (at < 0) throw loadFailed(dir, 'cannot locate the prompt between the special tokens');

  const rawMax = Number(config.model_max_length);
  const info: PromptTokenizerInfo = {
    kind,
    source,
    modelMaxLength: Number.isFinite(rawMax) && rawMax > 0 && rawMax < NO_LIMIT ? rawMax : undefined,
    padToken,
    padId,
    bosId: idOf(token('bos_token')),
    eosId: idOf(eosToken),
    prefixIds: full.slice(0, at),
    suffixIds: full.slice(at + bare.length),
    vocabSize: tokenizer.get_vocab(true).size,
  };
  return new PromptTokenizer(tokenizer, info);
}
