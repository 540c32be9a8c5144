import { z } from 'zod';
import { ConfigError, type Logger } from '@diffmesh/core';
import { MemoryDiscovery } from './memory.js';
import { DEFAULT_DISCOVERY_SUBJECT_PREFIX, NatsDiscovery } from './nats.js';
import { natsTlsOf } from './nats-connection.js';
import type { Discovery } from './types.js';

/** Discovery backends available in this build. */
export const DISCOVERY_BACKENDS = ['memory', 'nats'] as const;
export type DiscoveryBackend = (typeof DISCOVERY_BACKENDS)[number];

const SERVER_URL = /^(nats|tls|wss?):\/\/[^\s,]+$|^[^\s,/:]+:\d+$/;

/**
 * Configuration of discovery; embed it in a service config schema (e.g. as `discovery`,
 * with `DIFFMESH_NATS_URL` → `discovery.url`). `url` is required when `backend` is `nats`.
 */
export const DiscoveryConfigSchema = z
  .object({
    backend: z
      .enum(DISCOVERY_BACKENDS, {
        error: (iss) => `unknown discovery backend ${JSON.stringify(iss.input)} (available: ${DISCOVERY_BACKENDS.join(', ')})`,
      })
      .default('memory')
      .describe('Discovery backend: memory (in-process) or nats'),
    url: z
      .string()
      .refine((s) => s.split(',').every((u) => SERVER_URL.test(u.trim())), {
        message: 'expected a NATS URL such as nats://127.0.0.1:4222 (several separated by commas)',
      })
      .optional()
      .describe('NATS server URL(s), comma-separated; required for the nats backend'),
    pollIntervalMs: z.number().int().positive().default(1000).describe('How often watchers poll $SRV.STATS (ms)'),
    pollWindowMs: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('How long one poll collects answers (ms); default min(500, pollIntervalMs/2)'),
    missesBeforeDown: z.number().int().positive().default(2).describe('Consecutive missed polls before an instance is reported down'),
    subjectPrefix: z
      .string()
      .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, 'expected dot-separated tokens of letters, digits, "-" and "_"')
      .default(DEFAULT_DISCOVERY_SUBJECT_PREFIX)
      .describe('Prefix of the discovery notice and load subjects'),
    connectTimeoutMs: z.number().int().positive().default(5000).describe('Timeout of the first NATS connection (ms)'),
    connectionName: z.string().min(1).optional().describe('Client connection name shown by the NATS server'),
    credentialsFile: z
      .string()
      .optional()
      .describe('File with the NATS credentials: an nkey user seed (SU…), a .creds file or user:password (never the secret itself)'),
    tls: z
      .object({
        ca: z.string().optional().describe("PEM CA that signed the NATS server's certificate"),
        cert: z.string().optional().describe('PEM client certificate, for a server that verifies clients'),
        key: z.string().optional().describe('PEM private key of cert'),
      })
      .optional()
      .describe('TLS of the NATS connection (set: TLS only)'),
  })
  .superRefine((cfg, ctx) => {
    if (cfg.backend === 'nats' && !cfg.url) {
      ctx.addIssue({ code: 'custom', path: ['url'], message: 'is required for the nats backend (e.g. nats://127.0.0.1:4222)' });
    }
  });
export type DiscoveryConfig = z.output<typeof DiscoveryConfigSchema>;
export type DiscoveryConfigInput = z.input<typeof DiscoveryConfigSchema>;

/**
 * The nats discovery of a service config's NATS fields (`natsUrl`, `natsCredentials` and
 * `natsTlsConfigFields`): its credentials file and TLS files when they are set.
 */
export function natsDiscoveryConfigOf(cfg: {
  natsUrl: string;
  natsCredentials: string;
  natsTlsCa: string;
  natsTlsCert: string;
  natsTlsKey: string;
}): DiscoveryConfigInput {
  const tls = natsTlsOf(cfg);
  return {
    backend: 'nats',
    url: cfg.natsUrl,
    ...(cfg.natsCredentials ? { credentialsFile: cfg.natsCredentials } : {}),
    ...(tls ? { tls } : {}),
  };
}

/**
 * Creates a discovery from configuration: `{ backend: 'memory' }` (the default) or
 * `{ backend: 'nats', url, pollIntervalMs?, … }`, which connects before resolving. Throws
 * {@link ConfigError} for invalid settings and `DiffmeshError` `UNAVAILABLE` when NATS
 * cannot be reached.
 */
export async function createDiscovery(config: DiscoveryConfigInput = {}, log?: Logger): Promise<Discovery> {
  const parsed = DiscoveryConfigSchema.safeParse(config);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => ({ path: i.path.map(String).join('.'), source: 'discovery config', message: i.message })),
    );
  }
  const cfg = parsed.data;
  switch (cfg.backend) {
    case 'memory':
      return new MemoryDiscovery({ ...(log ? { log } : {}) });
    case 'nats':
      return NatsDiscovery.connect(
        cfg.url!.split(',').map((u) => u.trim()),
        {
          ...(log ? { log } : {}),
          pollIntervalMs: cfg.pollIntervalMs,
          ...(cfg.pollWindowMs !== undefined ? { pollWindowMs: cfg.pollWindowMs } : {}),
          missesBeforeDown: cfg.missesBeforeDown,
          subjectPrefix: cfg.subjectPrefix,
          connectTimeoutMs: cfg.connectTimeoutMs,
          ...(cfg.connectionName !== undefined ? { connectionName: cfg.connectionName } : {}),
          ...(cfg.credentialsFile ? { credentialsFile: cfg.credentialsFile } : {}),
          ...(cfg.tls ? { tls: cfg.tls } : {}),
        },
      );
  }
}
