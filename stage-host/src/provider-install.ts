import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import path from 'node:path';
import { Code, DiffmeshError } from '@diffmesh/core';
import { INSTALLABLE_PROVIDERS, onnxruntimeBinDir, PROVIDER_FILES, type InstallableProvider } from './execution-providers.js';
import { onnxruntimeNodeVersion, providerFilesVersion } from './onnxruntime-version.js';
import { openProviderSource, PROVIDER_FILE_NAMES, type ProviderSource } from './provider-source.js';

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

/** What `installProvider` did. */
export interface ProviderInstallResult extends ProviderInstallPlan {
  /** Where the files came from (`from`), when not from NuGet. */
  source?: ProviderSource;
  /** The onnxruntime version of the installed files (the core's). */
  version: string;
  /** The files put beside onnxruntime-node's binding. */
  installed: string[];
}

/**
 * Installs a GPU provider's files into onnxruntime-node: from NuGet through its own installer
 * (`npx diffmesh gpu install cuda`; needs network access to api.nuget.org), or from `from`:
 * onnxruntime's Linux GPU release archive, an npm package of the files (tarball or installed
 * folder), a downloaded `.nupkg`, or a directory holding them ({@link openProviderSource}).
 * Files of another onnxruntime version than onnxruntime-node's are refused, naming both, before
 * anything is written (a provider is loaded into its core's process and must be of its exact
 * release). `log` gets one line per file. Rejects with UNAVAILABLE when NuGet cannot be reached,
 * FAILED_PRECONDITION when the source lacks a file or is of another version, INVALID_ARGUMENT
 * (field `from`) when it is not a source of provider files.
 */
export async function installProvider(
  provider: string,
  opts: { from?: string; binDir?: string; log?: (line: string) => void; coreVersion?: string } = {},
): Promise<ProviderInstallResult> {
  const plan = providerInstallPlan(provider, opts.binDir);
  const log = opts.log ?? (() => undefined);
  const core = opts.coreVersion ?? onnxruntimeNodeVersion();
  if (!opts.from) {
    await runOrtInstaller(plan, log);
    return { ...plan, version: core, installed: plan.files.map((f) => f.target) };
  }
  const binDir = opts.binDir ?? onnxruntimeBinDir();
  mkdirSync(binDir, { recursive: true });
  // Archives are unpacked beside the binding, so their files are renamed into place.
  const scratch = mkdtempSync(path.join(binDir, '.diffmesh-install-'));
  try {
    const source = await openProviderSource(opts.from, scratch);
    const described = `${opts.from} (${source.kind}${source.npmPackage ? ` ${source.npmPackage}` : ''})`;
    const lacking = PROVIDER_FILES[plan.provider].filter((f) => !source.files.includes(f));
    if (lacking.length > 0) {
      throw new DiffmeshError(Code.FAILED_PRECONDITION, 'INVALID_PARAMETER', `from: ${described} lacks ${lacking.join(', ')}`, {
        metadata: { field: 'from' },
      });
    }
    const version = sourceVersion(source, described, plan.provider, core);
    const installed: string[] = [];
    const unpacked = source.dir === scratch || source.dir.startsWith(scratch + path.sep);
    const origin = unpacked ? path.join(opts.from, path.relative(scratch, source.dir)) : source.dir;
    for (const f of source.files) {
      const target = path.join(binDir, f);
      // Written beside the target and renamed into place: a session never loads half a library.
      const tmp = `${target}.${process.pid}.part`;
      if (unpacked) renameSync(path.join(source.dir, f), tmp);
      else copyFileSync(path.join(source.dir, f), tmp);
      chmodSync(tmp, 0o755);
      renameSync(tmp, target);
      installed.push(target);
      log(`${path.join(origin, f)} → ${target}`);
    }
    removeStale(binDir, source.files, core, log);
    return { ...plan, source, version, installed };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The onnxruntime version of the source's files; FAILED_PRECONDITION naming both when it is not `core`. */
function sourceVersion(source: ProviderSource, described: string, provider: InstallableProvider, core: string): string {
  const v = providerFilesVersion(source.dir, source.files, core);
  const fail = (message: string) =>
    new DiffmeshError(Code.FAILED_PRECONDITION, 'INVALID_PARAMETER', `from: ${described} ${message}`, { metadata: { field: 'from' } });
  if (v.foreign.length > 0) throw fail(`holds files that are not Linux ${process.arch} shared libraries: ${v.foreign.join(', ')}`);
  const versions = [...new Set(v.byFile.map((b) => b.version))];
  if (versions.length > 1) throw fail(`mixes onnxruntime releases: ${v.byFile.map((b) => `${b.file} ${b.version}`).join(', ')}`);
  const version = v.version ?? source.versionNumber;
  if (!version) {
    throw fail(
      'does not say which onnxruntime release its files are of (no version string in their .rodata, no VERSION_NUMBER beside them)',
    );
  }
  if (version !== core) {
    throw fail(
      `holds the ${provider} provider of onnxruntime ${version}, and this onnxruntime-node is ${core}: a provider runs only with the core of its exact release. ` +
        `Install onnxruntime-node@${version} (in a diffmesh checkout: npm install onnxruntime-node@${version} -w stage-host -w models -w integration-tests --save-exact && npm dedupe), or take the ${core} provider files ` +
        `(onnxruntime-linux-x64-gpu-${core}.tgz of github.com/microsoft/onnxruntime/releases)`,
    );
  }
  return version;
}

/** Removes provider files left from another onnxruntime release (they would be refused at session time). */
function removeStale(binDir: string, kept: readonly string[], core: string, log: (line: string) => void): void {
  const others = PROVIDER_FILE_NAMES.filter((f) => !kept.includes(f) && existsSync(path.join(binDir, f)));
  const v = providerFilesVersion(binDir, others, core);
  for (const { file, version } of v.byFile) {
    if (version === core) continue;
    rmSync(path.join(binDir, file), { force: true });
    log(`removed ${file} of onnxruntime ${version}`);
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
                `Download the .nupkg (or onnxruntime-linux-x64-gpu-${plan.nuget.version}.tgz of github.com/microsoft/onnxruntime/releases) elsewhere and run \`npx diffmesh gpu install ${plan.provider} --from FILE\``
            : `onnxruntime-node's installer failed: ${why.trim()}`,
        ),
      );
    });
  });
}
