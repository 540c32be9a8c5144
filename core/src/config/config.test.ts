import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, defineConfig, formatConfigTable, listEnvVars, listFlags, loadConfig } from './index.js';

const schema = z.object({
  scheduler: z.object({
    maxQueueLength: z.number().int().positive().default(1000).describe('Tasks a pool queue holds before QUEUE_FULL'),
    pools: z.array(z.string()).default([]),
    tracing: z.boolean().default(false),
  }),
  grpc: z.object({
    port: z.number().int().min(0).max(65535).default(50051),
    host: z.string().default('0.0.0.0'),
  }),
  log: z.object({ level: z.enum(['debug', 'info', 'warn']).default('info') }),
  nodeId: z.string().min(1).describe('Node identity'),
});

// Defaults on nested objects come from their fields; `prefault({})` lets a missing section default.
const withSections = z.object({
  scheduler: schema.shape.scheduler.prefault({}),
  grpc: schema.shape.grpc.prefault({}),
  log: schema.shape.log.prefault({}),
  nodeId: schema.shape.nodeId.default('local'),
});

const def = defineConfig({
  name: 'scheduler',
  schema: withSections,
  envPrefix: 'DIFFMESH_SCHEDULER_',
  env: {
    MAX_QUEUE: 'scheduler.maxQueueLength',
    POOLS: 'scheduler.pools',
    TRACING: 'scheduler.tracing',
    PORT: 'grpc.port',
    LOG_LEVEL: 'log.level',
    NODE_ID: 'nodeId',
  },
  flags: { 'max-queue': 'scheduler.maxQueueLength', port: 'grpc.port', tracing: 'scheduler.tracing' },
});

const dir = mkdtempSync(path.join(tmpdir(), 'diffmesh-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('uses schema defaults when nothing is given', () => {
    const cfg = loadConfig(def, { env: {} });
    expect(cfg).toEqual({
      scheduler: { maxQueueLength: 1000, pools: [], tracing: false },
      grpc: { port: 50051, host: '0.0.0.0' },
      log: { level: 'info' },
      nodeId: 'local',
    });
  });

  it('layers file < env < flags', () => {
    const f = file('layers.yaml', 'scheduler:\n  maxQueueLength: 10\n  tracing: true\ngrpc:\n  port: 1\n  host: 127.0.0.1\n');
    const cfg = loadConfig(def, {
      file: f,
      env: { DIFFMESH_SCHEDULER_MAX_QUEUE: '20', DIFFMESH_SCHEDULER_PORT: '2', DIFFMESH_SCHEDULER_POOLS: 'a, b' },
      argv: ['--port', '3', '--no-tracing'],
    });
    expect(cfg.scheduler).toEqual({ maxQueueLength: 20, pools: ['a', 'b'], tracing: false });
    expect(cfg.grpc).toEqual({ port: 3, host: '127.0.0.1' });
  });

  it('reads JSON files and finds the file through --config or {prefix}CONFIG', () => {
    const json = file('c.json', JSON.stringify({ grpc: { port: 7 } }));
    expect(loadConfig(def, { env: {}, argv: ['--config', json] }).grpc.port).toBe(7);
    expect(loadConfig(def, { env: { DIFFMESH_SCHEDULER_CONFIG: json } }).grpc.port).toBe(7);
    const yaml = file('d.yaml', 'grpc: { port: 8 }');
    expect(loadConfig(def, { env: { DIFFMESH_SCHEDULER_CONFIG: json }, argv: [`--config=${yaml}`] }).grpc.port).toBe(8);
  });

  it('accepts flag values parsed elsewhere, over argv', () => {
    const cfg = loadConfig(def, { env: {}, argv: ['--max-queue=5'], flags: { 'max-queue': 6, port: '9' } });
    expect(cfg.scheduler.maxQueueLength).toBe(6);
    expect(cfg.grpc.port).toBe(9);
  });

  it('ignores undeclared env vars instead of guessing', () => {
    const cfg = loadConfig(def, { env: { DIFFMESH_SCHEDULER_GRPC_HOST: '1.2.3.4', DIFFMESH_SCHEDULER_MAX_QUEUE: '' } });
    expect(cfg.grpc.host).toBe('0.0.0.0');
    expect(cfg.scheduler.maxQueueLength).toBe(1000);
  });

  it('names the field and the env var of a bad value', () => {
    const err = errorOf(() => loadConfig(def, { env: { DIFFMESH_SCHEDULER_MAX_QUEUE: '-4' } }));
    expect(err.message).toMatch(/^config: scheduler\.maxQueueLength \(from env DIFFMESH_SCHEDULER_MAX_QUEUE\): .*>0/);
    expect(err.issues).toHaveLength(1);
  });

  it('reports every bad field at once, each with its source', () => {
    const f = file('bad.yaml', 'grpc:\n  port: 70000\nlog:\n  level: loud\n');
    const err = errorOf(() =>
      loadConfig(def, {
        file: f,
        env: { DIFFMESH_SCHEDULER_MAX_QUEUE: 'lots', DIFFMESH_SCHEDULER_TRACING: 'maybe' },
        argv: ['--port=abc'],
      }),
    );
    const lines = err.message.split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        'config: scheduler.maxQueueLength (from env DIFFMESH_SCHEDULER_MAX_QUEUE): expected a number, got "lots"',
        'config: scheduler.tracing (from env DIFFMESH_SCHEDULER_TRACING): expected true or false, got "maybe"',
        'config: grpc.port (from flag --port): expected a number, got "abc"',
        expect.stringMatching(new RegExp(`^config: log\\.level \\(from file ${escape(f)}\\): Invalid option`)),
      ]),
    );
    expect(lines).toHaveLength(4);
  });

  it('says how to set a required field that is missing', () => {
    const strict = defineConfig({ name: 'x', schema, envPrefix: 'X_', env: { NODE_ID: 'nodeId' } });
    const err = errorOf(() => loadConfig(strict, { env: {} }));
    expect(err.message).toContain('config: nodeId (not set): required; set file key nodeId, env X_NODE_ID');
  });

  it('rejects unknown keys in the file, unknown flags and stray arguments', () => {
    const f = file('typo.yaml', 'scheduler:\n  maxQueueLenght: 3\n');
    const err = errorOf(() => loadConfig(def, { file: f, env: {}, argv: ['--prot', '1', 'extra'] }));
    expect(err.message).toContain(`config: scheduler.maxQueueLenght (from file ${f}): unknown key`);
    expect(err.message).toContain('config: flag --prot: unknown flag');
    expect(err.message).toContain('config: argument "extra": unexpected argument');
  });

  it('reports a missing or unparsable file', () => {
    const missing = path.join(dir, 'nope.yaml');
    expect(errorOf(() => loadConfig(def, { file: missing, env: {} })).message).toBe(`config: file ${missing}: file not found`);
    const broken = file('broken.yaml', 'grpc: [1, 2\n');
    expect(errorOf(() => loadConfig(def, { file: broken, env: {} })).message).toMatch(/^config: file .*broken\.yaml: cannot parse/);
    const list = file('list.yaml', '- 1\n- 2\n');
    expect(errorOf(() => loadConfig(def, { file: list, env: {} })).message).toContain('top level must be a mapping');
  });

  it('flags undeclared prefixed env vars when strictEnv is on', () => {
    const err = errorOf(() => loadConfig(def, { env: { DIFFMESH_SCHEDULER_MAX_QUEU: '3' }, strictEnv: true }));
    expect(err.message).toMatch(/^config: env DIFFMESH_SCHEDULER_MAX_QUEU: unknown variable/);
  });
});

