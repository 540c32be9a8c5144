import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { onnxruntimeBinDir, onnxruntimeNodeVersion } from '@diffmesh/stage-host';
import { writeProviderPackage } from '@diffmesh/testing';
import type { GpuReport } from './gpu.js';

// `diffmesh gpu check` as a user runs it: on this machine (no GPU, no CUDA), and with WebGPU on
// SwiftShader, the software Vulkan in Debian's chromium package (npm test installs it).
const BIN = fileURLToPath(new URL('../bin/diffmesh.js', import.meta.url));
const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';

function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('diffmesh gpu check', () => {
  it('names what a machine without GPU libraries lacks, and what works', async () => {
    const { code, stdout } = await cli(['gpu', 'check', '--json'], { VK_ICD_FILENAMES: '/nonexistent/icd.json' });
    expect(code).toBe(0);
    const r = JSON.parse(stdout) as GpuReport;
    const by = Object.fromEntries(r.providers.map((p) => [p.provider, p]));
    expect(by.cpu).toMatchObject({ bundled: true, installed: true, probe: { works: true, f16: true } });
    expect(by.webgpu).toMatchObject({ bundled: true, probe: { works: false } });
    expect(by.webgpu.probe?.error).toMatch(/adapter/i);
    expect(r.onnxruntimeNode).toBe(onnxruntimeNodeVersion());
    if (process.platform === 'linux' && process.arch === 'x64' && !by.cuda.installed) {
      expect(by.cuda.missingFiles).toContain('libonnxruntime_providers_cuda.so');
      expect(by.cuda.missingLibraries.map((l) => l.soname)).toContain('libcudnn.so.9');
      expect(by.tensorrt.missingLibraries.map((l) => l.soname)).toContain('libnvinfer.so.10');
    }
    if (process.platform === 'linux' && process.arch === 'x64') {
      // Each CUDA 13 library the CUDA provider loads: where it is, or missing.
      expect(r.cudaLibraries?.map((l) => l.soname)).toEqual([
        'libcudart.so.13',
        'libcublas.so.13',
        'libcublasLt.so.13',
        'libcurand.so.10',
        'libcudnn.so.9',
        'libcuda.so.1',
      ]);
      for (const l of r.cudaLibraries ?? []) {
        if (l.path) expect(existsSync(l.path)).toBe(true);
        // What the CUDA provider reports missing is what this list does not find where the linker looks.
        if (!by.cuda.installed) expect(by.cuda.missingLibraries.some((m) => m.soname === l.soname)).toBe(!l.linkable);
      }
    }
    // The human form says the same and the install step.
    const text = await cli(['gpu', 'check'], { VK_ICD_FILENAMES: '/nonexistent/icd.json' });
    if (!by.cuda?.installed) expect(text.stdout).toMatch(/cuda +opt-in +not installed \(`npx diffmesh gpu install cuda`\)/);
    if (r.cudaLibraries) {
      expect(text.stdout).toContain(
        `CUDA 13 libraries the cuda provider loads: ${r.cudaLibraries.filter((l) => l.path).length} of 6 found`,
      );
      for (const l of r.cudaLibraries)
        expect(text.stdout).toMatch(new RegExp(`  ${l.soname.replaceAll('.', '\\.')} +${l.path ? l.path : 'missing'}`));
    }
    // --require makes it a gate for scripts.
    const gate = await cli(['gpu', 'check', '--require', 'webgpu'], { VK_ICD_FILENAMES: '/nonexistent/icd.json' });
    expect(gate.code).toBe(1);
    expect(gate.stderr).toMatch(/required execution provider not working here: webgpu/);
  });

  it.skipIf(!existsSync(SWIFTSHADER))('reads the WebGPU adapter and its f16 support (SwiftShader: none)', async () => {
    const { code, stdout } = await cli(['gpu', 'check', '--json', '--require', 'webgpu'], { VK_ICD_FILENAMES: SWIFTSHADER });
    expect(code).toBe(0);
    const r = JSON.parse(stdout) as GpuReport;
    expect(r.providers.find((p) => p.provider === 'webgpu')?.probe).toMatchObject({ works: true, f16: false });
    expect(r.adapter).toMatchObject({ vendor: 'google', architecture: 'swiftshader', f16: false, fallback: true });
    expect(r.vulkanIcd).toBe(SWIFTSHADER);
  });

  it('refuses a provider it cannot install, naming the ones it can', async () => {
    const { code, stderr } = await cli(['gpu', 'install', 'webgpu']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/"webgpu" is not installed separately \(installable: cuda, tensorrt/);
  });

  it.runIf(process.platform === 'linux' && process.arch === 'x64')(
    "refuses provider files of another onnxruntime release than onnxruntime-node's, naming both, and writes nothing",
    async () => {
      const core = onnxruntimeNodeVersion();
      const other = core === '1.29.0' ? '1.30.0' : '1.29.0';
      const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-gpu-install-'));
      try {
        const before = readdirSync(onnxruntimeBinDir()).sort();
        const from = await writeProviderPackage(dir, 'release-archive', other);
        const { code, stdout, stderr } = await cli(['gpu', 'install', 'cuda', '--from', from]);
        expect(code).toBe(1);
        expect(stdout).toContain(`installing the cuda provider of onnxruntime-node ${core} from ${from}`);
        expect(stderr).toContain(
          `(onnxruntime release archive) holds the cuda provider of onnxruntime ${other}, and this onnxruntime-node is ${core}`,
        );
        expect(readdirSync(onnxruntimeBinDir()).sort()).toEqual(before);
        const none = await cli(['gpu', 'install', 'cuda', '--from', path.join(dir, 'nothing-here')]);
        expect(none.code).toBe(2);
        expect(none.stderr).toMatch(/from: .*nothing-here does not exist/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
