// Shared generators of the fuzz suite: protobuf wire bytes driven by the descriptor set (valid
// messages of a method's input type, then broken in the ways the issue lists), hostile JSON
// values, and the run's settings (seed, number of inputs per surface).
import fc from 'fast-check';
import { ScalarType, type DescField, type DescMessage } from '@bufbuild/protobuf';

/** The seed of every surface (FUZZ_SEED); fixed so that CI runs the same inputs each time. */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 19_04);

/** Inputs of one whole run (FUZZ_RUNS), shared among the surfaces by {@link SURFACE_SHARE}. */
export const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);

/** Each surface's share of {@link FUZZ_RUNS}. */
export const SURFACE_SHARE = {
  grpc: 0.45,
  http: 0.25,
  tensorPut: 0.1,
  images: 0.12,
  modelDirectories: 0.08,
} as const;
export type Surface = keyof typeof SURFACE_SHARE;

/** Inputs for `surface`: its share of FUZZ_RUNS (the shares of all surfaces add up to FUZZ_RUNS). */
export function runsFor(surface: Surface): number {
  const names = Object.keys(SURFACE_SHARE) as Surface[];
  const floor = (s: Surface) => Math.floor(FUZZ_RUNS * SURFACE_SHARE[s]);
  const rest = FUZZ_RUNS - names.reduce((n, s) => n + floor(s), 0);
  return floor(surface) + (surface === names[0] ? rest : 0);
}

/** Inputs sent at once: one fast-check run is a batch of this many, sent concurrently. */
export const BATCH = 10;

/**
 * Runs `handle` on `runsFor(surface)` inputs from `arb` (rounded up to a whole batch), a
 * batch of {@link BATCH} at a time, concurrently. The first failing batch ends the run
 * unshrunk; fast-check prints its seed and path, which replay it (see README.md).
 */
export async function forEachInput<T>(surface: Surface, arb: fc.Arbitrary<T>, handle: (input: T) => Promise<void>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(arb, { minLength: BATCH, maxLength: BATCH }), async (inputs) => {
      await Promise.all(inputs.map(handle));
    }),
    { seed: FUZZ_SEED, numRuns: Math.ceil(runsFor(surface) / BATCH), endOnFailure: true, verbose: 1, ...replayPath() },
  );
}

/** FUZZ_PATH (fast-check's `path` of a failure) replays that batch first. */
function replayPath(): { path?: string } {
  return process.env.FUZZ_PATH ? { path: process.env.FUZZ_PATH } : {};
}

// --- protobuf wire bytes ------------------------------------------------------------------

export function varint(n: bigint | number): number[] {
  let v = BigInt(n);
  if (v < 0n) v += 1n << 64n;
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

export const tag = (field: number, wireType: number): number[] => varint(field * 8 + wireType);
export const lenField = (field: number, body: ArrayLike<number>): number[] => [
  ...tag(field, 2),
  ...varint(body.length),
  ...Array.from(body),
];

/** {@link lenField} for large bodies, without arrays of numbers. */
const lenFieldBuffer = (field: number, body: Buffer): Buffer =>
  Buffer.concat([Buffer.from([...tag(field, 2), ...varint(body.length)]), body]);

/** `pattern` repeated `times` times. */
const repeated = (pattern: number[], times: number): Buffer => Buffer.alloc(pattern.length * times).fill(Buffer.from(pattern));

/** The wire type a field's elements are written with (packed lists aside). */
export function wireTypeOf(field: DescField): number {
  if (field.fieldKind === 'map' || field.fieldKind === 'message') return 2;
  if (field.fieldKind === 'enum' || (field.fieldKind === 'list' && field.listKind === 'enum')) return 0;
  if (field.fieldKind === 'list' && field.listKind === 'message') return 2;
  const scalar = field.scalar;
  switch (scalar) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return 1;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return 5;
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return 2;
    default:
      return 0;
  }
}

function messageOf(field: DescField): DescMessage | undefined {
  if (field.fieldKind === 'message') return field.message;
  if (field.fieldKind === 'list' && field.listKind === 'message') return field.message;
  if (field.fieldKind === 'map' && field.mapKind === 'message') return field.message;
  return undefined;
}

const isString = (f: DescField) => f.scalar === ScalarType.STRING && f.fieldKind !== 'map';
const isRepeatedNumber = (f: DescField) => f.fieldKind === 'list' && f.listKind !== 'message' && wireTypeOf(f) !== 2;

