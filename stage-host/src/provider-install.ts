import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import path from 'node:path';
import AdmZip from 'adm-zip';
import { Code, DiffmeshError } from '@diffmesh/core';
import { INSTALLABLE_PROVIDERS, onnxruntimeBinDir, type InstallableProvider } from './execution-providers.js';

/** onnxruntime-node's `script/install-metadata.js`: which files of which NuGet package its installer adds. */
interface InstallMetadata {
  requirements: Record<string, string[]>;
  manifests: Record<string, Record<string, { package: string; path: string }>>;
  packages: Record<string, { name: string; versions: Array<{ feed: string; version: string }> }>;
}

function ortPackageDir(): string {
  return path.dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'));
}

function installMetadata(): InstallMetadata {
  return createRequire(import.meta.url)(path.join(ortPackageDir(), 'script', 'install-metadata.js')) as InstallMetadata;
}

/** What installing a GPU provider puts where: the manifest, its files and the NuGet package they come from. */
export interface ProviderInstallPlan {
  provider: InstallableProvider;
  /** The installer's manifest name (onnxruntime-node's `--onnxruntime-node-install=<name>`), e.g. `cuda12`. */
  manifest: string;
  /** NuGet package and version holding the files, e.g. Microsoft.ML.OnnxRuntime.Gpu.Linux 1.30.0. */
  nuget: { name: string; version: string };
  /** Files: their path inside the package and where they go. */
  files: Array<{ inPackage: string; target: string }>;
}

/**
 * The files onnxruntime-node's own installer would add for `provider` on this platform (CUDA
 * and TensorRT come from one NuGet package). FAILED_PRECONDITION on a platform without it.
 */
export function providerInstallPlan(provider: string, binDir: string = onnxruntimeBinDir()): ProviderInstallPlan {
  if (!(INSTALLABLE_PROVIDERS as readonly string[]).includes(provider)) {
    throw new DiffmeshError(
      Code.INVALID_ARGUMENT,
      'INVALID_PARAMETER',
      `provider: "${provider}" is not installed separately (installable: ${INSTALLABLE_PROVIDERS.join(', ')}; cpu and webgpu ship with onnxruntime-node)`,
      { metadata: { field: 'provider' } },
    );
  }
  const meta = installMetadata();
  const key = `${platform()}/${arch()}`;
  const manifest = meta.requirements[key]?.find((m) => m.startsWith('cuda'));
  const files = manifest ? meta.manifests[`${key}:${manifest}`] : undefined;
  if (!manifest || !files) {
    throw new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'INVALID_PARAMETER',
      `onnxruntime-node has no ${provider} provider for ${key} (it has one for linux/x64 and win32/x64)`,
      { metadata: { field: 'provider' } },
    );
  }
  const entries = Object.entries(files);
  const pkg = meta.packages[entries[0][1].package];
  const version = pkg.versions.find((v) => v.feed === 'nuget')?.version ?? pkg.versions[0]?.version ?? '';
  return {
    provider: provider as InstallableProvider,
    manifest,
    nuget: { name: pkg.name, version },
    files: entries.map(([file, f]) => ({ inPackage: f.path, target: path.join(binDir, file) })),
  };
}

/**
 * Installs a GPU provider's files into onnxruntime-node, as its own installer does: from NuGet
 * (`npx diffmesh gpu install cuda`; needs network access to api.nuget.org) or from a `.nupkg`
 * file already downloaded (air-gapped machines, image builds). `log` gets the installer's
 * lines. Rejects with UNAVAILABLE when NuGet cannot be reached, FAILED_PRECONDITION when the
 * package lacks a file.
 */
export async function installProvider(
  provider: string,
  opts: { from?: string; binDir?: string; log?: (line: string) => void } = {},
): Promise<ProviderInstallPlan> {
  const plan = providerInstallPlan(provider, opts.binDir);
  const log = opts.log ?? (() => undefined);
  if (opts.from) {
    extractFrom(opts.from, plan, log);
    return plan;
  }
  await runOrtInstaller(plan, log);
  return plan;
}

