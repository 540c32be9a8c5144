#!/usr/bin/env node
// Generates what is derived from diffmesh's protos (`gen`) and checks that the committed
// copies are up to date (`check`): the TypeScript types in src/generated/, the compiled
// descriptor set descriptors.binpb (every file with its imports, as buf compiles them; the
// servers' reflection serves it and clients may read it) and the message root
// descriptors.json (protobufjs's JSON of the same files, which clients load at start-up). Plain JavaScript so it runs
// before anything is compiled: the generated files are themselves inputs of the build.
//
//   node scripts/codegen.mjs gen     # rewrite src/generated/ and descriptors.binpb
//   node scripts/codegen.mjs check   # regenerate into a temp dir, fail on any difference

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The protos package directory (the parent of scripts/). */
export const PKG_DIR = fileURLToPath(new URL('..', import.meta.url));

/** Where the generated types are committed, relative to the package directory. */
export const GENERATED_DIR = 'src/generated';

/**
 * Options of proto-loader-gen-types. They must match the loader options in src/index.ts
 * (camelCase fields, longs and enums as strings, defaults, virtual oneof fields).
 */
export const GEN_TYPES_ARGS = [
  '--longs=String',
  '--enums=String',
  '--defaults',
  '--oneofs',
  '--grpcLib=@grpc/grpc-js',
  '--importFileExtension=.js',
  '--includeComments',
  '-I',
  'proto',
  '-I',
  'proto/third_party',
];

/** The compiled FileDescriptorSet, relative to the package directory (committed, shipped). */
export const DESCRIPTOR_SET_FILE = 'descriptors.binpb';

/** The message root in protobufjs's JSON form, relative to the package directory (committed, shipped). */
export const MESSAGE_ROOT_FILE = 'descriptors.json';

/** Upstream files whose types runtime needs beyond what our files import. */
const EXTRA_FILES = ['google/rpc/status.proto', 'google/rpc/error_details.proto'];

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...walk(full));
    else out.push(full);
  }
  return out;
}

/** Every .proto file to load and generate, relative to proto/ (posix separators). */
export function listProtoFiles(pkgDir = PKG_DIR) {
  const protoDir = join(pkgDir, 'proto');
  const ours = walk(join(protoDir, 'diffmesh'))
    .filter((f) => f.endsWith('.proto'))
    .map((f) => relative(protoDir, f).split(sep).join('/'));
  return [...ours, ...EXTRA_FILES];
}

