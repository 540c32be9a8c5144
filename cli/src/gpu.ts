import { execFile } from 'node:child_process';
import { arch, platform } from 'node:os';
import { asDiffmeshError, Code } from '@diffmesh/core';
import {
  installProvider,
  ldLibraryPathFor,
  locateLibraries,
  onnxruntimeBinDir,
  onnxruntimeNodeVersion,
  probeInstalledProviders,
  PROVIDER_LIBRARIES,
  providerInstallPlan,
  providerStatuses,
  pythonWheelLibDirs,
  type ExecutionProvider,
  type LibraryLocation,
  type ProviderProbe,
  type ProviderStatus,
} from '@diffmesh/stage-host';

/** The WebGPU adapter Dawn picks on this machine (what onnxruntime's WebGPU provider runs on). */
export interface AdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** The adapter has `shader-f16` (float16 graphs run on it). */
  f16: boolean;
  /** A software adapter (SwiftShader, a CPU pretending to be a GPU). */
  fallback: boolean;
}

/** What `diffmesh gpu check` reports. */
export interface GpuReport {
  platform: string;
  /** The onnxruntime-node release (provider files must be of the same). */
  onnxruntimeNode: string;
  /** onnxruntime-node's binding folder (where `gpu install` puts provider files). */
  binDir: string;
  providers: Array<ProviderStatus & { probe?: ProviderProbe }>;
  /** Linux x64: where each CUDA 13 library the CUDA provider loads is here, or that it is missing. */
  cudaLibraries?: LibraryLocation[];
  /** The lib folders of Python's `nvidia-*` wheels searched for them. */
  pythonWheelDirs?: string[];
  /** The `LD_LIBRARY_PATH` that makes the libraries found off the linker's path (the wheels') loadable. */
  ldLibraryPath?: string;
  /** The WebGPU adapter, or why it could not be read. */
  adapter: AdapterInfo | { error: string };
  /** The Vulkan driver manifests the WebGPU provider is told to use (`VK_ICD_FILENAMES`), if set. */
  vulkanIcd?: string;
}

/**
 * Looks at every execution provider onnxruntime-node knows here: whether it is bundled or
 * installed, what it lacks (CUDA/TensorRT: provider files and shared libraries by soname), and
 * for those present, whether a session really loads and runs on it and runs float16 (a probe
 * graph in a runner thread). The WebGPU adapter's vendor, architecture and f16 come from Dawn
 * in a child process (`diffmesh gpu adapter`), so a driver that crashes cannot take the check down.
 */
export async function gpuReport(cliPath: string): Promise<GpuReport> {
  const providers = await probeInstalledProviders();
  const linux = platform() === 'linux' && arch() === 'x64';
  const wheels = linux ? pythonWheelLibDirs() : [];
  const cudaLibraries = linux ? locateLibraries(PROVIDER_LIBRARIES.cuda, wheels) : undefined;
  const ldLibraryPath = cudaLibraries && ldLibraryPathFor(cudaLibraries);
  return {
    platform: `${platform()}/${arch()}`,
    onnxruntimeNode: onnxruntimeNodeVersion(),
    binDir: onnxruntimeBinDir(),
    providers,
    ...(cudaLibraries ? { cudaLibraries, pythonWheelDirs: wheels } : {}),
    ...(ldLibraryPath ? { ldLibraryPath } : {}),
    adapter: await adapterInChild(cliPath),
    ...(process.env.VK_ICD_FILENAMES ? { vulkanIcd: process.env.VK_ICD_FILENAMES } : {}),
  };
}

/** The adapter from `diffmesh gpu adapter --json` run as a child process. */
function adapterInChild(cliPath: string): Promise<AdapterInfo | { error: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cliPath, 'gpu', 'adapter', '--json'], { timeout: 60_000 }, (err, stdout, stderr) => {
      const text = stdout.trim();
      try {
        const parsed = JSON.parse(text) as AdapterInfo | { error: string };
        resolve(parsed);
      } catch {
        const why = (stderr || (err ? err.message : '')).trim().split('\n').at(-1) ?? 'no answer';
        resolve({ error: `the adapter probe ended without an answer (${why})` });
      }
    });
  });
}

