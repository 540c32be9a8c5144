import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildTestModelDirs, TEST_MODEL_DIRS } from './test-model-dirs.js';

export const TEST_DIRS_USAGE = `usage: node models/dist/cli.js test-dirs [--out DIR] [--only NAME[,NAME…]] [--extra-work SIZExPRODUCTS] [--list]

Builds the diffusers/optimum-layout test model directories (analytic models with known
answers, and broken ones for validation tests) into DIR/<name>/ (default: models/generated/test-dirs).
--extra-work sets the matrix products the UNet of sd1-slow runs per call (default 2048x12,
about 1.5 s on 2 cores; 2048x30 takes about 4 s): the picture is the same, the calls longer.
`;

/** `test-dirs` command of the models CLI; returns the exit code. */
export async function testDirsMain(argv: string[], defaultRoot: string): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      out: { type: 'string' },
      only: { type: 'string', multiple: true },
      'extra-work': { type: 'string' },
      list: { type: 'boolean', default: false },
    },
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
  let extraWork: { size: number; products: number } | undefined;
  if (values['extra-work'] !== undefined) {
    const m = /^(\d+)x(\d+)$/.exec(values['extra-work']);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > 8192) {
      process.stderr.write(`error: --extra-work: expected SIZExPRODUCTS with SIZE 1–8192, e.g. 2048x30; got "${values['extra-work']}"\n`);
      return 2;
    }
    extraWork = { size: Number(m[1]), products: Number(m[2]) };
  }
  const outRoot = path.resolve(values.out ?? path.join(defaultRoot, 'test-dirs'));
  const started = performance.now();
  const built = await buildTestModelDirs(outRoot, only, extraWork ? { extraWork } : {});
  const where = path.relative(process.cwd(), outRoot) || outRoot;
  process.stdout.write(
    `✓ ${Object.keys(built).length} test model directories in ${((performance.now() - started) / 1000).toFixed(1)} s → ${where}\n`,
  );
  return 0;
}
