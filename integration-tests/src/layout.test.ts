/**
 * The package layout's promises, checked on the built workspace: the dependency rules catch
 * violations planted in a scratch tree, and importing the light packages (gateway,
 * scheduler, tensor-svc, client) does not load the ONNX runtime's native library.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DEPCRUISE = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const run = promisify(execFile);

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** Runs the project's dependency rules in `cwd` over `dirs`; returns the violations found. */
async function cruise(cwd: string, dirs: string[]): Promise<Violation[]> {
  const config = path.join(ROOT, '.dependency-cruiser.cjs');
  try {
    const { stdout } = await run(process.execPath, [DEPCRUISE, '--config', config, '--output-type', 'json', ...dirs], {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
    });
    return (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
  } catch (err) {
    // depcruise exits non-zero when it finds errors; the report is still on stdout.
    const stdout = (err as { stdout?: string }).stdout;
    if (!stdout) throw err;
    return (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
  }
}

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A scratch workspace: `files` (path → text), with workspace packages linked like npm does. */
function workspace(files: Record<string, string>, packages: string[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'diffmesh-layout-'));
  scratch.push(dir);
  cpSync(path.join(ROOT, 'tsconfig.base.json'), path.join(dir, 'tsconfig.base.json'));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  mkdirSync(path.join(dir, 'node_modules/@diffmesh'), { recursive: true });
  // Only the package's place matters to the rules: a stand-in with the real name will do.
  mkdirSync(path.join(dir, 'node_modules/onnxruntime-node'), { recursive: true });
  writeFileSync(
    path.join(dir, 'node_modules/onnxruntime-node/package.json'),
    JSON.stringify({ name: 'onnxruntime-node', main: 'index.js' }),
  );
  writeFileSync(path.join(dir, 'node_modules/onnxruntime-node/index.js'), 'module.exports = {};\n');
  for (const pkg of packages) {
    writeFileSync(
      path.join(dir, pkg, 'package.json'),
      JSON.stringify({ name: `@diffmesh/${pkg}`, type: 'module', exports: { '.': './src/index.ts' } }),
    );
    symlinkSync(path.join(dir, pkg), path.join(dir, 'node_modules/@diffmesh', pkg));
  }
  return dir;
}

describe('dependency rules', () => {
  it('pass on the repository as it is', async () => {
    const dirs = ['protos', 'core', 'discovery', 'tensor-client', 'media', 'stage-host', 'client', 'testing', 'models'];
    const services = ['scheduler', 'tensor-svc', 'encoder-svc', 'dit-svc', 'vae-svc', 'gateway', 'cli', 'integration-tests', 'bench'];
    expect(await cruise(ROOT, [...dirs, ...services])).toEqual([]);
  });

  it('fail on a cycle, a service importing a service, a library importing a service, a deep import and ONNX reachable from the gateway', async () => {
    const dir = workspace(
      {
        'core/src/index.ts': "export { a } from './a.js';\n",
        'core/src/a.ts': "import { b } from './b.js';\nexport const a = (): number => b() + 1;\n",
        'core/src/b.ts': "import { a } from './a.js';\nexport const b = (): number => (a ? 1 : 0);\n",
        'stage-host/src/index.ts': "import * as ort from 'onnxruntime-node';\nexport const runtime = ort;\n",
        'media/src/index.ts': "import { scheduler } from '@diffmesh/scheduler';\nexport const media = scheduler;\n",
        'scheduler/src/index.ts': 'export const scheduler = 1;\n',
        'scheduler/src/internal.ts': 'export const internal = 2;\n',
        'gateway/src/index.ts':
          "import { runtime } from '@diffmesh/stage-host';\nimport { scheduler } from '@diffmesh/scheduler';\n" +
          "import { internal } from '../../scheduler/src/internal.js';\nexport const all = [runtime, scheduler, internal];\n",
      },
      ['core', 'stage-host', 'media', 'scheduler', 'gateway'],
    );
    const found = await cruise(dir, ['core', 'stage-host', 'media', 'scheduler', 'gateway']);
    const rules = new Set(found.map((v) => v.rule.name));
    expect(rules).toEqual(
      new Set(['no-cycle', 'service-imports-service', 'library-imports-service', 'no-deep-imports', 'no-onnx-in-light-processes']),
    );
    expect(found.find((v) => v.rule.name === 'library-imports-service')).toMatchObject({ from: 'media/src/index.ts' });
    expect(found.find((v) => v.rule.name === 'no-onnx-in-light-processes')).toMatchObject({ from: 'gateway/src/index.ts' });
  });
});

/** Whether importing `specifier` in a fresh Node process maps the ONNX runtime's shared library. */
async function loadsOnnxRuntime(specifier: string): Promise<boolean> {
  const script = `await import(${JSON.stringify(specifier)});
const maps = (await import('node:fs')).readFileSync('/proc/self/maps', 'utf8');
process.stdout.write(/libonnxruntime|onnxruntime_binding/.test(maps) ? 'loaded' : 'not loaded');`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT });
  return stdout === 'loaded';
}

describe.runIf(process.platform === 'linux')('the ONNX runtime', () => {
  it('is loaded by the stage host (the check can tell)', async () => {
    expect(await loadsOnnxRuntime('@diffmesh/stage-host')).toBe(true);
  });

  it.each(['@diffmesh/gateway', '@diffmesh/scheduler', '@diffmesh/tensor-svc', '@diffmesh/client'])(
    'is not loaded by importing %s',
    async (pkg) => {
      expect(await loadsOnnxRuntime(pkg)).toBe(false);
    },
  );
});
