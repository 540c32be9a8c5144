import { z } from 'zod';
import { ConfigError, type Logger, redactUri } from '@diffmesh/core';
import { DurableLocationError, parseDurableLocation } from './durable-location.js';
import { openDurableStore } from './durable-stores.js';
import { MemoryTensorStore } from './memory-store.js';
import type { TensorStore } from './tensor-store.js';

/** Tensor store backends available in this build. */
export const TENSOR_STORE_BACKENDS = ['memory', 'redis', 's3'] as const;
export type TensorStoreBackend = (typeof TENSOR_STORE_BACKENDS)[number];

/** Configuration of a tensor store; embed it in a service config schema. */
export const TensorStoreConfigSchema = z.object({
  backend: z
    .enum(TENSOR_STORE_BACKENDS, {
      error: (iss) => `unknown tensor store backend ${JSON.stringify(iss.input)} (available: ${TENSOR_STORE_BACKENDS.join(', ')})`,
    })
    .default('memory')
    .describe('Tensor store backend'),
  location: z
    .string()
    .default('')
    .describe('redis and s3 backends: where objects go, redis://host:6379/0 or s3://bucket/prefix (redis: default REDIS_URL)'),
  s3Endpoint: z.string().default('').describe('s3 backend: endpoint of an S3-compatible server (empty = AWS, or AWS_ENDPOINT_URL_S3)'),
  capacityBytes: z
    .number()
    .int()
    .nonnegative()
    .default(2 * 1024 ** 3)
    .describe('Most bytes held at once; puts beyond it fail with STORE_FULL (redis/s3: 0 = no limit)'),
  defaultTtlMs: z
    .number()
    .int()
    .positive()
    .default(10 * 60_000)
    .describe('Time to live of objects put without one (ms)'),
  sweepIntervalMs: z
    .number()
    .int()
    .nonnegative()
    .default(10_000)
    .describe('How often expired objects are dropped (ms; 0 = never in the background)'),
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
  /** The environment (`REDIS_URL`, `AWS_*`). Default `{}`: nothing is read from the process's. */
  env?: Record<string, string | undefined>;
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
      if (cfg.capacityBytes === 0) {
        throw new ConfigError([
          { path: 'capacityBytes', source: 'tensor store config', message: 'must be positive for the memory backend' },
        ]);
      }
      return new MemoryTensorStore({ ...cfg, ...opts });
    case 'redis':
    case 's3': {
      const text = cfg.location || (cfg.backend === 'redis' ? (opts.env?.REDIS_URL ?? '') : '');
      const fail = (message: string): never => {
        throw new ConfigError([{ path: 'location', source: 'tensor store config', message }]);
      };
      if (!text) fail(cfg.backend === 'redis' ? 'is required (redis://host:6379/0), or set REDIS_URL' : 'is required (s3://bucket/prefix)');
      let location;
      try {
        location = parseDurableLocation(text);
      } catch (err) {
        if (err instanceof DurableLocationError) return fail(err.message);
        throw err;
      }
      if (location.kind !== cfg.backend) fail(`${redactUri(text)} is not a ${cfg.backend} location`);
      const endpoint = cfg.s3Endpoint || opts.env?.AWS_ENDPOINT_URL_S3 || opts.env?.AWS_ENDPOINT_URL;
      const region = opts.env?.AWS_REGION || opts.env?.AWS_DEFAULT_REGION;
      return openDurableStore(location, {
        defaultTtlMs: cfg.defaultTtlMs,
        capacityBytes: cfg.capacityBytes,
        sweepIntervalMs: cfg.sweepIntervalMs,
        retryAfterMs: cfg.retryAfterMs,
        ...(endpoint ? { s3Endpoint: endpoint } : {}),
        ...(region ? { s3Region: region } : {}),
        ...(opts.logger ? { logger: opts.logger } : {}),
      });
    }
  }
}
