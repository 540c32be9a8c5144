import { Option } from 'commander';
import { LOG_FORMATS, LogConfigSchema } from '@diffmesh/core';
import type { UpFlags } from '../mesh/up.js';
import type { CommandDefinition } from './command-definition.js';
import { logLevelOption, modelsDirOption } from './shared-options.js';

/** `diffmesh up`. */
export const upCommand: CommandDefinition = (cmd, exit) => {
  cmd
    .description('start a local mesh: nats-server and every service as its own process (Ctrl-C stops it)')
    .option('--nats <url>', 'use this NATS server instead of starting one')
    .option('--models <names>', 'models to serve (comma-separated)', 'diffmesh/tiny-shapes')
    .option('--gateway-listen <host:port>', 'HTTP address of the gateway', '127.0.0.1:8080')
    .option('--no-gateway', 'do not start the HTTP gateway')
    .addOption(modelsDirOption())
    .addOption(new Option('--threads <n>', 'onnxruntime threads per service').env('DIFFMESH_THREADS').default('1'))
    .addOption(
      new Option(
        '--execution-providers <spec>',
        'onnxruntime execution providers of the stage pools, in order of preference: a list for all (webgpu,cpu), or TARGET=LIST;… by pool or service (dit=webgpu,cpu;vae=webgpu,cpu)',
      ).env('DIFFMESH_EXECUTION_PROVIDERS'),
    )
    .addOption(
      new Option(
        '--tenants <file>',
        'tenants file (YAML/JSON: each tenant with its API keys, certificate identities, weight, limits); requests are scoped to their tenant',
      ).env('DIFFMESH_TENANTS_FILE'),
    )
    .addOption(
      new Option('--queue <backend>', 'where the schedulers keep requests and queues: memory, sqlite, redis or jetstream')
        .env('DIFFMESH_QUEUE')
        .default('sqlite'),
    )
    .addOption(
      new Option('--queue-url <url>', 'redis or NATS server of the queue (default: one started for the mesh)').env('DIFFMESH_QUEUE_URL'),
    )
    .addOption(new Option('--sqlite-path <file>', 'sqlite queue file (default: in the log folder)').env('DIFFMESH_SQLITE_PATH'))
    .option('--replicas <list>', 'processes per service, e.g. scheduler=2,dit=3 (scheduler, encoder, dit, vae, gateway)')
    .addOption(
      new Option(
        '--tensor-backend <backend>',
        "where tensor-svc keeps objects: memory (this node), redis or s3 (tensor-svc's --backend; without --tensor-durable the mesh starts the store)",
      )
        .env('DIFFMESH_TENSOR_BACKEND')
        .default('memory'),
    )
    .addOption(
      new Option(
        '--tensor-durable <uri>',
        "redis://host:port/db or s3://bucket/prefix: the store of backend redis/s3, or the write-through target of memory (tensor-svc's --durable)",
      ).env('DIFFMESH_TENSOR_DURABLE'),
    )
    .addOption(new Option('--s3-endpoint <url>', 'endpoint of an S3-compatible server for s3:// stores').env('DIFFMESH_TENSOR_S3_ENDPOINT'))
    .option(
      '--insecure',
      'run WITHOUT mutual TLS and NATS credentials (by default up makes a CA, certificates and NATS nkeys beside its state file)',
    )
    .addOption(logLevelOption())
    .addOption(
      new Option('--log-format <format>', `${LogConfigSchema.shape.format.description ?? 'log line format'}: of up and of every service`)
        .choices(LOG_FORMATS)
        .env('DIFFMESH_LOG_FORMAT')
        .default(LogConfigSchema.shape.format.parse(undefined)),
    )
    .action(async (flags: UpFlags) => {
      const { runUp } = await import('../mesh/up.js');
      exit(await runUp(flags));
    });
};
