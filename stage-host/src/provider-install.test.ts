import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import AdmZip from 'adm-zip';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiffmeshError } from '@diffmesh/core';
import { elfSharedLibrary, providerLibraries, writeProviderPackage } from '@diffmesh/testing';
import { installedFiles, providerStatuses } from './execution-providers.js';
import { onnxruntimeNodeVersion } from './onnxruntime-version.js';
import { installProvider, providerInstallPlan } from './provider-install.js';

// onnxruntime's CUDA/TensorRT provider files come in several packages: its NuGet package (what
// onnxruntime-node's installer downloads), its Linux GPU release archive, npm packages that
// repackage them, or a folder. `diffmesh gpu install --from` takes each. The files here are
// small ELF libraries written by @diffmesh/testing in the layouts of those packages, carrying
// the onnxruntime version the way the real ones do (a NUL-terminated "1.29.0" in .rodata);
// they are installed into a folder of the test's, never into onnxruntime-node.
let root: string;
let n = 0;
const fresh = () => path.join(root, `case-${++n}`);
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-provider-install-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const onLinuxX64 = process.platform === 'linux' && process.arch === 'x64';
const core = onnxruntimeNodeVersion();
// Another release than onnxruntime-node's (1.29.0 is the one on the npm registry).
const other = core === '1.29.0' ? '1.30.0' : '1.29.0';
const CUDA = ['libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_shared.so'];
const ALL = [...CUDA, 'libonnxruntime_providers_tensorrt.so'].sort();

/** The provider files in `bin`, and no leftovers (an unpacking folder, a half-written file). */
function binFiles(bin: string): string[] {
  return existsSync(bin) ? readdirSync(bin).sort() : [];
}