function extractFrom(file: string, plan: ProviderInstallPlan, log: (line: string) => void): void {
  if (!existsSync(file)) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `from: ${file} does not exist`, { metadata: { field: 'from' } });
  }
  let zip: AdmZip;
  try {
    zip = new AdmZip(file);
  } catch (err) {
    throw new DiffmeshError(
      Code.INVALID_ARGUMENT,
      'INVALID_PARAMETER',
      `from: ${file} is not a NuGet package (a zip file): ${(err as Error).message}`,
      { metadata: { field: 'from' } },
    );
  }
  const missing = plan.files.filter((f) => !zip.getEntry(f.inPackage));
  if (missing.length > 0) {
    throw new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'INVALID_PARAMETER',
      `from: ${file} lacks ${missing.map((m) => m.inPackage).join(', ')} (expected ${plan.nuget.name} ${plan.nuget.version})`,
      { metadata: { field: 'from' } },
    );
  }
  for (const f of plan.files) {
    mkdirSync(path.dirname(f.target), { recursive: true });
    const entry = zip.getEntry(f.inPackage) as NonNullable<ReturnType<AdmZip['getEntry']>>;
    // Written beside the target and renamed into place: a session never loads half a library.
    const tmp = `${f.target}.${process.pid}.part`;
    writeFileSync(tmp, entry.getData(), { mode: 0o755 });
    renameSync(tmp, f.target);
    log(`${f.inPackage} → ${f.target}`);
  }
}

/** Runs onnxruntime-node's `script/install.js --onnxruntime-node-install=<manifest>`. */
function runOrtInstaller(plan: ProviderInstallPlan, log: (line: string) => void): Promise<void> {
  const dir = ortPackageDir();
  return new Promise((resolve, reject) => {
    // The installer reads its environment before its arguments: an ONNXRUNTIME_NODE_INSTALL=skip
    // left set (as images set it for `npm ci`) would make it do nothing.
    const env: NodeJS.ProcessEnv = { ...process.env, ONNXRUNTIME_NODE_INSTALL: plan.manifest };
    delete env.npm_config_onnxruntime_node_install;
    const child = spawn(process.execPath, [path.join(dir, 'script', 'install.js'), `--onnxruntime-node-install=${plan.manifest}`], {
      cwd: dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const errors: string[] = [];
    // Its progress lines are passed on; its errors (a stack trace) are summed up below.
    child.stdout.on('data', (c: Buffer) => {
      for (const line of c.toString().split('\n').filter(Boolean)) log(line);
    });
    child.stderr.on('data', (c: Buffer) => errors.push(...c.toString().split('\n').filter(Boolean)));
    child.on('error', reject);
    child.on('exit', (code) => {
      const absent = plan.files.filter((f) => !existsSync(f.target));
      if (code === 0 && absent.length === 0) {
        resolve();
        return;
      }
      if (code === 0) {
        reject(
          new DiffmeshError(
            Code.FAILED_PRECONDITION,
            'MODEL_LOAD_FAILED',
            `onnxruntime-node's installer ended without putting ${absent.map((f) => path.basename(f.target)).join(', ')} in place`,
          ),
        );
        return;
      }
      const why = errors.find((l) => /Error:/.test(l)) ?? errors.at(-1) ?? `exit code ${code}`;
      const offline = /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|getaddrinfo/.test(errors.join('\n'));
      reject(
        new DiffmeshError(
          offline ? Code.UNAVAILABLE : Code.FAILED_PRECONDITION,
          'MODEL_LOAD_FAILED',
          offline
            ? `could not download ${plan.nuget.name} ${plan.nuget.version} from NuGet (${why.trim()}): this machine cannot reach api.nuget.org. ` +
                `Download the .nupkg elsewhere and run \`npx diffmesh gpu install ${plan.provider} --from FILE.nupkg\``
            : `onnxruntime-node's installer failed: ${why.trim()}`,
        ),
      );
    });
  });
}
