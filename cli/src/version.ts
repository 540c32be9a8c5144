import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The version in a package.json, read without loading the package. */
function versionAt(packageJson: string): string {
  return (JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string }).version;
}

/** The version of this command (its package's). */
export function diffmeshVersion(): string {
  return versionAt(new URL('../package.json', import.meta.url).pathname);
}

/**
 * The version of onnxruntime-node the stage services load (from its package.json, without
 * loading the native binding), or `not installed`.
 */
export function onnxruntimeVersion(): string {
  // Where the stage services find it: beside @diffmesh/stage-host (hoisted, or its own copy).
  const from = [import.meta.url];
  try {
    from.push(import.meta.resolve('@diffmesh/stage-host'));
  } catch {
    // not installed with this command
  }
  for (const base of from) {
    try {
      return versionAt(createRequire(base).resolve('onnxruntime-node/package.json'));
    } catch {
      // not reachable from there
    }
  }
  return 'not installed';
}

/** `diffmesh --version` (`-V`): the version; with `--json` also onnxruntime-node's and Node's. */
export function printVersion(json: boolean): number {
  if (!json) {
    process.stdout.write(`${diffmeshVersion()}\n`);
    return 0;
  }
  const versions = { diffmesh: diffmeshVersion(), onnxruntimeNode: onnxruntimeVersion(), node: process.versions.node };
  process.stdout.write(`${JSON.stringify(versions)}\n`);
  return 0;
}
