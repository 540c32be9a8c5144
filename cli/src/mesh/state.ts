import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadTlsFiles, type TlsFiles } from '@diffmesh/core/client';

/** What `diffmesh up` leaves for `diffmesh status` and `generate --remote` on this machine. */
export interface MeshState {
  pid: number;
  natsUrl: string;
  /** The first scheduler's gRPC address. */
  schedulerAddress: string;
  /** Every scheduler's gRPC address, when `up` runs several. */
  schedulerAddresses?: string[];
  tensorAddress: string;
  /** `http://host:port` of the gateway, when `up` started one. */
  gatewayUrl?: string;
  logDir: string;
  startedAt: string;
  /** The schedulers' queue backend (`--queue` of `up`). */
  queue?: string;
  /**
   * The client credentials of an authenticated mesh (paths, never the secrets): the CA, the
   * `client` identity's certificate and key, and the NATS seed file of the `client` role.
   * Absent for `up --insecure`. `natsTls`: the mesh's own nats-server, which speaks mutual
   * TLS only (with the same CA, certificate and key).
   */
  credentials?: { ca: string; cert: string; key: string; nats: string; natsTls?: boolean };
  /** Every process `up` supervises, with its restarts so far (updated as they happen). */
  processes?: Array<{ name: string; pid: number; address: string; restarts: number; state: string }>;
}

/** The folder of the state file, where `up` also keeps the mesh's credentials (`credentials/`). */
export function stateDir(file = stateFile()): string {
  return path.dirname(file);
}

/** `$DIFFMESH_STATE_FILE`, else `<runtime dir or tmp>/diffmesh/mesh.json`. */
export function stateFile(): string {
  if (process.env.DIFFMESH_STATE_FILE) return process.env.DIFFMESH_STATE_FILE;
  const base = process.env.XDG_RUNTIME_DIR ?? tmpdir();
  return path.join(base, 'diffmesh', 'mesh.json');
}

export async function writeState(state: MeshState, file = stateFile()): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(state, null, 2)}\n`);
}

/** The state of a mesh that is still running, or undefined. */
export async function readState(file = stateFile()): Promise<MeshState | undefined> {
  let state: MeshState;
  try {
    state = JSON.parse(await readFile(file, 'utf8')) as MeshState;
  } catch {
    return undefined;
  }
  try {
    process.kill(state.pid, 0);
  } catch {
    return undefined; // the `up` process is gone
  }
  return state;
}

export async function clearState(file = stateFile()): Promise<void> {
  await rm(file, { force: true });
}

/**
 * The TLS files a client uses to call the schedulers at `addresses`: those named by
 * `DIFFMESH_TLS_CA`, `DIFFMESH_TLS_CERT` and `DIFFMESH_TLS_KEY` (any mesh), else the client
 * certificate of the mesh `up` runs here when `addresses` are its schedulers; undefined
 * (plaintext) otherwise.
 */
export function clientTls(
  addresses: readonly string[],
  state: MeshState | undefined,
  env: Record<string, string | undefined> = process.env,
): TlsFiles | undefined {
  if (env.DIFFMESH_TLS_CA || env.DIFFMESH_TLS_CERT) {
    return loadTlsFiles({
      ca: env.DIFFMESH_TLS_CA ?? '',
      cert: env.DIFFMESH_TLS_CERT ?? '',
      key: env.DIFFMESH_TLS_KEY ?? '',
      requireClientCert: false,
    });
  }
  const ours = new Set([state?.schedulerAddress, ...(state?.schedulerAddresses ?? [])]);
  if (!state?.credentials || !addresses.some((a) => ours.has(a))) return undefined;
  const { ca, cert, key } = state.credentials;
  return loadTlsFiles({ ca, cert, key, requireClientCert: false });
}
