import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, nkeyAuthenticator, type Authenticator } from 'nats';
import { silentLogger, type Logger } from '@diffmesh/core';
import { findBinary } from './find-binary.js';
import { spawnServer, type ServerProcess } from './server-process.js';

/** Options of {@link startNatsServer}. */
export interface StartNatsServerOptions {
  /** Client port; 0 (default) lets the server pick a free one (`-p -1`). */
  port?: number;
  /** Address to bind; default `127.0.0.1`. */
  host?: string;
  /** Enable JetStream, storing in a fresh temporary directory (removed on stop) unless `storeDir` is given. */
  jetstream?: boolean;
  /** JetStream store directory; kept on stop. */
  storeDir?: string;
  /**
   * Binary name or path; default `nats-server`, looked up on `PATH` and then in
   * `/usr/sbin`, `/usr/local/sbin` and `/sbin` (Debian installs it in `/usr/sbin`, which is
   * not on every user's PATH).
   */
  binary?: string;
  /** Extra command-line arguments, e.g. `['-m', '8222']`. */
  args?: string[];
  /** Receives the server's log lines at debug level and lifecycle messages. */
  log?: Logger;
  /** How long to wait for the server to accept a client. Default 10000 ms. */
  readyTimeoutMs?: number;
  /** How long `stop()` waits after SIGTERM before SIGKILL. Default 5000 ms. */
  stopGraceMs?: number;
  /** Start it in its own process group, so a terminal's Ctrl-C does not reach it (see `Supervisor`). */
  ownProcessGroup?: boolean;
  /**
   * Only these users may connect: nkey public keys (`U…`), written into a config file
   * (`authorization { users = [{ nkey: … }] }`, mode 0600, removed on stop) that the server
   * reads with `-c`; a client without a matching seed is refused with an authorization
   * violation. `clientSeed` is the seed (`SU…`) of one of them, for the readiness probe.
   * Without it, anyone on the network may connect.
   */
  authorization?: { nkeys: string[]; clientSeed: string };
}

/** A running nats-server started by {@link startNatsServer}. */
export interface RunningNatsServer {
  /** Client URL, e.g. `nats://127.0.0.1:41234`. */
  url: string;
  port: number;
  pid: number;
  /** JetStream store directory, when JetStream is on. */
  storeDir?: string;
  /** Terminates the server (SIGTERM, then SIGKILL after the grace) and removes its temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/** Thrown by {@link startNatsServer} when the binary cannot be found. `code` is `NATS_SERVER_NOT_FOUND`. */
export class NatsServerNotFoundError extends Error {
  readonly code = 'NATS_SERVER_NOT_FOUND';
  constructor(readonly binary: string) {
    super(
      `nats-server not found on PATH; install it (Debian/Ubuntu: apt-get install nats-server) or pass --nats URL` +
        (binary === 'nats-server' ? '' : ` (looked for "${binary}")`),
    );
    this.name = 'NatsServerNotFoundError';
  }
}

const FALLBACK_DIRS = ['/usr/sbin', '/usr/local/sbin', '/sbin'];
const LISTENING = /Listening for client connections on (\S+):(\d+)\s*$/;

/** Finds the nats-server binary, or `undefined`. Names with a `/` are used as paths. */
export async function findNatsServer(binary = 'nats-server'): Promise<string | undefined> {
  return findBinary(binary, FALLBACK_DIRS);
}

/**
 * Starts a nats-server for tests and for `diffmesh up`: binds a free port (or `port`),
 * optionally with JetStream in a temporary store, and resolves once a client can connect.
 * Rejects with {@link NatsServerNotFoundError} when the binary is missing, and with the
 * tail of the server's log when it exits or is not ready within `readyTimeoutMs`.
 *
 * The server is killed when this process exits, so a crashed test leaves nothing behind.
 */
export async function startNatsServer(opts: StartNatsServerOptions = {}): Promise<RunningNatsServer> {
  const log = opts.log ?? silentLogger();
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`startNatsServer: port must be an integer in 0..65535 (got ${port})`);
  const binaryName = opts.binary ?? 'nats-server';
  const binary = await findNatsServer(binaryName);
  if (!binary) throw new NatsServerNotFoundError(binaryName);

