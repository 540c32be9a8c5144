import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildTestModelDirs, TEST_MODEL_DIRS } from './test-model-dirs.js';

export const TEST_DIRS_USAGE = `usage: node models/dist/cli.js test-dirs [--out DIR] [--only NAME[,NAME…]] [--list]

Builds the diffusers/optimum-layout test model directories (analytic models with known
answers, and broken ones for validation tests) into DIR/<name>/ (default: models/generated/test-dirs).
`;

/** `test-dirs` command of the models CLI; returns the exit code. */
export async function testDirsMain(argv: string[], defaultRoot: string): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { out: { type: 'string' }, only: { type: 'string', multiple: true }, list: { type: 'boolean', default: false } },
    strict: true,
  });
  if (values.list) {
    for (const name of Object.keys(TEST_MODEL_DIRS)) process.stdout.write(`${name}\n`);
    return 0;
  }
  const only = values.only
    ?.flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
  const unknown = (only ?? []).filter((n) => !(n in TEST_MODEL_DIRS));
  if (unknown.length > 0) {
    process.stderr.write(`error: unknown test directory ${unknown.join(', ')}; known: ${Object.keys(TEST_MODEL_DIRS).join(', ')}\n`);
    return 2;
  }
  const outRoot = path.resolve(values.out ?? path.join(defaultRoot, 'test-dirs'));
  const started = performance.now();
  const built = await buildTestModelDirs(outRoot, only);
  const where = path.relative(process.cwd(), outRoot) || outRoot;
  process.stdout.write(
    `✓ ${Object.keys(built).length} test model directories in ${((performance.now() - started) / 1000).toFixed(1)} s → ${where}\n`,
  );
  return 0;
}