/**
 * The WebGPU adapter, through Dawn's Node.js binding (the optional npm package `webgpu`, the
 * same Dawn family onnxruntime's WebGPU provider is built on). Resolves with `{ error }` when
 * the package is not installed or no adapter answers.
 */
export async function readAdapter(): Promise<AdapterInfo | { error: string }> {
  let mod: { create(opts: string[]): GpuLike; globals: Record<string, unknown> };
  try {
    // A variable specifier: bundlers leave an optional package alone.
    const name = 'webgpu';
    mod = (await import(name)) as typeof mod;
  } catch {
    return { error: 'adapter details need the optional npm package "webgpu" (Dawn for Node.js), which is not installed' };
  }
  Object.assign(globalThis, mod.globals);
  const adapter = await mod.create([]).requestAdapter();
  if (!adapter) return { error: 'no WebGPU adapter: no Vulkan driver answered (VK_ICD_FILENAMES names the driver manifests to use)' };
  const i = adapter.info;
  return {
    vendor: i.vendor,
    architecture: i.architecture,
    device: i.device,
    description: i.description,
    f16: adapter.features.has('shader-f16'),
    fallback: Boolean(i.isFallbackAdapter),
  };
}

interface GpuLike {
  requestAdapter(): Promise<
    | {
        info: { vendor: string; architecture: string; device: string; description: string; isFallbackAdapter?: boolean };
        features: { has(name: string): boolean };
      }
    | null
    | undefined
  >;
}

/** The report as the terminal shows it. */
export function formatGpuReport(r: GpuReport): string {
  const lines = [`platform ${r.platform}; onnxruntime-node ${r.onnxruntimeNode}, providers in ${r.binDir}`, ''];
  for (const p of r.providers) lines.push(...providerLines(p));
  if (r.cudaLibraries) lines.push('', ...cudaLibraryLines(r));
  lines.push('');
  if ('error' in r.adapter) lines.push(`WebGPU adapter: ${r.adapter.error}`);
  else {
    const a = r.adapter;
    lines.push(
      `WebGPU adapter: ${a.vendor} ${a.architecture} (${a.description || a.device})${a.fallback ? ', software' : ''}; shader-f16: ${a.f16 ? 'yes' : 'no'}`,
    );
  }
  if (r.vulkanIcd) lines.push(`Vulkan drivers (VK_ICD_FILENAMES): ${r.vulkanIcd}`);
  return lines.join('\n');
}

function providerLines(p: GpuReport['providers'][number]): string[] {
  let state: string;
  if (p.versionMismatch) {
    state = `refused: its files are of onnxruntime ${p.versionMismatch.files}, onnxruntime-node is ${p.versionMismatch.core} (\`npx diffmesh gpu install ${p.provider} --from …\` with ${p.versionMismatch.core} files)`;
  } else if (!p.installed) state = `not installed (\`npx diffmesh gpu install ${p.provider}\`)`;
  else if (!p.probe) state = 'installed';
  else if (p.probe.works) state = `works${p.probe.f16 === false ? '; float16: no' : p.probe.f16 ? '; float16: yes' : ''}`;
  else state = `does not work here: ${p.probe.error}`;
  if (p.installed && p.version) state += ` (onnxruntime ${p.version})`;
  const lines = [`${p.provider.padEnd(9)} ${(p.bundled ? 'bundled' : 'opt-in').padEnd(8)} ${state}`];
  if (p.missingFiles.length > 0) lines.push(`          missing provider files: ${p.missingFiles.join(', ')}`);
  if (p.missingLibraries.length > 0) {
    lines.push(`          missing libraries: ${p.missingLibraries.map((l) => `${l.soname} (${l.from})`).join(', ')}`);
  }
  if (p.probe?.f16 === false && p.probe.f16Error) lines.push(`          float16: ${p.probe.f16Error}`);
  return lines;
}

const VIA: Record<NonNullable<LibraryLocation['via']>, string> = {
  LD_LIBRARY_PATH: 'LD_LIBRARY_PATH',
  ldconfig: "the linker's cache",
  'system folder': 'a system folder',
  'Python wheel': "a Python nvidia-* wheel; not on the linker's path",
};