describe('defineConfig', () => {
  it('rejects mappings onto fields the schema lacks', () => {
    // A typed caller cannot write this (the path is checked at compile time); an untyped one gets the message.
    const env: Record<string, never> = JSON.parse('{"X":"grpc.nope"}');
    expect(() => defineConfig({ name: 's', schema, env })).toThrow(/env X: schema has no field "grpc.nope"/);
    expect(() => defineConfig({ name: 's', schema, flags: { config: 'nodeId' } })).toThrow(/--config is reserved/);
  });
});

describe('listing', () => {
  it('lists env vars with type, default and description', () => {
    const vars = listEnvVars(def);
    expect(vars[0]).toMatchObject({ name: 'DIFFMESH_SCHEDULER_CONFIG', type: 'path' });
    expect(vars.find((v) => v.name === 'DIFFMESH_SCHEDULER_MAX_QUEUE')).toEqual({
      name: 'DIFFMESH_SCHEDULER_MAX_QUEUE',
      path: 'scheduler.maxQueueLength',
      flag: '--max-queue',
      type: 'integer',
      required: false,
      default: 1000,
      description: 'Tasks a pool queue holds before QUEUE_FULL',
    });
    expect(vars.find((v) => v.name === 'DIFFMESH_SCHEDULER_LOG_LEVEL')?.type).toBe('one of debug|info|warn');
    expect(vars.find((v) => v.name === 'DIFFMESH_SCHEDULER_POOLS')?.type).toBe('comma-separated list of string');
    expect(listFlags(def).map((f) => f.flag)).toEqual(['--config', '--max-queue', '--port', '--tracing']);
  });

  it('formats a markdown table', () => {
    const table = formatConfigTable(def);
    expect(table).toContain(
      '| `scheduler.maxQueueLength` | `DIFFMESH_SCHEDULER_MAX_QUEUE` | `--max-queue` | integer | `1000` | Tasks a pool queue holds before QUEUE_FULL |',
    );
    expect(table).toContain('one of debug\\|info\\|warn');
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
