/**
 * The small English vocabulary of the test model directories, with the "meaning" the
 * analytic models give each word: a 4-vector (red, green, blue, texture) carried in the first
 * four hidden dimensions of every text encoder. Words not listed here (and every special,
 * padding or byte-level token) mean nothing (a zero vector), so only the listed words steer
 * the picture, and an empty prompt gives a neutral grey.
 */

/** Number of meaning dimensions at the start of every hidden vector. */
export const SEMANTIC_DIMS = 4;

/** word → meaning (red, green, blue, texture). */
export const WORD_MEANINGS: ReadonlyArray<readonly [string, readonly [number, number, number, number]]> = [
  ['red', [0.5, -0.2, -0.2, 0]],
  ['green', [-0.2, 0.5, -0.2, 0]],
  ['blue', [-0.2, -0.2, 0.5, 0]],
  ['yellow', [0.35, 0.35, -0.3, 0]],
  ['orange', [0.45, 0.15, -0.3, 0]],
  ['purple', [0.25, -0.25, 0.4, 0]],
  ['white', [0.3, 0.3, 0.3, 0]],
  ['black', [-0.3, -0.3, -0.3, 0]],
  ['bright', [0.15, 0.15, 0.15, 0.1]],
  ['dark', [-0.15, -0.15, -0.15, -0.1]],
  ['cat', [0.05, 0, -0.05, 0.3]],
  ['dog', [0, 0.05, 0, -0.3]],
  ['car', [0, 0, 0.05, 0.2]],
  ['house', [0.05, 0.02, 0, -0.2]],
  ['tree', [-0.05, 0.1, -0.05, 0.15]],
  ['sky', [-0.05, 0, 0.1, -0.1]],
  ['sea', [-0.1, 0, 0.1, 0.1]],
  ['flower', [0.1, 0, 0.05, 0.25]],
  ['sunset', [0.2, 0.05, -0.1, -0.05]],
  ['forest', [-0.1, 0.15, -0.1, 0.2]],
];

/** Words that are in the vocabulary but mean nothing. */
export const NEUTRAL_WORDS: readonly string[] = [
  'a',
  'an',
  'the',
  'of',
  'on',
  'in',
  'and',
  'with',
  'at',
  'photo',
  'painting',
  'picture',
  'high',
  'quality',
  'detailed',
  'blurry',
  'ugly',
];

/** Every whole word of the vocabulary, in a fixed order. */
export const VOCABULARY_WORDS: readonly string[] = [...WORD_MEANINGS.map(([w]) => w), ...NEUTRAL_WORDS];

const MEANING = new Map<string, readonly number[]>(WORD_MEANINGS.map(([w, m]) => [w, m]));

/** The meaning of one whole word (zeros for anything else). */
export function wordMeaning(word: string): readonly number[] {
  return MEANING.get(word) ?? [0, 0, 0, 0];
}