/** Where each CUDA 13 library is, or that it is missing, and the LD_LIBRARY_PATH that reaches the wheels'. */
function cudaLibraryLines(r: GpuReport): string[] {
  const libs = r.cudaLibraries ?? [];
  const found = libs.filter((l) => l.path).length;
  const lines = [`CUDA 13 libraries the cuda provider loads: ${found} of ${libs.length} found`];
  for (const l of libs) {
    const where = l.path
      ? `${l.path} (${l.via === 'system folder' && !l.linkable ? "a system folder; not on the linker's path" : VIA[l.via ?? 'ldconfig']})`
      : `missing (${l.from})`;
    lines.push(`  ${l.soname.padEnd(18)} ${where}`);
  }
  if (found < libs.length) {
    lines.push(
      r.pythonWheelDirs?.length
        ? `  searched LD_LIBRARY_PATH, the linker's cache and the Python wheels' ${r.pythonWheelDirs.join(', ')}`
        : "  searched LD_LIBRARY_PATH and the linker's cache; no Python nvidia-* wheels here (PyTorch's CUDA 13 build brings them; or install NVIDIA's CUDA 13 and cuDNN 9)",
    );
  }
  if (r.ldLibraryPath) lines.push(`  to load the ones off the linker's path: export LD_LIBRARY_PATH=${r.ldLibraryPath}`);
  return lines;
}

/** `diffmesh gpu check`: exit 1 when a provider named in `--require` does not work here. */
export async function runGpuCheck(cliPath: string, flags: { json?: boolean; require?: string }): Promise<number> {
  const required = (flags.require ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const report = await gpuReport(cliPath);
  process.stdout.write(`${flags.json ? JSON.stringify(report, null, 2) : formatGpuReport(report)}\n`);
  const failing = required.filter((p) => !report.providers.find((x) => x.provider === p)?.probe?.works);
  if (failing.length > 0) {
    process.stderr.write(`diffmesh: required execution provider${failing.length > 1 ? 's' : ''} not working here: ${failing.join(', ')}\n`);
    return 1;
  }
  return 0;
}

/** `diffmesh gpu adapter`: prints the adapter (JSON with `--json`); exit 1 without one. */
export async function runGpuAdapter(flags: { json?: boolean }): Promise<number> {
  const adapter = await readAdapter();
  process.stdout.write(`${flags.json ? JSON.stringify(adapter) : 'error' in adapter ? adapter.error : JSON.stringify(adapter, null, 2)}\n`);
  return 'error' in adapter ? 1 : 0;
}

/** `diffmesh gpu install <provider> [--from PATH]`. */
export async function runGpuInstall(provider: string, flags: { from?: string }): Promise<number> {
  let plan;
  try {
    plan = providerInstallPlan(provider);
  } catch (err) {
    process.stderr.write(`diffmesh: ${asDiffmeshError(err).message}\n`);
    return 2;
  }
  const core = onnxruntimeNodeVersion();
  process.stdout.write(
    flags.from
      ? `installing the ${provider} provider of onnxruntime-node ${core} from ${flags.from}\n`
      : `installing the ${provider} provider of onnxruntime-node ${core}: ${plan.nuget.name} ${plan.nuget.version} from NuGet\n`,
  );
  try {
    await installProvider(provider, { ...(flags.from ? { from: flags.from } : {}), log: (l) => process.stdout.write(`  ${l}\n`) });
  } catch (err) {
    const e = asDiffmeshError(err);
    process.stderr.write(`diffmesh: ${e.message}\n`);
    return e.code === Code.INVALID_ARGUMENT ? 2 : 1;
  }
  const status = providerStatuses().find((s) => s.provider === (provider as ExecutionProvider));
  if (status && status.missingLibraries.length > 0) {
    const where = locateLibraries(status.missingLibraries);
    const path = ldLibraryPathFor(where);
    process.stdout.write(
      `installed; this machine still lacks: ${status.missingLibraries.map((l) => `${l.soname} (${l.from})`).join(', ')}\n` +
        (path
          ? `some are in Python's nvidia-* wheels: export LD_LIBRARY_PATH=${path}\n`
          : 'install them (NVIDIA CUDA 13 runtime, cuBLAS, cuRAND, cuDNN 9; TensorRT 10 for tensorrt) where the dynamic linker finds them, then run `npx diffmesh gpu check`\n'),
    );
  } else {
    process.stdout.write('installed; `npx diffmesh gpu check` tells whether it runs here\n');
  }
  return 0;
}