describe.runIf(onLinuxX64)('installing a GPU provider', () => {
  it("names the package and the files, as onnxruntime-node's installer metadata does", () => {
    const plan = providerInstallPlan('cuda', root);
    expect(plan.manifest).toBe('cuda12');
    expect(plan.nuget).toEqual({ name: 'Microsoft.ML.OnnxRuntime.Gpu.Linux', version: core });
    expect(plan.files.map((f) => path.basename(f.target)).sort()).toEqual(ALL);
    expect(plan.files.every((f) => f.inPackage.startsWith('runtimes/linux-x64/native/'))).toBe(true);
  });

  it('takes the files from a downloaded .nupkg; refuses one that lacks them, and names a provider it has no package for', async () => {
    const plan = providerInstallPlan('tensorrt', root);
    const libs = providerLibraries(core);
    const zip = new AdmZip();
    for (const f of plan.files) zip.addFile(f.inPackage, libs[path.basename(f.target)]);
    const pkg = path.join(root, 'gpu.nupkg');
    zip.writeZip(pkg);
    const bin = fresh();
    const lines: string[] = [];
    const result = await installProvider('tensorrt', { from: pkg, binDir: bin, log: (l) => lines.push(l) });
    expect(result.source?.kind).toBe('NuGet package');
    expect(result.version).toBe(core);
    for (const f of plan.files) expect(readFileSync(path.join(bin, path.basename(f.target)))).toEqual(libs[path.basename(f.target)]);
    expect(binFiles(bin)).toEqual(ALL);
    expect(lines).toHaveLength(3);

    const partial = new AdmZip();
    partial.addFile(plan.files[0].inPackage, libs[path.basename(plan.files[0].target)]);
    await writeFile(path.join(root, 'partial.nupkg'), partial.toBuffer());
    const bin2 = fresh();
    const err = await installProvider('tensorrt', { from: path.join(root, 'partial.nupkg'), binDir: bin2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).message).toMatch(/partial\.nupkg \(NuGet package\) lacks libonnxruntime_providers_/);
    expect(binFiles(bin2)).toEqual([]);

    await writeFile(path.join(root, 'not-a-package.nupkg'), 'hello');
    await expect(installProvider('cuda', { from: path.join(root, 'not-a-package.nupkg'), binDir: fresh() })).rejects.toThrow(
      /is neither a directory nor a package of provider files \(onnxruntime-linux-x64-gpu-<version>\.tgz, an npm package \.tgz, a \.nupkg\)/,
    );
    expect(() => providerInstallPlan('webgpu')).toThrow(/not installed separately \(installable: cuda, tensorrt/);
  });

  const layouts = [
    ['release-archive', 'onnxruntime release archive'],
    ['release-dir', 'onnxruntime release archive'],
    ['npm-package', 'npm package'],
    ['npm-dir', 'npm package'],
    ['flat', 'directory'],
  ] as const;

  for (const [layout, kind] of layouts) {
    it(`installs the files of the core's release from ${layout === 'flat' ? 'a folder holding them' : `a ${layout}`}`, async () => {
      const from = await writeProviderPackage(fresh(), layout, core);
      const bin = fresh();
      const lines: string[] = [];
      const result = await installProvider('cuda', { from, binDir: bin, log: (l) => lines.push(l) });
      expect(result.source?.kind).toBe(kind);
      if (kind === 'npm package') expect(result.source?.npmPackage).toBe('com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9');
      if (kind === 'onnxruntime release archive') expect(result.source?.versionNumber).toBe(core);
      // The release holds all three; the core library and headers beside them stay out.
      expect(binFiles(bin)).toEqual(ALL);
      const libs = providerLibraries(core);
      for (const f of ALL) {
        expect(readFileSync(path.join(bin, f))).toEqual(libs[f]);
        expect(statSync(path.join(bin, f)).mode & 0o111).not.toBe(0);
      }
      expect(lines.map((l) => l.split(' → ')[1]).sort()).toEqual(ALL.map((f) => path.join(bin, f)));
      expect(installedFiles('cuda', bin, core)).toMatchObject({ installed: true, version: core });
    });

    it(`refuses the files of another release from ${layout === 'flat' ? 'a folder' : `a ${layout}`}, naming both versions, before writing anything`, async () => {
      const from = await writeProviderPackage(fresh(), layout, other);
      const bin = fresh();
      const err = (await installProvider('cuda', { from, binDir: bin }).catch((e: unknown) => e)) as DiffmeshError;
      expect(err).toBeInstanceOf(DiffmeshError);
      expect(err.code).toBe(9); // FAILED_PRECONDITION
      expect(err.field).toBe('from');
      expect(err.message).toContain(`holds the cuda provider of onnxruntime ${other}, and this onnxruntime-node is ${core}`);
      expect(err.message).toContain(`npm install onnxruntime-node@${other}`);
      expect(err.message).toContain(`onnxruntime-linux-x64-gpu-${core}.tgz`);
      expect(binFiles(bin)).toEqual([]);
    });
  }

  it('reads a release by its VERSION_NUMBER when its libraries carry no version string', async () => {
    // A build whose providers lack the string (none of the official ones): the archive's file says.
    const dir = fresh();
    const from = await writeProviderPackage(dir, 'release-dir', core);
    for (const f of ['libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_tensorrt.so'])
      await writeFile(path.join(from, 'lib', f), elfSharedLibrary(['no version here']));
    await writeFile(path.join(from, 'VERSION_NUMBER'), `${other}\n`);
    await expect(installProvider('cuda', { from, binDir: fresh() })).rejects.toThrow(
      `provider of onnxruntime ${other}, and this onnxruntime-node is ${core}`,
    );
    await writeFile(path.join(from, 'VERSION_NUMBER'), `${core}\n`);
    expect((await installProvider('cuda', { from, binDir: fresh() })).version).toBe(core);
    // Without either, nothing says which release it is.
    const bare = fresh();
    await writeProviderPackage(bare, 'flat', core);
    await writeFile(path.join(bare, 'libonnxruntime_providers_cuda.so'), elfSharedLibrary(['no version here']));
    await writeFile(path.join(bare, 'libonnxruntime_providers_tensorrt.so'), elfSharedLibrary(['no version here']));
    await expect(installProvider('cuda', { from: bare, binDir: fresh() })).rejects.toThrow(/does not say which onnxruntime release/);
  });

  it('refuses files that are not Linux x86-64 libraries, a release that mixes versions, and a source holding several sets', async () => {
    const arm = await writeProviderPackage(fresh(), 'flat', core, { machine: 183 });
    await expect(installProvider('cuda', { from: arm, binDir: fresh() })).rejects.toThrow(
      /holds files that are not Linux x64 shared libraries: libonnxruntime_providers_shared\.so, libonnxruntime_providers_cuda\.so, libonnxruntime_providers_tensorrt\.so$/,
    );
    const text = fresh();
    await writeProviderPackage(text, 'flat', core);
    await writeFile(path.join(text, 'libonnxruntime_providers_cuda.so'), 'version https://git-lfs.github.com/spec/v1\n');
    await expect(installProvider('cuda', { from: text, binDir: fresh() })).rejects.toThrow(
      /not Linux x64 shared libraries: libonnxruntime_providers_cuda\.so$/,
    );

    const mixed = fresh();
    await writeProviderPackage(mixed, 'flat', core);
    await writeFile(
      path.join(mixed, 'libonnxruntime_providers_tensorrt.so'),
      providerLibraries(other)['libonnxruntime_providers_tensorrt.so'],
    );
    await expect(installProvider('cuda', { from: mixed, binDir: fresh() })).rejects.toThrow(
      new RegExp(`mixes onnxruntime releases: .*libonnxruntime_providers_tensorrt\\.so ${other.replaceAll('.', '\\.')}`),
    );

    const two = fresh();
    await writeProviderPackage(path.join(two, 'a'), 'flat', core);
    await writeProviderPackage(path.join(two, 'b'), 'flat', core);
    await expect(installProvider('cuda', { from: two, binDir: fresh() })).rejects.toThrow(
      /holds provider files in 2 folders \(a, b\): pass one of them/,
    );
    const none = fresh();
    await writeProviderPackage(none, 'flat', core, { omit: ALL });
    await expect(installProvider('cuda', { from: none, binDir: fresh() })).rejects.toThrow(/holds no onnxruntime provider files/);
    await expect(installProvider('cuda', { from: path.join(root, 'nowhere'), binDir: fresh() })).rejects.toThrow(/nowhere does not exist/);
  });

  it('installs the CUDA provider without TensorRT, and removes a TensorRT file left from another release', async () => {
    const bin = fresh();
    await writeProviderPackage(bin, 'flat', other, { omit: CUDA });
    expect(binFiles(bin)).toEqual(['libonnxruntime_providers_tensorrt.so']);
    const from = await writeProviderPackage(fresh(), 'npm-dir', core, { omit: ['libonnxruntime_providers_tensorrt.so'] });
    const lines: string[] = [];
    await installProvider('cuda', { from, binDir: bin, log: (l) => lines.push(l) });
    expect(binFiles(bin)).toEqual(CUDA.sort());
    expect(lines.at(-1)).toBe(`removed libonnxruntime_providers_tensorrt.so of onnxruntime ${other}`);
    await expect(installProvider('tensorrt', { from, binDir: fresh() })).rejects.toThrow(/lacks libonnxruntime_providers_tensorrt\.so/);
  });

  it('counts provider files of another release as not installed: they are refused before a session', async () => {
    const bin = fresh();
    await writeProviderPackage(bin, 'flat', other);
    expect(installedFiles('cuda', bin, core)).toEqual({
      installed: false,
      missingFiles: [],
      version: other,
      versionMismatch: { files: other, core },
    });
    expect(installedFiles('tensorrt', fresh(), core)).toEqual({
      installed: false,
      missingFiles: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_tensorrt.so'],
    });
  });

  it('says what CUDA and TensorRT lack here: provider files, and the NVIDIA libraries by soname', () => {
    const cuda = providerStatuses().find((s) => s.provider === 'cuda');
    expect(cuda).toBeDefined();
    if (!cuda || cuda.installed) return; // a machine with the provider installed has other answers
    expect(cuda.missingFiles).toContain('libonnxruntime_providers_cuda.so');
    // Without the provider files, the libraries of onnxruntime's CUDA 13 build.
    for (const l of cuda.missingLibraries)
      expect(l.soname).toMatch(/^lib(cudart\.so\.13|cublas\.so\.13|cublasLt\.so\.13|curand\.so\.10|cudnn\.so\.9|cuda\.so\.1)$/);
  });
});

// The real package from the npm registry (~180 MB), when a copy is in the cache: `npm pack
// com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9` into .cache/onnxruntime-gpu/ at the
// repository's root, or DIFFMESH_ORT_GPU_PACKAGE naming the tarball or its unpacked folder.
const REAL =
  process.env.DIFFMESH_ORT_GPU_PACKAGE ??
  fileURLToPath(new URL('../../.cache/onnxruntime-gpu/com.github.asus4.onnxruntime.linux-x64-gpu-0.4.9.tgz', import.meta.url));

describe.runIf(onLinuxX64)('the npm-hosted onnxruntime 1.29.0 GPU provider', () => {
  it.skipIf(!existsSync(REAL))(
    `is refused by a core of another release, naming both, and installs into a 1.29.0 one (the real package at ${REAL})`,
    async () => {
      const bin = fresh();
      if (core !== '1.29.0') {
        await expect(installProvider('cuda', { from: REAL, binDir: bin })).rejects.toThrow(
          `holds the cuda provider of onnxruntime 1.29.0, and this onnxruntime-node is ${core}`,
        );
        expect(binFiles(bin)).toEqual([]);
      }
      const result = await installProvider('cuda', { from: REAL, binDir: bin, coreVersion: '1.29.0' });
      expect(result.source?.kind).toBe('npm package');
      expect(result.version).toBe('1.29.0');
      expect(binFiles(bin)).toEqual(ALL);
      expect(statSync(path.join(bin, 'libonnxruntime_providers_cuda.so')).size).toBeGreaterThan(100e6);
    },
    300_000,
  );
});
