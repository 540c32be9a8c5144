import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { runDiffmesh } from './fixtures/run-cli.js';

const own = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('diffmesh --version, -V and --help', () => {
  it('prints the version with --version and -V', async () => {
    for (const flag of ['--version', '-V']) {
      const run = await runDiffmesh([flag]);
      expect(run.code, flag).toBe(0);
      expect(run.stdout).toBe(`${own}\n`);
    }
  });

  it('prints the versions of diffmesh, onnxruntime-node and Node with --version --json', async () => {
    const run = await runDiffmesh(['--version', '--json']);
    expect(run.code).toBe(0);
    const ort = (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version;
    expect(JSON.parse(run.stdout)).toEqual({ diffmesh: own, onnxruntimeNode: ort, node: process.versions.node });
  });

  it('lists every command in --help, and a command’s own flags in its --help (up: --log-format)', async () => {
    const help = await runDiffmesh(['--help']);
    expect(help.code).toBe(0);
    for (const name of ['generate', 'submit', 'watch', 'cancel', 'models', 'up', 'status', 'plan-pools', 'gpu', 'adapters']) {
      expect(help.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    }
    const up = await runDiffmesh(['up', '--help']);
    expect(up.code).toBe(0);
    expect(up.stdout).toMatch(/--log-format <format>[\s\S]*\(choices: "json", "pretty", default: "json",\s+env: DIFFMESH_LOG_FORMAT\)/);
    const bad = await runDiffmesh(['up', '--log-format', 'yaml']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--log-format.*yaml/);
  });
});
