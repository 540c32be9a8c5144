import { execFile } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A small ELF64 little-endian shared library (`ET_DYN`) with a `.rodata` section holding
 * `strings`, each NUL-terminated, as the linker lays out a library's string constants: the
 * shape in which onnxruntime's libraries carry their version (one `"1.29.0\0"` in the
 * `.rodata` of `libonnxruntime_providers_cuda.so` 1.29.0). Header, `.rodata`, `.shstrtab`,
 * then the section headers (null, .rodata, .shstrtab). `machine`: 62 x86-64 (default), 183 aarch64.
 */
export function elfSharedLibrary(strings: readonly string[], machine = 62): Buffer {
  // Strings around the version, as in the real file ("Replay\01.29.0\0Failed to get device id.\0").
  const rodata = Buffer.from(`\0${strings.map((s) => `${s}\0`).join('')}`, 'latin1');
  const shstrtab = Buffer.from('\0.rodata\0.shstrtab\0', 'latin1');
  const rodataOff = 64;
  const shstrOff = rodataOff + rodata.length;
  const shoff = Math.ceil((shstrOff + shstrtab.length) / 8) * 8;
  const out = Buffer.alloc(shoff + 3 * 64);
  out.write('\x7fELF', 0, 'latin1');
  out[4] = 2; // ELFCLASS64
  out[5] = 1; // little-endian
  out[6] = 1; // EV_CURRENT
  out.writeUInt16LE(3, 0x10); // ET_DYN
  out.writeUInt16LE(machine, 0x12);
  out.writeUInt32LE(1, 0x14);
  out.writeBigUInt64LE(BigInt(shoff), 0x28);
  out.writeUInt16LE(64, 0x34); // e_ehsize
  out.writeUInt16LE(64, 0x3a); // e_shentsize
  out.writeUInt16LE(3, 0x3c); // e_shnum
  out.writeUInt16LE(2, 0x3e); // e_shstrndx
  rodata.copy(out, rodataOff);
  shstrtab.copy(out, shstrOff);
  const section = (i: number, name: number, type: number, flags: number, offset: number, size: number): void => {
    const at = shoff + i * 64;
    out.writeUInt32LE(name, at);
    out.writeUInt32LE(type, at + 4);
    out.writeBigUInt64LE(BigInt(flags), at + 8);
    out.writeBigUInt64LE(BigInt(offset), at + 0x18);
    out.writeBigUInt64LE(BigInt(size), at + 0x20);
    out.writeBigUInt64LE(1n, at + 0x30);
  };
  section(1, 1, 1 /* PROGBITS */, 2 /* ALLOC */, rodataOff, rodata.length);
  section(2, 9, 3 /* STRTAB */, 0, shstrOff, shstrtab.length);
  return out;
}

/** The three provider libraries of onnxruntime `version`'s Linux GPU build, as small ELF files carrying the version where the real ones do. */
export function providerLibraries(version: string, machine = 62): Record<string, Buffer> {
  return {
    // The bridge carries no version string; the CUDA and TensorRT providers carry one each.
    'libonnxruntime_providers_shared.so': elfSharedLibrary(['Provider_GetHost'], machine),
    'libonnxruntime_providers_cuda.so': elfSharedLibrary(
      ['cudaGraphDestroy(graph)', 'Replay', version, 'Failed to get device id.'],
      machine,
    ),
    'libonnxruntime_providers_tensorrt.so': elfSharedLibrary(
      ['[TensorRT EP] Model name is ', 'LINUX', version, 'GetCustomOpDomainList'],
      machine,
    ),
  };
}

