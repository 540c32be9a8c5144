import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import AdmZip from 'adm-zip';
import { x as untar } from 'tar';
import { Code, DiffmeshError } from '@diffmesh/core';

/** The provider libraries onnxruntime ships for Linux, in every package of its GPU build. */
export const PROVIDER_FILE_NAMES = [
  'libonnxruntime_providers_shared.so',
  'libonnxruntime_providers_cuda.so',
  'libonnxruntime_providers_tensorrt.so',
] as const;

/**
 * Where `diffmesh gpu install --from` finds onnxruntime's GPU provider files. Each package
 * holds the same three libraries in its own folder:
 * - onnxruntime's Linux GPU release archive `onnxruntime-linux-x64-gpu-<version>.tgz` (GitHub
 *   releases): `onnxruntime-linux-x64-gpu-<version>/lib/`, with `VERSION_NUMBER` at the top
 *   (tools/ci_build/github/linux/copy_strip_binary.sh);
 * - an npm package such as `com.github.asus4.onnxruntime.linux-x64-gpu` (the tarball of `npm
 *   pack`, or the installed package): `Plugins/Linux/x64/` (its `package.json` names the
 *   package, not the onnxruntime version);
 * - the NuGet package Microsoft.ML.OnnxRuntime.Gpu.Linux (`.nupkg`, a zip): `runtimes/linux-x64/native/`;
 * - any directory holding them (one of the above unpacked, or the files alone).
 */
export interface ProviderSource {
  /** What the source is, in words. */
  kind: 'onnxruntime release archive' | 'npm package' | 'NuGet package' | 'directory';
  /** The folder holding the provider files (inside `scratch` for an archive). */
  dir: string;
  /** The provider files present there. */
  files: string[];
  /** The release's `VERSION_NUMBER` (a release archive or its unpacked folder). */
  versionNumber?: string;
  /** An npm package's `name@version`. */
  npmPackage?: string;
}

/**
 * Opens `from` (an archive, a package or a directory; see {@link ProviderSource}): an archive
 * is unpacked into `scratch`, only its provider files and version files. INVALID_ARGUMENT
 * (field `from`) for a path that is none of these or holds no provider files.
 */
export async function openProviderSource(from: string, scratch: string): Promise<ProviderSource> {
  if (!existsSync(from)) throw fromError(Code.INVALID_ARGUMENT, `${from} does not exist`);
  if (statSync(from).isDirectory()) return locate(from, from, 'directory');
  const magic = readMagic(from);
  mkdirSync(scratch, { recursive: true });
  if (magic.subarray(0, 4).equals(Buffer.from('PK\x03\x04', 'latin1'))) {
    unzipProviders(from, scratch);
    return locate(scratch, from, 'NuGet package');
  }
  const gzip = magic[0] === 0x1f && magic[1] === 0x8b;
  const tar = magic.toString('latin1', 257, 262) === 'ustar';
  if (!gzip && !tar) {
    throw fromError(
      Code.INVALID_ARGUMENT,
      `${from} is neither a directory nor a package of provider files (onnxruntime-linux-x64-gpu-<version>.tgz, an npm package .tgz, a .nupkg)`,
    );
  }
  try {
    await untar({
      file: from,
      cwd: scratch,
      // Only what is read here: the libraries, the release's VERSION_NUMBER and a package.json.
      filter: (p) =>
        (PROVIDER_FILE_NAMES as readonly string[]).includes(path.basename(p)) || /^(\.\/)?[^/]+\/(VERSION_NUMBER|package\.json)$/.test(p),
    });
  } catch (err) {
    throw fromError(Code.INVALID_ARGUMENT, `${from} could not be unpacked: ${(err as Error).message}`);
  }
  return locate(scratch, from, 'directory');
}

function readMagic(file: string): Buffer {
  const buf = Buffer.alloc(512);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buf, 0, buf.length, 0);
  } finally {
    closeSync(fd);
  }
  return buf;
}

function unzipProviders(file: string, scratch: string): void {
  let zip: AdmZip;
  try {
    zip = new AdmZip(file);
  } catch (err) {
    throw fromError(Code.INVALID_ARGUMENT, `${file} is not a NuGet package (a zip file): ${(err as Error).message}`);
  }
  for (const entry of zip.getEntries()) {
    if (entry.isDirectory || !(PROVIDER_FILE_NAMES as readonly string[]).includes(path.basename(entry.entryName))) continue;
    // Named by the entry's folders, never above `scratch`.
    const target = path.join(scratch, ...entry.entryName.split('/').filter((s) => s && s !== '..'));
    mkdirSync(path.dirname(target), { recursive: true });
    writeFileSync(target, entry.getData());
  }
}

/** The one folder under `root` holding provider files, with what its package says about it. */
function locate(root: string, from: string, kind: ProviderSource['kind']): ProviderSource {
  const dirs = providerDirs(root);
  if (dirs.length === 0) {
    throw fromError(Code.FAILED_PRECONDITION, `${from} holds no onnxruntime provider files (${PROVIDER_FILE_NAMES.join(', ')})`);
  }
  const withCuda = dirs.filter((d) => existsSync(path.join(d, 'libonnxruntime_providers_cuda.so')));
  const chosen = withCuda.length > 0 ? withCuda : dirs;
  if (chosen.length > 1) {
    throw fromError(
      Code.INVALID_ARGUMENT,
      `${from} holds provider files in ${chosen.length} folders (${chosen.map((d) => path.relative(root, d) || '.').join(', ')}): pass one of them`,
    );
  }
  const dir = chosen[0];
  const files = PROVIDER_FILE_NAMES.filter((f) => existsSync(path.join(dir, f)));
  const source: ProviderSource = { kind, dir, files };
  // The release archive: VERSION_NUMBER beside lib/. An npm package: package.json above Plugins/.
  for (let d = dir, i = 0; i < 4 && d.startsWith(root); d = path.dirname(d), i++) {
    const vn = path.join(d, 'VERSION_NUMBER');
    if (!source.versionNumber && existsSync(vn)) {
      source.versionNumber = readFileSync(vn, 'utf8').trim();
      if (kind === 'directory') source.kind = 'onnxruntime release archive';
    }
    const pj = path.join(d, 'package.json');
    if (!source.npmPackage && existsSync(pj)) {
      try {
        const j = JSON.parse(readFileSync(pj, 'utf8')) as { name?: string; version?: string };
        if (j.name) {
          source.npmPackage = `${j.name}@${j.version ?? '?'}`;
          if (source.kind === 'directory') source.kind = 'npm package';
        }
      } catch {
        // not a package's
      }
    }
    if (d === root) break;
  }
  return source;
}

/** Folders under `root` (depth ≤ 6) that hold at least one provider file. */
function providerDirs(root: string): string[] {
  const out: string[] = [];
  let visited = 0;
  const walk = (dir: string, depth: number): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    if (entries.some((e) => !e.isDirectory() && (PROVIDER_FILE_NAMES as readonly string[]).includes(e.name))) out.push(dir);
    if (depth === 0) return;
    for (const e of entries) {
      if (!e.isDirectory() || e.name.startsWith('.') || ++visited > 20_000) continue;
      walk(path.join(dir, e.name), depth - 1);
    }
  };
  walk(root, 6);
  return out;
}

function fromError(code: Code, message: string): DiffmeshError {
  return new DiffmeshError(code, 'INVALID_PARAMETER', `from: ${message}`, { metadata: { field: 'from' } });
}