/** Runs proto-loader-gen-types into `outDir` (created; must not exist or be empty). */
export function generateInto(outDir, pkgDir = PKG_DIR) {
  const require = createRequire(join(pkgDir, 'package.json'));
  const loaderDir = dirname(require.resolve('@grpc/proto-loader/package.json'));
  const bin = join(loaderDir, 'build', 'bin', 'proto-loader-gen-types.js');
  execFileSync(process.execPath, [bin, ...GEN_TYPES_ARGS, '-O', outDir, ...listProtoFiles(pkgDir)], {
    cwd: pkgDir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

/**
 * Compiles every file of the buf workspace (buf.yaml: proto/diffmesh and proto/third_party)
 * with its imports (google/protobuf/* come with buf) and source info (comments, for
 * `grpcurl describe`) into a binary FileDescriptorSet at `outFile`. buf's output is
 * deterministic for a given buf version, which package-lock.json pins.
 */
export function buildDescriptorSet(outFile, pkgDir = PKG_DIR) {
  const require = createRequire(join(pkgDir, 'package.json'));
  const buf = join(dirname(require.resolve('@bufbuild/buf/package.json')), 'bin', 'buf');
  execFileSync(process.execPath, [buf, 'build', '--output', outFile], {
    cwd: pkgDir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

/**
 * Parses every proto file (camelCase fields, as `newDiffmeshRoot({ keepCase: false })` in
 * src/index.ts does) and writes the root in protobufjs's JSON form to `outFile`: what
 * `loadDiffmeshRoot()` reads instead of parsing. Deterministic for the pinned protobufjs.
 */
export function buildMessageRoot(outFile, pkgDir = PKG_DIR) {
  const require = createRequire(join(pkgDir, 'package.json'));
  require('@grpc/proto-loader'); // registers google/protobuf/descriptor.proto, which the http annotations import
  const protobuf = require('protobufjs');
  const includeDirs = [join(pkgDir, 'proto'), join(pkgDir, 'proto', 'third_party')];
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => {
    for (const dir of includeDirs) {
      const candidate = join(dir, target);
      try {
        if (statSync(candidate).isFile()) return candidate;
      } catch {
        // not under this include dir
      }
    }
    return protobuf.util.path.resolve(origin, target);
  };
  root.loadSync(listProtoFiles(pkgDir), { keepCase: false });
  root.resolveAll();
  writeFileSync(outFile, `${JSON.stringify(root.toJSON())}\n`);
}

/** Regenerates `src/generated/`, `descriptors.binpb` and `descriptors.json` in place. */
export function generate(pkgDir = PKG_DIR) {
  const target = join(pkgDir, GENERATED_DIR);
  const staging = mkdtempSync(join(pkgDir, '.generated-'));
  try {
    generateInto(staging, pkgDir);
    buildDescriptorSet(join(staging, DESCRIPTOR_SET_FILE), pkgDir);
    renameSync(join(staging, DESCRIPTOR_SET_FILE), join(pkgDir, DESCRIPTOR_SET_FILE));
    buildMessageRoot(join(pkgDir, MESSAGE_ROOT_FILE), pkgDir);
    rmSync(target, { recursive: true, force: true });
    renameSync(staging, target);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function filesUnder(dir) {
  try {
    return walk(dir).map((f) => relative(dir, f).split(sep).join('/'));
  } catch (err) {
    if (err && err.code === 'ENOENT') return [];
    throw err;
  }
}

/**
 * Compares two directory trees file by file.
 * @returns {{ missing: string[], extra: string[], changed: string[] }} paths relative to
 *   the trees: `missing` exist only in `expectedDir`, `extra` only in `actualDir`.
 */
export function diffTrees(expectedDir, actualDir) {
  const expected = filesUnder(expectedDir);
  const actual = new Set(filesUnder(actualDir));
  const missing = [];
  const changed = [];
  for (const file of expected) {
    if (!actual.has(file)) missing.push(file);
    else if (!readFileSync(join(expectedDir, file)).equals(readFileSync(join(actualDir, file)))) changed.push(file);
    actual.delete(file);
  }
  return { missing, extra: [...actual].sort(), changed };
}

/**
 * Regenerates into a temp dir and compares with the committed files.
 * @param {{ pkgDir?: string, generatedDir?: string }} [opts] `generatedDir` (absolute)
 *   defaults to `<pkgDir>/src/generated`.
 */
export function checkGenerated(opts = {}) {
  const pkgDir = opts.pkgDir ?? PKG_DIR;
  const committed = opts.generatedDir ?? join(pkgDir, GENERATED_DIR);
  const temp = mkdtempSync(join(tmpdir(), 'diffmesh-protos-'));
  try {
    generateInto(temp, pkgDir);
    const diff = diffTrees(temp, committed);
    return { ok: diff.missing.length + diff.extra.length + diff.changed.length === 0, ...diff };
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
}

/**
 * Builds `fileName` with `build(path)` into a temp dir and compares it with `committed`.
 * @returns {{ ok: boolean, missing: boolean }} `missing`: the committed file does not exist.
 */
function checkBuilt(build, fileName, committed) {
  const temp = mkdtempSync(join(tmpdir(), 'diffmesh-protos-check-'));
  try {
    const fresh = join(temp, fileName);
    build(fresh);
    let current;
    try {
      current = readFileSync(committed);
    } catch (err) {
      if (err && err.code === 'ENOENT') return { ok: false, missing: true };
      throw err;
    }
    return { ok: readFileSync(fresh).equals(current), missing: false };
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
}

/**
 * Compiles the descriptor set into a temp dir and compares it with the committed one.
 * @param {{ pkgDir?: string, file?: string }} [opts] `file` (absolute) defaults to
 *   `<pkgDir>/descriptors.binpb`.
 * @returns {{ ok: boolean, missing: boolean }} `missing`: the committed file does not exist.
 */
export function checkDescriptorSet(opts = {}) {
  const pkgDir = opts.pkgDir ?? PKG_DIR;
  return checkBuilt((f) => buildDescriptorSet(f, pkgDir), DESCRIPTOR_SET_FILE, opts.file ?? join(pkgDir, DESCRIPTOR_SET_FILE));
}

/**
 * Rebuilds the message root into a temp dir and compares it with the committed one.
 * @param {{ pkgDir?: string, file?: string }} [opts] `file` (absolute) defaults to
 *   `<pkgDir>/descriptors.json`.
 * @returns {{ ok: boolean, missing: boolean }} `missing`: the committed file does not exist.
 */
export function checkMessageRoot(opts = {}) {
  const pkgDir = opts.pkgDir ?? PKG_DIR;
  return checkBuilt((f) => buildMessageRoot(f, pkgDir), MESSAGE_ROOT_FILE, opts.file ?? join(pkgDir, MESSAGE_ROOT_FILE));
}

/** A human-readable report of a failed check. */
export function formatDrift(result) {
  const lines = [`protos: ${GENERATED_DIR}/ is out of date with proto/ (run \`npm run gen -w @diffmesh/protos\`):`];
  for (const f of result.changed) lines.push(`  changed:  ${f}`);
  for (const f of result.missing) lines.push(`  missing:  ${f}`);
  for (const f of result.extra) lines.push(`  stale:    ${f}`);
  return lines.join('\n');
}

/** A human-readable report of a failed descriptor-set (or message-root) check. */
export function formatDescriptorDrift(result, file = DESCRIPTOR_SET_FILE) {
  const what = result.missing ? 'is missing' : 'is out of date with proto/';
  return `protos: ${file} ${what} (run \`npm run gen -w @diffmesh/protos\`)`;
}

function main(argv) {
  const [command] = argv;
  if (command === 'gen') {
    generate();
    console.log(
      `protos: generated ${GENERATED_DIR}/ from ${listProtoFiles().length} files, ${DESCRIPTOR_SET_FILE} and ${MESSAGE_ROOT_FILE}`,
    );
    return 0;
  }
  if (command === 'check') {
    const result = checkGenerated();
    const descriptors = checkDescriptorSet();
    const messageRoot = checkMessageRoot();
    if (result.ok) console.log(`protos: ${GENERATED_DIR}/ is up to date`);
    else console.error(formatDrift(result));
    if (descriptors.ok) console.log(`protos: ${DESCRIPTOR_SET_FILE} is up to date`);
    else console.error(formatDescriptorDrift(descriptors));
    if (messageRoot.ok) console.log(`protos: ${MESSAGE_ROOT_FILE} is up to date`);
    else console.error(formatDescriptorDrift(messageRoot, MESSAGE_ROOT_FILE));
    return result.ok && descriptors.ok && messageRoot.ok ? 0 : 1;
  }
  console.error('usage: node scripts/codegen.mjs gen|check');
  return 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  process.exitCode = main(process.argv.slice(2));
}
