import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LogConfigSchema, logConfigMappings } from '../logging/log-config.js';
import { configArgs, schemaMappings } from './config-fields.js';
import type { ConfigValues } from './config-paths.js';
import { defineConfig, loadConfig } from './config.js';

const schema = z.object({
  natsUrl: z.string().default(''),
  maxBatch: z.number().int().positive().default(8),
  s3Endpoint: z.string().default(''),
  models: z.array(z.string()).default([]),
  warm: z.boolean().default(true),
  providerOptions: z.record(z.string(), z.unknown()).default({}),
  log: LogConfigSchema.prefault({}),
});

function definition(): ReturnType<typeof defineConfig<typeof schema>> {
  const fields = schemaMappings(schema, { natsUrl: { flag: 'nats' } });
  return defineConfig({
    name: 'svc',
    schema,
    envPrefix: 'SVC_',
    env: { ...fields.env, ...logConfigMappings().env },
    flags: { ...fields.flags, ...logConfigMappings().flags },
  });
}

describe('schemaMappings', () => {
  it('names each field once: kebab-case flags and upper snake env variables, with the given exceptions', () => {
    const m = schemaMappings(schema, { natsUrl: { flag: 'nats' } });
    expect(m.flags).toEqual({
      nats: 'natsUrl',
      'max-batch': 'maxBatch',
      's3-endpoint': 's3Endpoint',
      models: 'models',
      warm: 'warm',
      'provider-options': 'providerOptions',
    });
    expect(m.env).toMatchObject({ NATS_URL: 'natsUrl', MAX_BATCH: 'maxBatch', S3_ENDPOINT: 's3Endpoint' });
    // A section (an object) brings its own mappings.
    expect(Object.values(m.env)).not.toContain('log');
  });
});

describe('configArgs', () => {
  it('builds the arguments a child process reads back as the same values', () => {
    const def = definition();
    const values: ConfigValues<typeof schema> = {
      natsUrl: 'nats://127.0.0.1:4999',
      maxBatch: 4,
      models: ['a/b', 'c/d'],
      warm: false,
      providerOptions: { webgpu: { validationMode: 'disabled' } },
      log: { level: 'debug', format: 'pretty' },
    };
    const args = configArgs(def, values);
    expect(args).toEqual([
      '--nats',
      'nats://127.0.0.1:4999',
      '--max-batch',
      '4',
      '--models',
      'a/b,c/d',
      '--warm=false',
      '--provider-options',
      '{"webgpu":{"validationMode":"disabled"}}',
      '--log-level',
      'debug',
      '--log-format',
      'pretty',
    ]);
    expect(loadConfig(def, { argv: args, env: {} })).toMatchObject(values);
  });

  it('refuses a field no flag sets', () => {
    const def = defineConfig({ name: 'svc', schema, flags: { 'max-batch': 'maxBatch' } });
    expect(() => configArgs(def, { maxBatch: 2, models: ['x'] })).toThrow(/no flag sets "models"/);
  });
});

describe('log format', () => {
  it('is json unless a flag or the env variable says pretty; anything else is refused naming the field', () => {
    const def = definition();
    expect(loadConfig(def, { env: {} }).log.format).toBe('json');
    expect(loadConfig(def, { env: { SVC_LOG_FORMAT: 'pretty' } }).log.format).toBe('pretty');
    expect(() => loadConfig(def, { argv: ['--log-format', 'yaml'], env: {} })).toThrow(/log\.format \(from flag --log-format\)/);
  });
});
