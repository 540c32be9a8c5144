import { z } from 'zod';
import { ConfigError } from '../config/index.js';
import type { Logger } from '../logging/index.js';
import { MemoryTensorStore } from './memory.js';
import type { TensorStore } from './types.js';

/** Tensor store backends available in this build. */
export const TENSOR_STORE_BACKENDS = ['memory'] as const;
export type TensorStoreBackend = (typeof TENSOR_STORE_BACKENDS)[number];

/** Configuration of a tensor store; embed it in a service config schema. */
export const TensorStoreConfigSchema = z.object({
  backend: z
    .enum(TENSOR_STORE_BACKENDS, {
      error: (iss) =>
        `unknown tensor store backend ${JSON.stringify(iss.input)} (available: ${TENSOR_STORE_BACKENDS.join(', ')})`,
    })
    .default('memory')
    .describe('Tensor store backend'),
  capacityBytes: z
    .number()
    .int()
    .positive()
    .default(2 * 1024 ** 3)
    .describe('Most bytes held at once; puts beyond it fail with STORE_FULL'),
  defaultTtlMs: z
    .number()
    .int()
    .positive()
    .default(10 * 60_000)
    .describe('Time to live of objects put without one (ms)'),
  sweepIntervalMs: z.number().int().nonnegative().default(10_000).describe('How often expired objects are dropped (ms; 0 = never in the background)'),
  retryAfterMs: z.number().int().positive().default(1000).describe('Retry-After suggested on STORE_FULL (ms)'),
});
export type TensorStoreConfig = z.output<typeof TensorStoreConfigSchema>;
export type TensorStoreConfigInput = z.input<typeof TensorStoreConfigSchema>;

/** Non-configuration inputs of {@link createTensorStore}. */
export interface CreateTensorStoreOptions {
  /** Written into refs as `ownerNodeId`. Default `local`. */
  nodeId?: string;
  /** Written into refs as `ownerAddress` (the serving tensor-svc); `''` in-process. */
  address?: string;
  logger?: Logger;
  /** Clock, for tests. */
  now?: () => number;
}

/**
 * Creates a tensor store from configuration. Throws {@link ConfigError} for an unknown
 * backend or invalid settings.
 */
export function createTensorStore(config: TensorStoreConfigInput, opts: CreateTensorStoreOptions = {}): TensorStore {
  const parsed = TensorStoreConfigSchema.safeParse(config);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), source: 'tensor store config', message: i.message })),
    );
  }
  const cfg = parsed.data;
  switch (cfg.backend) {
    case 'memory':
      return new MemoryTensorStore({ ...cfg, ...opts });
  }
}