  let tempDir: string | undefined;
  let storeDir = opts.storeDir;
  if ((opts.jetstream && !storeDir) || opts.authorization) tempDir = await mkdtemp(path.join(tmpdir(), 'diffmesh-nats-'));
  if (opts.jetstream && !storeDir) storeDir = tempDir;
  const args = ['-a', host, '-p', port === 0 ? '-1' : String(port)];
  let authenticator: Authenticator | undefined;
  if (opts.authorization) {
    if (opts.authorization.nkeys.length === 0) throw new Error('startNatsServer: authorization needs at least one nkey');
    const conf = path.join(tempDir!, 'auth.conf');
    await writeFile(conf, natsAuthorizationConfig(opts.authorization.nkeys), { mode: 0o600 });
    args.push('-c', conf);
    authenticator = nkeyAuthenticator(new TextEncoder().encode(opts.authorization.clientSeed));
  }
  if (opts.jetstream) args.push('-js', '-sd', storeDir!);
  args.push(...(opts.args ?? []));

  const server = spawnServer(binary, args, { name: 'nats-server', log, ...(opts.ownProcessGroup ? { ownProcessGroup: true } : {}) });
  const { child, tail } = server;
  const cleanup = async (): Promise<void> => {
    server.release();
    if (tempDir) await rm(tempDir, { recursive: true, force: true }).catch(() => {});
  };

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await server.terminate(opts.stopGraceMs ?? 5000);
      await cleanup();
      log.debug({ pid: child.pid }, 'nats-server stopped');
    })();
    return stopping;
  };

  try {
    const listenPort = await waitForPort(server, binary);
    const connectHost = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
    const url = `nats://${connectHost.includes(':') ? `[${connectHost}]` : connectHost}:${listenPort}`;
    await waitForClient(url, child, tail, opts.readyTimeoutMs ?? 10_000, authenticator);
    log.info(
      { url, pid: child.pid, jetstream: Boolean(opts.jetstream), authorization: opts.authorization ? 'nkeys' : 'none' },
      'nats-server started',
    );
    return { url, port: listenPort, pid: child.pid!, ...(storeDir && opts.jetstream ? { storeDir } : {}), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Reads the server's log until it says which port it listens on. */
function waitForPort(server: ServerProcess, binary: string): Promise<number> {
  const { child, tail } = server;
  return new Promise<number>((resolve, reject) => {
    let found = false;
    server.onLine((line) => {
      const m = LISTENING.exec(line);
      if (m && !found) {
        found = true;
        resolve(Number(m[2]));
      }
    });
    child.once('error', (err: NodeJS.ErrnoException) => {
      if (found) return;
      found = true;
      reject(err.code === 'ENOENT' ? new NatsServerNotFoundError(binary) : new Error(`nats-server could not start: ${err.message}`));
    });
    child.once('exit', (code, signal) => {
      if (found) return;
      found = true;
      reject(new Error(`nats-server exited (${signal ?? `code ${code}`}) before listening:\n${tail.join('\n')}`));
    });
  });
}

/** Polls a client connection until the server accepts one, within a deadline. */
async function waitForClient(
  url: string,
  child: ChildProcess,
  tail: string[],
  timeoutMs: number,
  authenticator: Authenticator | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`nats-server exited before accepting clients:\n${tail.join('\n')}`);
    }
    try {
      const nc = await connect({
        servers: url,
        timeout: Math.max(100, Math.min(1000, deadline - Date.now())),
        reconnect: false,
        maxReconnectAttempts: 0,
        ...(authenticator ? { authenticator } : {}),
      });
      await nc.close();
      return;
    } catch (err) {
      lastError = err;
      // Back off briefly between attempts; each attempt is itself bounded by `timeout`.
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  throw new Error(
    `nats-server at ${url} did not accept a client within ${timeoutMs} ms: ${(lastError as Error | undefined)?.message ?? 'timeout'}\n${tail.join('\n')}`,
  );
}

/**
 * A nats-server config that admits only the given nkey users (public keys `U…`): the
 * server keeps no secret, and each client proves it holds its seed by signing a nonce.
 */
export function natsAuthorizationConfig(nkeys: readonly string[]): string {
  for (const k of nkeys)
    if (!/^U[A-Z2-7]{55}$/.test(k)) throw new Error('startNatsServer: an authorization nkey is not a user public key (U…)');
  return `authorization {\n  users = [\n${nkeys.map((k) => `    { nkey: "${k}" }`).join('\n')}\n  ]\n}\n`;
}
