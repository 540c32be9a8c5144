import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, nkeyAuthenticator, type Authenticator, type TlsOptions } from 'nats';
import { silentLogger, type Logger } from '@diffmesh/core';
import { findBinary } from './find-binary.js';
import { spawnServer, type ServerProcess } from './server-process.js';

/** Subjects one side of a NATS permission allows and denies (deny wins; `*` and `>` wildcards). */
export interface NatsSubjectRule {
  allow?: string[];
  deny?: string[];
}

/**
 * What one NATS user may do (nats-server `permissions`): the subjects it may publish to and
 * subscribe to, and whether it may answer requests it received (`allow_responses`: a reply
 * to the request's reply subject, once).
 */
export interface NatsPermissions {
  publish?: NatsSubjectRule;
  subscribe?: NatsSubjectRule;
  allowResponses?: boolean;
}

/** TLS of a nats-server's client port (PEM files); see {@link StartNatsServerOptions.tls}. */
export interface NatsServerTls {
  /** Server certificate (its SANs must name the addresses clients dial, e.g. `127.0.0.1`). */
  cert: string;
  key: string;
  /** CA that clients' certificates must be signed by (with `verify`), and that the readiness probe trusts. */
  ca: string;
  /** Clients must present a certificate signed by `ca` (mutual TLS). */
  verify?: boolean;
  /** Certificate and key the readiness probe presents when `verify` is on. */
  probeCert?: string;
  probeKey?: string;
}

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
   * Without it, anyone on the network may connect. `permissions` (by public key) limits
   * what a user may publish and subscribe to; a user without an entry may use any subject.
   */
  authorization?: { nkeys: string[]; clientSeed: string; permissions?: Record<string, NatsPermissions> };
  /**
   * Serve clients over TLS only (a `tls {}` block in the config file): a client that does
   * not speak TLS is refused, so nothing crosses the network in plain text.
   */
  tls?: NatsServerTls;
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
  if ((opts.jetstream && !storeDir) || opts.authorization || opts.tls) tempDir = await mkdtemp(path.join(tmpdir(), 'diffmesh-nats-'));
  if (opts.jetstream && !storeDir) storeDir = tempDir;
  const args = ['-a', host, '-p', port === 0 ? '-1' : String(port)];
  let authenticator: Authenticator | undefined;
  if (opts.authorization || opts.tls) {
    const conf = path.join(tempDir!, 'server.conf');
    await writeFile(conf, natsServerConfig(opts), { mode: 0o600 });
    args.push('-c', conf);
  }
  if (opts.authorization) authenticator = nkeyAuthenticator(new TextEncoder().encode(opts.authorization.clientSeed));
  const probeTls: TlsOptions | undefined = opts.tls
    ? {
        caFile: opts.tls.ca,
        ...(opts.tls.probeCert && opts.tls.probeKey ? { certFile: opts.tls.probeCert, keyFile: opts.tls.probeKey } : {}),
      }
    : undefined;
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
    await waitForClient(url, child, tail, opts.readyTimeoutMs ?? 10_000, { authenticator, tls: probeTls });
    log.info(
      {
        url,
        pid: child.pid,
        jetstream: Boolean(opts.jetstream),
        authorization: opts.authorization ? 'nkeys' : 'none',
        tls: opts.tls ? (opts.tls.verify ? 'mutual' : 'server') : 'none',
      },
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
  secured: { authenticator: Authenticator | undefined; tls: TlsOptions | undefined },
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
        ...(secured.authenticator ? { authenticator: secured.authenticator } : {}),
        ...(secured.tls ? { tls: secured.tls } : {}),
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

const SUBJECT = /^[^\s"\\]+$/;
const FILE = /^[^"\\\n]+$/;

/**
 * A nats-server config that admits only the given nkey users (public keys `U…`): the
 * server keeps no secret, and each client proves it holds its seed by signing a nonce.
 * A user with `permissions` may use only the subjects they allow.
 */
export function natsAuthorizationConfig(nkeys: readonly string[], permissions: Record<string, NatsPermissions> = {}): string {
  if (nkeys.length === 0) throw new Error('startNatsServer: authorization needs at least one nkey');
  for (const k of nkeys)
    if (!/^U[A-Z2-7]{55}$/.test(k)) throw new Error('startNatsServer: an authorization nkey is not a user public key (U…)');
  const user = (k: string): string => {
    const p = permissions[k];
    return p ? `    { nkey: "${k}", permissions: ${permissionsText(p)} }` : `    { nkey: "${k}" }`;
  };
  return `authorization {\n  users = [\n${nkeys.map(user).join('\n')}\n  ]\n}\n`;
}

function permissionsText(p: NatsPermissions): string {
  const list = (subjects: string[]): string => {
    for (const s of subjects) if (!SUBJECT.test(s)) throw new Error(`startNatsServer: ${JSON.stringify(s)} is not a NATS subject`);
    return `[${subjects.map((s) => `"${s}"`).join(', ')}]`;
  };
  const rule = (r: NatsSubjectRule): string =>
    `{ ${[r.allow ? `allow: ${list(r.allow)}` : '', r.deny ? `deny: ${list(r.deny)}` : ''].filter(Boolean).join(', ')} }`;
  const parts = [
    p.publish ? `publish: ${rule(p.publish)}` : '',
    p.subscribe ? `subscribe: ${rule(p.subscribe)}` : '',
    p.allowResponses ? 'allow_responses: true' : '',
  ].filter(Boolean);
  return `{ ${parts.join(', ')} }`;
}

/** The `tls {}` block of a server that speaks TLS only to its clients. */
export function natsTlsConfig(tls: NatsServerTls): string {
  for (const f of [tls.cert, tls.key, tls.ca])
    if (!FILE.test(f)) throw new Error('startNatsServer: a TLS file path holds a quote, a backslash or a line break');
  return `tls {\n  cert_file: "${tls.cert}"\n  key_file: "${tls.key}"\n  ca_file: "${tls.ca}"\n  verify: ${tls.verify ? 'true' : 'false'}\n  timeout: 2\n}\n`;
}

/** The config file of a server with authorization and/or TLS. */
function natsServerConfig(opts: StartNatsServerOptions): string {
  return [
    opts.authorization ? natsAuthorizationConfig(opts.authorization.nkeys, opts.authorization.permissions) : '',
    opts.tls ? natsTlsConfig(opts.tls) : '',
  ].join('');
}
