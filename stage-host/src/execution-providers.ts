import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { Code, DiffmeshError } from '@diffmesh/core';

/** Execution providers a stage may ask onnxruntime for. */
export const EXECUTION_PROVIDERS = ['cpu', 'cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'] as const;
export type ExecutionProvider = (typeof EXECUTION_PROVIDERS)[number];

/** Providers that run on a GPU (sessions on them share one device thread per process). */
export const GPU_PROVIDERS: readonly ExecutionProvider[] = ['cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'];

/** Providers whose files onnxruntime-node's own installer adds (`diffmesh gpu install`). */
export const INSTALLABLE_PROVIDERS = ['cuda', 'tensorrt'] as const;
export type InstallableProvider = (typeof INSTALLABLE_PROVIDERS)[number];

/**
 * The provider files onnxruntime-node's installer puts beside its binding
 * (`script/install-metadata.js`, manifest `linux/x64:cuda12`), per provider.
 */
const PROVIDER_FILES: Record<InstallableProvider, string[]> = {
  cuda: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'],
  tensorrt: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_tensorrt.so'],
};

/**
 * The NVIDIA libraries onnxruntime-node 1.30's GPU build (NuGet Microsoft.ML.OnnxRuntime.Gpu.Linux,
 * CUDA 12.x, cuDNN 9.x, TensorRT 10.x) loads, by soname, with what provides each. Used to say
 * what is missing before the provider files are there to ask `ldd`.
 */
const PROVIDER_LIBRARIES: Record<InstallableProvider, Array<{ soname: string; from: string }>> = {
  cuda: [
    { soname: 'libcudart.so.12', from: 'CUDA 12.x runtime' },
    { soname: 'libcublas.so.12', from: 'CUDA 12.x cuBLAS' },
    { soname: 'libcublasLt.so.12', from: 'CUDA 12.x cuBLAS' },
    { soname: 'libcurand.so.10', from: 'CUDA 12.x cuRAND' },
    { soname: 'libcufft.so.11', from: 'CUDA 12.x cuFFT' },
    { soname: 'libcudnn.so.9', from: 'cuDNN 9.x for CUDA 12' },
  ],
  tensorrt: [
    { soname: 'libnvinfer.so.10', from: 'TensorRT 10.x' },
    { soname: 'libnvinfer_plugin.so.10', from: 'TensorRT 10.x' },
    { soname: 'libnvonnxparser.so.10', from: 'TensorRT 10.x ONNX parser' },
  ],
};

/** The folder holding onnxruntime-node's binding and provider libraries on this platform. */
export function onnxruntimeBinDir(): string {
  const pkg = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
  return path.join(path.dirname(pkg), 'bin', 'napi-v6', platform(), arch());
}

/** What one provider needs on this machine, and what of it is missing. */
export interface ProviderStatus {
  provider: ExecutionProvider;
  /** In onnxruntime-node's package for this platform (cpu, webgpu on Linux x64). */
  bundled: boolean;
  /** Its provider files are present (always, for a bundled provider). */
  installed: boolean;
  /** Provider files onnxruntime-node's installer has not put in place. */
  missingFiles: string[];
  /** Shared libraries the provider loads that this machine lacks (soname and what provides it). */
  missingLibraries: Array<{ soname: string; from: string }>;
}

/**
 * The status of every provider onnxruntime-node knows on this platform: bundled, installed
 * (`diffmesh gpu install`), and the shared libraries that CUDA/TensorRT would load but this
 * machine lacks (from `ldd` when the provider files are there, else from the soname list of
 * onnxruntime-node's GPU build, looked up in the linker cache and `LD_LIBRARY_PATH`).
 */
export function providerStatuses(): ProviderStatus[] {
  const dir = onnxruntimeBinDir();
  return providerFiles().map((s): ProviderStatus => {
    if (s.bundled || !(INSTALLABLE_PROVIDERS as readonly string[]).includes(s.provider)) return { ...s, missingLibraries: [] };
    const p = s.provider as InstallableProvider;
    const own = `libonnxruntime_providers_${p}.so`;
    const fromLdd = s.missingFiles.includes(own) ? undefined : lddMissing(path.join(dir, own));
    const missingLibraries = fromLdd
      ? fromLdd.map((soname) => ({ soname, from: libraryOrigin(soname) }))
      : PROVIDER_LIBRARIES[p].filter((l) => !findLibrary(l.soname));
    return { ...s, missingLibraries };
  });
}

/**
 * Which providers onnxruntime-node has here and which of their files are in place: the cheap
 * part of {@link providerStatuses}, without looking for shared libraries (no child process).
 */