/** A value of one field's element, as wire bytes after the tag. */
function fieldValue(field: DescField, depth: number): fc.Arbitrary<number[]> {
  const wt = wireTypeOf(field);
  const nested = messageOf(field);
  if (field.fieldKind === 'map') {
    const key =
      field.mapKey === ScalarType.STRING
        ? fc.string({ maxLength: 12 }).map((s) => lenField(1, Buffer.from(s)))
        : fc.nat().map((n) => [...tag(1, 0), ...varint(n)]);
    const value = nested
      ? validMessage(nested, depth + 1).map((b) => lenField(2, b))
      : fc.string({ maxLength: 12 }).map((s) => lenField(2, Buffer.from(s)));
    return fc.tuple(key, value).map(([k, v]) => {
      const body = [...k, ...v];
      return [...varint(body.length), ...body];
    });
  }
  if (nested) return validMessage(nested, depth + 1).map((b) => [...varint(b.length), ...b]);
  switch (wt) {
    case 0:
      return fc.oneof(fc.nat({ max: 300 }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })).map((n) => varint(n));
    case 1:
      return fc.uint8Array({ minLength: 8, maxLength: 8 }).map((b) => Array.from(b));
    case 5:
      return fc.uint8Array({ minLength: 4, maxLength: 4 }).map((b) => Array.from(b));
    default:
      return (isString(field) ? fc.string({ maxLength: 24 }).map((s) => Buffer.from(s)) : fc.uint8Array({ maxLength: 32 })).map((b) => [
        ...varint(b.length),
        ...b,
      ]);
  }
}

/** Well-formed bytes of `desc`: some of its fields set with values of their types (nested messages down to depth 3). */
export function validMessage(desc: DescMessage, depth = 0): fc.Arbitrary<number[]> {
  const fields = depth > 2 ? [] : desc.fields;
  if (fields.length === 0) return fc.constant([]);
  return fc
    .array(
      fc.constantFrom(...fields).chain((f) => fieldValue(f, depth).map((v) => [...tag(f.number, wireTypeOf(f)), ...v])),
      { maxLength: Math.min(6, fields.length + 1) },
    )
    .map((parts) => parts.flat());
}

/** A chain of message fields from `desc` to a field that `wanted` accepts (breadth first, a few levels). */
function pathTo(desc: DescMessage, wanted: (f: DescField) => boolean, maxDepth = 4): DescField[] | undefined {
  const queue: Array<{ desc: DescMessage; path: DescField[] }> = [{ desc, path: [] }];
  while (queue.length > 0) {
    const { desc: d, path } = queue.shift()!;
    for (const f of d.fields) {
      if (wanted(f)) return [...path, f];
      const next = messageOf(f);
      if (next && f.fieldKind !== 'map' && path.length < maxDepth) queue.push({ desc: next, path: [...path, f] });
    }
  }
  return undefined;
}

/** `leaf` (the bytes of the last field of `path`, tag included) wrapped in the messages of `path`. */
function wrap(path: DescField[], leaf: Buffer): Buffer {
  let bytes = leaf;
  for (let i = path.length - 2; i >= 0; i -= 1) bytes = lenFieldBuffer(path[i].number, bytes);
  return bytes;
}

/** The ways a request message is broken, each named for the figures. */
export const MUTATIONS = [
  'random',
  'flipped',
  'truncated',
  'wrong-wire-type',
  'length-past-end',
  'huge-repeated',
  'deep-nesting',
  'invalid-utf8',
] as const;
export type Mutation = (typeof MUTATIONS)[number];

