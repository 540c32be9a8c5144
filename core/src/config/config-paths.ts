import type { z } from 'zod';

type Depth = [never, 0, 1, 2, 3];

/**
 * The dotted paths of a configuration object `T`: its fields and, for nested objects, theirs
 * (to 4 levels; a record such as `providerOptions` is set whole, as JSON).
 */
export type LeafPaths<T, D extends number = 4> = [D] extends [never]
  ? never
  : T extends readonly unknown[]
    ? never
    : T extends object
      ? {
          [K in keyof T & string]: NonNullable<T[K]> extends readonly unknown[]
            ? K
            : NonNullable<T[K]> extends object
              ? K | `${K}.${LeafPaths<NonNullable<T[K]>, Depth[D]>}`
              : K;
        }[keyof T & string]
      : never;

/**
 * A dotted path of schema `S` that an env variable or flag may set, e.g. `maxBatch` or
 * `log.level`: a misspelt path is a compile error where the mapping is written.
 */
export type ConfigPath<S extends z.ZodObject> = LeafPaths<z.input<S>> | (string extends LeafPaths<z.input<S>> ? string : never);

/** Values of schema `S` to hand to a child process as flags (see {@link configArgs}); nested objects partial too. */
export type ConfigValues<S extends z.ZodObject> = DeepPartial<z.input<S>>;

type DeepPartial<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { [K in keyof T]?: NonNullable<T[K]> extends readonly unknown[] ? T[K] : DeepPartial<T[K]> }
    : T;
