#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  BUILTIN_MODELS,
  BuildModelsError,
  type BuildResult,
  buildModels,
  builtinModelDir,
  defaultModelsRoot,
  isBuiltinModel,
} from './build.js';

const USAGE = `usage: node models/dist/cli.js <command> [options]

commands:
  build   build the built-in models (skips models whose .build-hash is current)
            --only NAME   build only NAME (repeatable, or comma-separated)
            --force       rebuild even when up to date
            --out DIR     output root (default: ${path.relative(process.cwd(), defaultModelsRoot()) || '.'})
  list    print the built-in model names
  time    time each stage of built models at their default size with onnxruntime-node
            --only NAME   time only NAME (repeatable, or comma-separated)
            --out DIR     models root to read from
            --threads N   intra-op threads (default 2)
            --runs N      timed runs per measurement (default 5)
  test-dirs  build the diffusers/optimum-layout test model directories
            (--out DIR, --only NAME, --list; see models/README.md)
  help    print this text
`;

class UsageError extends Error {}

function splitNames(values: string[] | undefined): string[] | undefined {
  if (!values) return undefined;
  const names = values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
  const unknown = names.filter((n) => !isBuiltinModel(n));
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown model ${unknown.map((n) => `"${n}"`).join(', ')}; built-in models: ${Object.keys(BUILTIN_MODELS).join(', ')}`,
    );
  }
  return names;
}

function positiveInt(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} needs a positive integer, got "${value}"`);
  return n;
}

function mb(bytes: number | undefined): string {
  if (bytes === undefined) return '';
  return bytes >= 1e6 ? ` ${(bytes / 1e6).toFixed(1)} MB` : ` ${(bytes / 1e3).toFixed(1)} kB`;
}

function printResult(r: BuildResult): void {
  const where = path.relative(process.cwd(), r.dir) || r.dir;
  if (r.status === 'failed') {
    process.stderr.write(`✗ ${r.name}: ${r.error?.message ?? 'failed'}\n`);
  } else if (r.status === 'up-to-date') {
    process.stdout.write(`= ${r.name} up to date (${where},${mb(r.bytes)})\n`);
  } else {
    process.stdout.write(`✓ ${r.name} built in ${(r.ms / 1000).toFixed(1)} s → ${where} (${mb(r.bytes).trim()})\n`);
  }
}

/**
 * Runs the CLI with `argv` (without `node` and the script) and returns the exit code:
 * 0 on success, 1 when a build failed, 2 on a usage error such as an unknown model name.
 */
export async function main(argv: string[]): Promise<number> {
  try {
    return await run(argv);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`error: ${(err as Error).message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
}

async function run(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  if (command === 'test-dirs') {
    const { testDirsMain } = await import('./diffusers/cli.js');
    return testDirsMain(rest, defaultModelsRoot());
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      only: { type: 'string', multiple: true },
      force: { type: 'boolean', default: false },
      out: { type: 'string' },
      threads: { type: 'string' },
      runs: { type: 'string' },
    },
    allowPositionals: false,
    strict: true,
  });
  const outRoot = values.out ? path.resolve(values.out) : defaultModelsRoot();
  switch (command) {
    case 'build': {
      const only = splitNames(values.only);
      try {
        await buildModels({ outRoot, only, force: values.force, onResult: printResult });
      } catch (err) {
        if (err instanceof BuildModelsError) {
          process.stderr.write(`${err.message}\n`);
          return 1;
        }
        throw err;
      }
      return 0;
    }
    case 'list':
      for (const name of Object.keys(BUILTIN_MODELS)) process.stdout.write(`${name}\n`);
      return 0;
    case 'time': {
      const { timeModel } = await import('./timing.js');
      const names = splitNames(values.only) ?? Object.keys(BUILTIN_MODELS);
      const threads = positiveInt(values.threads, '--threads', 2);
      const runs = positiveInt(values.runs, '--runs', 5);
      for (const name of names) {
        const t = await timeModel(builtinModelDir(name, outRoot), { threads, runs });
        const [C, F, h, w] = t.latent;
        const steps = Object.entries(t.denoiserMs)
          .map(([b, ms]) => `batch ${b} ${ms} ms (min ${t.denoiserMinMs[Number(b)]})`)
          .join(', ');
        process.stdout.write(
          `${name} (${threads} threads, latent ${C}×${F}×${h}×${w}, ${t.tokens} tokens): ` +
            `text encoder ${t.textEncoderMs} ms; denoiser step ${steps}; VAE decode (batch 1) ${t.vaeDecoderMs} ms (medians)\n`,
        );
      }
      return 0;
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

function isEntryPoint(): boolean {
  const arg = process.argv[1];
  if (!arg) return false;
  try {
    return realpathSync(arg) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
