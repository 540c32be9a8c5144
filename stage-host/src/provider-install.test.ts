import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import AdmZip from 'adm-zip';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DiffmeshError } from '@diffmesh/core';
import { providerStatuses } from './execution-providers.js';
import { installProvider, providerInstallPlan } from './provider-install.js';

// onnxruntime-node's CUDA/TensorRT files come from its NuGet package; `diffmesh gpu install
// --from FILE.nupkg` puts them where its own installer would. Here into a folder of the test's.
let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-provider-install-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const onLinuxX64 = process.platform === 'linux' && process.arch === 'x64';

describe.runIf(onLinuxX64)('installing a GPU provider', () => {
  it("names the package and the files, as onnxruntime-node's installer metadata does", () => {
    const plan = providerInstallPlan('cuda', root);
    expect(plan.manifest).toBe('cuda12');
    expect(plan.nuget).toEqual({ name: 'Microsoft.ML.OnnxRuntime.Gpu.Linux', version: '1.30.0' });
    expect(plan.files.map((f) => path.basename(f.target)).sort()).toEqual([
      'libonnxruntime_providers_cuda.so',
      'libonnxruntime_providers_shared.so',
      'libonnxruntime_providers_tensorrt.so',
    ]);
    expect(plan.files.every((f) => f.inPackage.startsWith('runtimes/linux-x64/native/'))).toBe(true);
  });

  it('takes the files from a downloaded .nupkg; refuses one that lacks them, and names a provider it has no package for', async () => {
    const plan = providerInstallPlan('tensorrt', root);
    const zip = new AdmZip();
    for (const f of plan.files) zip.addFile(f.inPackage, Buffer.from(`contents of ${f.inPackage}`));
    const pkg = path.join(root, 'gpu.nupkg');
    zip.writeZip(pkg);
    const bin = path.join(root, 'bin');
    const lines: string[] = [];
    await installProvider('tensorrt', { from: pkg, binDir: bin, log: (l) => lines.push(l) });
    for (const f of providerInstallPlan('tensorrt', bin).files) {
      expect(readFileSync(f.target, 'utf8')).toBe(`contents of ${f.inPackage}`);
    }
    expect(lines).toHaveLength(3);

    const partial = new AdmZip();
    partial.addFile(plan.files[0].inPackage, Buffer.from('x'));
    await writeFile(path.join(root, 'partial.nupkg'), partial.toBuffer());
    const err = await installProvider('cuda', { from: path.join(root, 'partial.nupkg'), binDir: path.join(root, 'bin2') }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).message).toMatch(/lacks runtimes\/linux-x64\/native\/libonnxruntime_providers_/);
    expect(existsSync(path.join(root, 'bin2'))).toBe(false);

    await writeFile(path.join(root, 'not-a-zip.nupkg'), 'hello');
    await expect(installProvider('cuda', { from: path.join(root, 'not-a-zip.nupkg'), binDir: bin })).rejects.toThrow(
      /is not a NuGet package/,
    );
    expect(() => providerInstallPlan('webgpu')).toThrow(/not installed separately \(installable: cuda, tensorrt/);
  });

  it('says what CUDA and TensorRT lack here: provider files, and the NVIDIA libraries by soname', () => {
    const cuda = providerStatuses().find((s) => s.provider === 'cuda');
    expect(cuda).toBeDefined();
    if (!cuda || cuda.installed) return; // a machine with the provider installed has other answers
    expect(cuda.missingFiles).toContain('libonnxruntime_providers_cuda.so');
    // Without the provider files, the libraries onnxruntime-node 1.30's CUDA 12 build loads.
    for (const l of cuda.missingLibraries) expect(l.soname).toMatch(/^lib(cudart|cublas|cublasLt|curand|cufft|cudnn)\.so\.\d+$/);
  });
});
