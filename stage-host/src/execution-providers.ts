import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { Code, DiffmeshError } from '@diffmesh/core';
import { describeMissing, locateLibraries, PROVIDER_LIBRARIES, type LibraryNeed } from './cuda-libraries.js';
import { onnxruntimeNodeVersion, providerFilesVersion } from './onnxruntime-version.js';

/** Execution providers a stage may ask onnxruntime for. */
export const EXECUTION_PROVIDERS = ['cpu', 'cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'] as const;
export type ExecutionProvider = (typeof EXECUTION_PROVIDERS)[number];

/** Providers that run on a GPU (sessions on them share one device thread per process). */
export const GPU_PROVIDERS: readonly ExecutionProvider[] = ['cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'];

/** Providers whose files onnxruntime-node's own installer adds (`diffmesh gpu install`). */
export const INSTALLABLE_PROVIDERS = ['cuda', 'tensorrt'] as const;
export type InstallableProvider = (typeof INSTALLABLE_PROVIDERS)[number];

/**
 * The provider files each GPU provider needs beside onnxruntime-node's binding (the ones
 * onnxruntime-node's installer puts there, `script/install-metadata.js`).
 */
export const PROVIDER_FILES: Record<InstallableProvider, string[]> = {
  cuda: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'],
  tensorrt: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_tensorrt.so'],
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
  missingLibraries: LibraryNeed[];
  /** The onnxruntime version its installed files carry (CUDA/TensorRT). */
  version?: string;
  /** Its files are of another onnxruntime release than onnxruntime-node's: refused (not installed). */
  versionMismatch?: { files: string; core: string };
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
    // ldd names what the file links against; cuDNN is opened at run time, so the list adds it.
    const known = locateLibraries(PROVIDER_LIBRARIES[p], [])
      .filter((l) => !l.linkable)
      .map(({ soname, from }) => ({ soname, from }));
    const linked = (fromLdd ?? []).map((soname) => ({ soname, from: libraryOrigin(soname) }));
    const missingLibraries = [...linked, ...known.filter((k) => !linked.some((l) => l.soname === k.soname))];
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
    return [{ provider, bundled: false, ...installedFiles(provider as InstallableProvider, dir) }];
  });
}

/**
 * Whether a GPU provider's files are in `dir` and of onnxruntime-node's release
 * (`coreVersion`): files of another release are not installed, they are refused before any
 * session (onnxruntime would load them into its process).
 */
export function installedFiles(
  provider: InstallableProvider,
  dir: string,
  coreVersion: string = onnxruntimeNodeVersion(),
): Pick<ProviderStatus, 'installed' | 'missingFiles' | 'version' | 'versionMismatch'> {
  const files = PROVIDER_FILES[provider];
  const missingFiles = files.filter((f) => !existsSync(path.join(dir, f)));
  if (missingFiles.length > 0) return { installed: false, missingFiles };
  const { version } = providerFilesVersion(dir, files, coreVersion);
  if (version && version !== coreVersion)
    return { installed: false, missingFiles, version, versionMismatch: { files: version, core: coreVersion } };
  return { installed: true, missingFiles, ...(version ? { version } : {}) };
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
      const libs = status?.missingLibraries.length ? `; this machine also lacks ${describeMissing(status.missingLibraries)}` : '';
      const m = status?.versionMismatch;
      const hint = m
        ? `; its files in ${onnxruntimeBinDir()} are of onnxruntime ${m.files} and onnxruntime-node is ${m.core}: a provider runs only with the core of its exact release (install onnxruntime-node@${m.files}, or the ${m.core} provider with \`npx diffmesh gpu install ${p} --from …\`)`
        : status
          ? `; install it with \`npx diffmesh gpu install ${p}\` (missing: ${status.missingFiles.join(', ')})${libs}`
          : '';
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
