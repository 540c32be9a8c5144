import { describe, expect, it } from 'vitest';
import { runDiffmesh } from './fixtures/run-cli.js';
import { UpConfigSchema, upOptions } from './mesh/up-config.js';

/** Each option of a `--help` text: its flag and the env variable the help names for it. */
function helpOptions(help: string): { flag: string; env?: string }[] {
  const blocks = help
    .slice(help.indexOf('Options:'))
    .split(/\n(?= {2}-)/)
    .slice(1);
  return blocks.map((block) => {
    const text = block.replace(/\s+/g, ' ');
    const flag = /--[a-z0-9-]+/.exec(text)?.[0] ?? '';
    const env = /env: (DIFFMESH_[A-Z0-9_]+)\)/.exec(text)?.[1];
    return env === undefined ? { flag } : { flag, env };
  });
}

describe('diffmesh up: flags from UpConfigSchema', () => {
  it('every flag in `up --help` maps to a schema field, with that field’s env variable, and every field has a flag', async () => {
    const run = await runDiffmesh(['up', '--help']);
    expect(run.code).toBe(0);
    const { definition } = upOptions();
    const fields = Object.keys(UpConfigSchema.shape);
    const seen = new Set<string>();
    for (const { flag, env } of helpOptions(run.stdout)) {
      if (flag === '--help') continue;
      const name = flag.replace(/^--(no-)?/, '');
      const field = definition.flags[name];
      expect(field, `${flag} has no schema field`).toBeDefined();
      expect(fields).toContain(field);
      const declaredEnv = Object.entries(definition.env).find(([, p]) => p === field)?.[0];
      expect(env, `${flag}'s env variable`).toBe(declaredEnv === undefined ? undefined : `DIFFMESH_${declaredEnv}`);
      seen.add(field);
    }
    expect([...seen].sort()).toEqual([...fields].sort());
  });

  it('keeps the flag names and env variables of before (and --lora-dir, added since)', async () => {
    const run = await runDiffmesh(['up', '--help']);
    const options = helpOptions(run.stdout);
    expect(options.map((o) => o.flag)).toEqual([
      '--nats',
      '--models',
      '--gateway-listen',
      '--no-gateway',
      '--models-dir',
      '--threads',
      '--execution-providers',
      '--tenants',
      '--queue',
      '--queue-url',
      '--sqlite-path',
      '--replicas',
      '--tensor-backend',
      '--tensor-durable',
      '--s3-endpoint',
      '--lora-dir',
      '--insecure',
      '--log-level',
      '--log-format',
      '--help',
    ]);
    expect(Object.fromEntries(options.filter((o) => o.env).map((o) => [o.flag, o.env]))).toEqual({
      '--models-dir': 'DIFFMESH_MODELS_DIR',
      '--threads': 'DIFFMESH_THREADS',
      '--execution-providers': 'DIFFMESH_EXECUTION_PROVIDERS',
      '--tenants': 'DIFFMESH_TENANTS_FILE',
      '--queue': 'DIFFMESH_QUEUE',
      '--queue-url': 'DIFFMESH_QUEUE_URL',
      '--sqlite-path': 'DIFFMESH_SQLITE_PATH',
      '--tensor-backend': 'DIFFMESH_TENSOR_BACKEND',
      '--tensor-durable': 'DIFFMESH_TENSOR_DURABLE',
      '--s3-endpoint': 'DIFFMESH_TENSOR_S3_ENDPOINT',
      '--lora-dir': 'DIFFMESH_LORA_DIR',
      '--log-level': 'DIFFMESH_LOG_LEVEL',
      '--log-format': 'DIFFMESH_LOG_FORMAT',
    });
  });

  it('reads a flag from its env variable, and names the flag when the value is bad (nothing starts)', async () => {
    const fromEnv = await runDiffmesh(['up', '--insecure'], { env: { DIFFMESH_QUEUE: 'postgres' } });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('queue: expected one of memory, sqlite, redis, jetstream, got "postgres" (--queue)');
    const fromFlag = await runDiffmesh(['up', '--insecure', '--tensor-backend', 'tape']);
    expect(fromFlag.code).toBe(2);
    expect(fromFlag.stderr).toContain('tensor-backend: expected memory, redis or s3, got "tape" (--tensor-backend)');
    const choices = await runDiffmesh(['up', '--log-level', 'loud']);
    expect(choices.code).toBe(2);
    expect(choices.stderr).toMatch(/--log-level.*loud/);
  });
});