/** Hostile bytes for a message of type `desc`, with the mutation that made them. */
export function hostileMessage(desc: DescMessage): fc.Arbitrary<{ mutation: Mutation; bytes: Buffer }> {
  const valid = validMessage(desc);
  const nonEmpty = valid.map((b) => (b.length > 1 ? b : [...b, ...lenField(1000, [1, 2, 3])]));
  const known = desc.fields;
  const out = (mutation: Mutation) => (bytes: number[] | Uint8Array) => ({
    mutation,
    bytes: Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes),
  });
  const arbs: Array<fc.Arbitrary<{ mutation: Mutation; bytes: Buffer }>> = [
    fc.uint8Array({ minLength: 1, maxLength: 200 }).map(out('random')),
    // A valid message with a few bytes changed; one with at least two bytes cut short. (An
    // empty message, of a type with no fields, gets an unknown field first: no filter that
    // could never pass.)
    fc
      .tuple(nonEmpty, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }))
      .map(([b, flips]) => {
        const copy = [...b];
        for (const [at, v] of flips) copy[at % copy.length] = v;
        return copy;
      })
      .map(out('flipped')),
    fc
      .tuple(nonEmpty, fc.nat())
      .map(([b, cut]) => b.slice(0, cut % b.length))
      .map(out('truncated')),
  ];
  if (known.length > 0) {
    const field = fc.constantFrom(...known);
    arbs.push(
      fc
        .tuple(field, fc.integer({ min: 0, max: 5 }), fc.uint8Array({ minLength: 1, maxLength: 12 }))
        .filter(([f, wt]) => wt !== wireTypeOf(f) && !(wt === 2 && isRepeatedNumber(f)))
        .map(([f, wt, payload]) => [...tag(f.number, wt), ...(wt === 2 ? [payload.length, ...payload] : Array.from(payload))])
        .map(out('wrong-wire-type')),
      fc
        .tuple(field, valid, fc.integer({ min: 1, max: 1 << 20 }))
        .map(([f, v, extra]) => [...v, ...tag(f.number, 2), ...varint(extra + 4), 1, 2, 3])
        .map(out('length-past-end')),
    );
  }
  const list = pathTo(desc, isRepeatedNumber) ?? pathTo(desc, (f) => f.fieldKind === 'list');
  arbs.push(
    fc.integer({ min: 100_001, max: 110_000 }).map((n) => {
      if (!list) return out('huge-repeated')(repeated([...tag(1000, 0), 1], n));
      const leaf = list.at(-1)!;
      // Packed varints when the list takes them; else that many empty elements.
      const body = isRepeatedNumber(leaf) ? lenFieldBuffer(leaf.number, Buffer.alloc(n, 1)) : repeated(lenField(leaf.number, []), n);
      return out('huge-repeated')(wrap(list, body));
    }),
  );
  arbs.push(
    fc.integer({ min: 150, max: 5_000 }).map((depth) => {
      // Unknown groups nested `depth` deep, inside a known message field where there is one.
      const groups = Buffer.concat([repeated(tag(999, 3), depth), repeated(tag(999, 4), depth)]);
      const chain = pathTo(desc, (f) => messageOf(f) !== undefined && f.fieldKind !== 'map', 0);
      return out('deep-nesting')(chain ? lenFieldBuffer(chain[0].number, groups) : groups);
    }),
  );
  const str = pathTo(desc, isString);
  if (str) {
    const leaf = str.at(-1)!;
    arbs.push(
      fc
        .tuple(
          fc.string({ maxLength: 8 }),
          fc.constantFrom([0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82]),
        )
        .map(([s, bad]) => wrap(str, Buffer.from(lenField(leaf.number, [...Buffer.from(s), ...bad]))))
        .map(out('invalid-utf8')),
    );
  }
  return fc.oneof(...arbs);
}

// --- hostile JSON -------------------------------------------------------------------------

/** A value of the wrong kind, a huge or odd number, deep nesting, odd strings. */
export const hostileJsonValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    -0,
    1e308,
    -1e308,
    2 ** 53 + 1,
    2 ** 64,
    4294967296,
    1e-320,
    '',
    ' ',
    '\u0000',
    '\ud800',
    'NaN',
    'Infinity',
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ minLength: 5000, maxLength: 20_000 }),
  fc.integer(),
  fc.double(),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
  fc.integer({ min: 100, max: 1500 }).map((d) => deepArray(d)),
  fc.integer({ min: 100, max: 1500 }).map((d) => deepObject(d)),
  // Own `__proto__` and `constructor` keys, as JSON.parse makes them.
  fc
    .constantFrom('{"__proto__":{"polluted":true}}', '{"constructor":{"prototype":{"polluted":true}}}')
    .map((t) => JSON.parse(t) as unknown),
);

function deepArray(depth: number): unknown {
  let v: unknown = [];
  for (let i = 0; i < depth; i += 1) v = [v];
  return v;
}

function deepObject(depth: number): unknown {
  let v: unknown = {};
  for (let i = 0; i < depth; i += 1) v = { a: v };
  return v;
}