/**
 * Writes onnxruntime `version`'s GPU provider files in `dir` as one of the packages that carry
 * them, and returns the path to pass to `diffmesh gpu install --from`:
 * - `release-archive`: `onnxruntime-linux-x64-gpu-<v>.tgz` made with `tar czf` of
 *   `onnxruntime-linux-x64-gpu-<v>/` holding `lib/` (the core's symlink chain and the three
 *   providers), `include/`, `VERSION_NUMBER`, `GIT_COMMIT_ID`, `LICENSE`, as the release
 *   pipeline packs it (`tools/ci_build/github/linux/copy_strip_binary.sh`);
 * - `release-dir`: the same folder, unpacked;
 * - `npm-package`: the tarball `npm pack` makes of a package laid out as
 *   `com.github.asus4.onnxruntime.linux-x64-gpu` is (`Plugins/Linux/x64/` with Unity `.meta` files);
 * - `npm-dir`: that package's folder;
 * - `flat`: the three files alone.
 * `omit` leaves files out; `machine` builds them for another architecture.
 */
export async function writeProviderPackage(
  dir: string,
  layout: 'release-archive' | 'release-dir' | 'npm-package' | 'npm-dir' | 'flat',
  version: string,
  opts: { omit?: string[]; machine?: number; versionNumber?: string } = {},
): Promise<string> {
  await mkdir(dir, { recursive: true });
  const libs = Object.entries(providerLibraries(version, opts.machine)).filter(([f]) => !opts.omit?.includes(f));
  const put = async (folder: string, meta = false): Promise<void> => {
    await mkdir(folder, { recursive: true });
    for (const [f, bytes] of libs) {
      await writeFile(path.join(folder, f), bytes, { mode: 0o755 });
      if (meta) await writeFile(path.join(folder, `${f}.meta`), 'fileFormatVersion: 2\nPluginImporter:\n  isPreloaded: 0\n');
    }
  };
  if (layout === 'flat') {
    await put(dir);
    return dir;
  }
  if (layout === 'release-archive' || layout === 'release-dir') {
    const name = `onnxruntime-linux-x64-gpu-${version}`;
    const top = path.join(dir, name);
    await put(path.join(top, 'lib'));
    await writeFile(path.join(top, 'lib', `libonnxruntime.so.${version}`), elfSharedLibrary([version, '1.3.2']));
    await symlink(`libonnxruntime.so.${version}`, path.join(top, 'lib', 'libonnxruntime.so.1'));
    await symlink('libonnxruntime.so.1', path.join(top, 'lib', 'libonnxruntime.so'));
    await mkdir(path.join(top, 'include'), { recursive: true });
    await writeFile(path.join(top, 'include', 'onnxruntime_c_api.h'), '// onnxruntime C API\n');
    await writeFile(path.join(top, 'VERSION_NUMBER'), `${opts.versionNumber ?? version}\n`);
    await writeFile(path.join(top, 'GIT_COMMIT_ID'), '0000000000000000000000000000000000000000\n');
    await writeFile(path.join(top, 'LICENSE'), 'MIT License\n');
    if (layout === 'release-dir') return top;
    await run('tar', ['czf', `${name}.tgz`, name], { cwd: dir });
    return path.join(dir, `${name}.tgz`);
  }
  const pkg = path.join(dir, 'com.github.asus4.onnxruntime.linux-x64-gpu');
  await put(path.join(pkg, 'Plugins', 'Linux', 'x64'), true);
  await writeFile(
    path.join(pkg, 'package.json'),
    JSON.stringify(
      {
        name: 'com.github.asus4.onnxruntime.linux-x64-gpu',
        version: '0.4.9',
        description: 'ONNX Runtime for Unity - Linux x64 GPU Provider',
        unity: '2022.3',
      },
      null,
      2,
    ),
  );
  await writeFile(path.join(pkg, 'README.md'), `# ONNX Runtime Plugin for Unity\n\n- ONNX Runtime: ${version}\n`);
  if (layout === 'npm-dir') return pkg;
  const { stdout } = await run('npm', ['pack', pkg, '--pack-destination', dir, '--ignore-scripts', '--json'], { cwd: dir });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
  return path.join(dir, packed.filename);
}
