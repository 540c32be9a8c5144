import { LogConfigSchema, LogLevelSchema } from '@diffmesh/core';
import { z } from 'zod';
import { schemaOptions, type FlagFieldNames } from '../commands/schema-options.js';

/**
 * The options of `diffmesh up`, declared once: each field is a flag (`--<kebab-name>`), its
 * env variable (`DIFFMESH_<UPPER_SNAKE_NAME>` unless {@link UP_FIELD_NAMES} says otherwise),
 * its default and its `--help` line; `UpFlags` is what commander hands the command. Values
 * that `up` checks itself (a count, a backend name) stay strings here, so a bad one gets up's
 * own message naming the flag.
 */
export const UpConfigSchema = z.object({
  nats: z.string().optional().describe('use this NATS server instead of starting one'),
  models: z.string().default('diffmesh/tiny-shapes').describe('models to serve (comma-separated)'),
  gatewayListen: z.string().default('127.0.0.1:8080').describe('HTTP address of the gateway'),
  gateway: z.boolean().default(true).describe('start the HTTP gateway'),
  modelsDir: z.array(z.string()).optional().describe('folders holding <org>/<name>/model.json (default: the built-in models)'),
  threads: z.string().default('1').describe('onnxruntime threads per service'),
  executionProviders: z
    .string()
    .optional()
    .describe(
      'onnxruntime execution providers of the stage pools, in order of preference: a list for all (webgpu,cpu), or TARGET=LIST;… by pool or service (dit=webgpu,cpu;vae=webgpu,cpu)',
    ),
  tenants: z
    .string()
    .optional()
    .describe(
      'tenants file (YAML/JSON: each tenant with its API keys, certificate identities, weight, limits); requests are scoped to their tenant',
    ),
  queue: z.string().default('sqlite').describe('where the schedulers keep requests and queues: memory, sqlite, redis or jetstream'),
  queueUrl: z.string().optional().describe('redis or NATS server of the queue (default: one started for the mesh)'),
  sqlitePath: z.string().optional().describe('sqlite queue file (default: in the log folder)'),
  replicas: z.string().optional().describe('processes per service, e.g. scheduler=2,dit=3 (scheduler, encoder, dit, vae, gateway)'),
  tensorBackend: z
    .string()
    .default('memory')
    .describe(
      "where tensor-svc keeps objects: memory (this node), redis or s3 (tensor-svc's --backend; without --tensor-durable the mesh starts the store)",
    ),
  tensorDurable: z
    .string()
    .optional()
    .describe(
      "redis://host:port/db or s3://bucket/prefix: the store of backend redis/s3, or the write-through target of memory (tensor-svc's --durable)",
    ),
  s3Endpoint: z.string().optional().describe('endpoint of an S3-compatible server for s3:// stores'),
  loraDir: z
    .string()
    .optional()
    .describe(
      'folder of LoRA adapter files (<name>.safetensors) the text-encoding and denoising stages serve; requests name them in adapters (diffmesh adapters add writes there)',
    ),
  insecure: z
    .boolean()
    .optional()
    .describe('run WITHOUT mutual TLS and NATS credentials (by default up makes a CA, certificates and NATS nkeys beside its state file)'),
  logLevel: LogLevelSchema.default('warn').describe('log level on stderr'),
  logFormat: LogConfigSchema.shape.format.describe(
    `${LogConfigSchema.shape.format.description ?? 'log line format'}: of up and of every service`,
  ),
});

/** The flags of `diffmesh up`, as commander parses them. */
export type UpFlags = z.output<typeof UpConfigSchema>;

/**
 * What the field names do not say: the value names in `--help`, the env variables named
 * otherwise (`DIFFMESH_TENANTS_FILE`, `DIFFMESH_TENSOR_S3_ENDPOINT`), and the flags with no env
 * variable (`--insecure` stays an explicit choice on the command line; `DIFFMESH_GATEWAY_…` and
 * `DIFFMESH_NATS…` names belong to the services).
 */
export const UP_FIELD_NAMES: Partial<Record<keyof UpFlags, FlagFieldNames>> = {
  nats: { value: 'url', env: false },
  models: { value: 'names', env: false },
  gatewayListen: { value: 'host:port', env: false },
  gateway: { env: false },
  modelsDir: { value: 'dir' },
  threads: { value: 'n' },
  executionProviders: { value: 'spec' },
  tenants: { value: 'file', env: 'TENANTS_FILE' },
  queue: { value: 'backend' },
  queueUrl: { value: 'url' },
  sqlitePath: { value: 'file' },
  replicas: { value: 'list', env: false },
  tensorBackend: { value: 'backend' },
  loraDir: { value: 'dir' },
  tensorDurable: { value: 'uri' },
  s3Endpoint: { value: 'url', env: 'TENSOR_S3_ENDPOINT' },
  insecure: { env: false },
  logLevel: { value: 'level' },
  logFormat: { value: 'format' },
};

/** The config definition and commander options of `diffmesh up` (env prefix `DIFFMESH_`). */
export function upOptions(): ReturnType<typeof schemaOptions<typeof UpConfigSchema>> {
  return schemaOptions('diffmesh up', UpConfigSchema, 'DIFFMESH_', UP_FIELD_NAMES);
}