function providerFiles(): Array<Omit<ProviderStatus, 'missingLibraries'>> {
  const dir = onnxruntimeBinDir();
  return ort.listSupportedBackends().flatMap((b): Array<Omit<ProviderStatus, 'missingLibraries'>> => {
    if (!(EXECUTION_PROVIDERS as readonly string[]).includes(b.name)) return [];
    const provider = b.name as ExecutionProvider;
    if (b.bundled || !(INSTALLABLE_PROVIDERS as readonly string[]).includes(provider)) {
      return [{ provider, bundled: b.bundled, installed: b.bundled, missingFiles: [] }];
    }
    const missingFiles = PROVIDER_FILES[provider as InstallableProvider].filter((f) => !existsSync(path.join(dir, f)));
    return [{ provider, bundled: false, installed: missingFiles.length === 0, missingFiles }];
  });
}

/** The execution providers this machine's onnxruntime-node can create sessions with (cpu, webgpu, and installed GPU providers). */
export function availableExecutionProviders(): string[] {
  return providerFiles()
    .filter((s) => s.installed)
    .map((s) => s.provider);
}

/** Refuses (INVALID_ARGUMENT) a provider name diffmesh does not know. */
export function checkProviderNames(providers: readonly string[]): void {
  for (const p of providers) {
    if (!(EXECUTION_PROVIDERS as readonly string[]).includes(p)) {
      throw new DiffmeshError(
        Code.INVALID_ARGUMENT,
        'INVALID_PARAMETER',
        `execution provider "${p}" is unknown (known: ${EXECUTION_PROVIDERS.join(', ')})`,
        { metadata: { field: 'execution_providers' } },
      );
    }
  }
}

/**
 * Checks that every provider asked for is known and installed here: `coreml` only on macOS,
 * `dml` only on Windows, `cuda`/`tensorrt` once `diffmesh gpu install` has fetched them.
 * Throws INVALID_ARGUMENT for an unknown name, FAILED_PRECONDITION naming the provider, what the
 * platform has and what to do.
 */
export function checkExecutionProviders(providers: readonly string[]): void {
  const available = availableExecutionProviders();
  checkProviderNames(providers);
  for (const p of providers) {
    if (!available.includes(p)) {
      // Only a failure looks for the libraries (a child process) to name them.
      const status = providerStatuses().find((s) => s.provider === p);
      const libs = status?.missingLibraries.length
        ? `; this machine also lacks ${status.missingLibraries.map((l) => `${l.soname} (${l.from})`).join(', ')}`
        : '';
      const hint = status ? `; install it with \`npx diffmesh gpu install ${p}\` (missing: ${status.missingFiles.join(', ')})${libs}` : '';
      throw new DiffmeshError(
        Code.FAILED_PRECONDITION,
        'MODEL_LOAD_FAILED',
        `execution provider "${p}" is not available in onnxruntime-node on ${platform()}/${arch()} (available: ${available.join(', ')})${hint}`,
        { metadata: { field: 'execution_providers' } },
      );
    }
  }
}

/** The sonames `ldd` reports as "not found" for `file`; undefined when ldd cannot run. */
function lddMissing(file: string): string[] | undefined {
  try {
    const out = execFileSync('ldd', [file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    return [...out.matchAll(/^\s*(\S+)\s+=>\s+not found/gm)].map((m) => m[1]);
  } catch {
    return undefined;
  }
}

function libraryOrigin(soname: string): string {
  for (const libs of Object.values(PROVIDER_LIBRARIES)) {
    const hit = libs.find((l) => l.soname === soname);
    if (hit) return hit.from;
  }
  return 'a library the provider links against';
}

let linkerCache: string | undefined;

/** True when the dynamic linker would find `soname` (its cache or `LD_LIBRARY_PATH`). */
function findLibrary(soname: string): boolean {
  for (const dir of (process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean)) {
    if (existsSync(path.join(dir, soname))) return true;
  }
  if (linkerCache === undefined) {
    try {
      linkerCache = execFileSync('ldconfig', ['-p'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    } catch {
      linkerCache = '';
    }
  }
  if (linkerCache.includes(`${soname} `)) return true;
  // Where ldconfig is not on PATH (a slim image), look in the usual folders.
  for (const dir of ['/usr/lib/x86_64-linux-gnu', '/usr/local/cuda/lib64', '/usr/lib64', '/usr/lib']) {
    try {
      if (readdirSync(dir).includes(soname)) return true;
    } catch {
      // not there
    }
  }
  return false;
}
