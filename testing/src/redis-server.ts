import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { silentLogger, type Logger } from '@diffmesh/core';
import { findBinary } from './find-binary.js';
import { spawnServer } from './server-process.js';

/** Options of {@link startRedisServer}. */
export interface StartRedisServerOptions {
  /** Port; 0 (default) picks a free one on `host`. */
  port?: number;
  /** Address to bind; default `127.0.0.1`. */
  host?: string;
  /** Password (`requirepass`); absent = none. */
  password?: string;
  /** `maxmemory` in bytes (with `noeviction`, so a full server refuses writes with OOM); absent = none. */
  maxmemoryBytes?: number;
  /** Persistence: append-only file in `dir` (default off: a test server forgets everything on stop). */
  appendonly?: boolean;
  /** Working directory (RDB/AOF files); default a fresh temporary one, removed on stop. */
  dir?: string;
  /**
   * Binary name or path; default `redis-server`, looked up on `PATH` and then in `/usr/bin`,
   * `/usr/sbin`, `/usr/local/bin` and `/usr/local/sbin`.
   */
  binary?: string;
  /** Extra command-line arguments, e.g. `['--save', '60 1']`. */
  args?: string[];
  /** Receives the server's log lines at debug level and lifecycle messages. */
  log?: Logger;
  /** How long to wait for the server to answer PING. Default 10000 ms. */
  readyTimeoutMs?: number;
  /** How long `stop()` waits after SIGTERM before SIGKILL. Default 5000 ms. */
  stopGraceMs?: number;
  /** Start it in its own process group, so a terminal's Ctrl-C does not reach it (see `Supervisor`). */
  ownProcessGroup?: boolean;
}

/** A running redis-server started by {@link startRedisServer}. */
export interface RunningRedisServer {
  /** `redis://127.0.0.1:41234` (with `:password@` when one was set). */
  url: string;
  host: string;
  port: number;
  pid: number;
  /** Terminates the server (SIGTERM, then SIGKILL after the grace) and removes its temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/** Thrown by {@link startRedisServer} when the binary cannot be found. `code` is `REDIS_SERVER_NOT_FOUND`. */
export class RedisServerNotFoundError extends Error {
  readonly code = 'REDIS_SERVER_NOT_FOUND';
  constructor(readonly binary: string) {
    super(
      `redis-server not found on PATH; install it (Debian/Ubuntu: apt-get install redis-server) or pass the URL of a running server` +
        (binary === 'redis-server' ? '' : ` (looked for "${binary}")`),
    );
    this.name = 'RedisServerNotFoundError';
  }
}

const FALLBACK_DIRS = ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin'];
/** Attempts at a free port: another process may take the one picked before redis binds it. */
const PORT_ATTEMPTS = 5;

/** Finds the redis-server binary, or `undefined`. Names with a `/` are used as paths. */
export async function findRedisServer(binary = 'redis-server'): Promise<string | undefined> {
  return findBinary(binary, FALLBACK_DIRS);
}

/**
 * Starts a redis-server for tests, benchmarks and local meshes: binds a free loopback port
 * (redis cannot pick one itself), keeps nothing on disk unless asked, and resolves once the
 * server answers PING. Rejects with {@link RedisServerNotFoundError} when the binary is
 * missing, and with the tail of the server's log when it exits or is not ready in time. Never
 * touches a server already running on the machine (it never uses port 6379 unless told to).
 *
 * The server is killed when this process exits, so a crashed test leaves nothing behind.
 */
export async function startRedisServer(opts: StartRedisServerOptions = {}): Promise<RunningRedisServer> {
  const log = opts.log ?? silentLogger();
  const host = opts.host ?? '127.0.0.1';
  const binaryName = opts.binary ?? 'redis-server';
  const binary = await findRedisServer(binaryName);
  if (!binary) throw new RedisServerNotFoundError(binaryName);
  const tempDir = opts.dir ? undefined : await mkdtemp(path.join(tmpdir(), 'diffmesh-redis-'));
  const dir = opts.dir ?? tempDir!;
  let lastError: unknown;
  try {
    for (let attempt = 1; attempt <= (opts.port ? 1 : PORT_ATTEMPTS); attempt++) {
      const port = opts.port || (await freePort(host));
      try {
        return await launch(binary, host, port, dir, tempDir, opts, log);
      } catch (err) {
        lastError = err;
        if (!(err instanceof PortTakenError)) break;
      }
    }
  } catch (err) {
    lastError = err;
  }
  if (tempDir) await rm(tempDir, { recursive: true, force: true }).catch(() => undefined);
  throw lastError;
}

class PortTakenError extends Error {}

async function launch(
  binary: string,
  host: string,
  port: number,
  dir: string,
  tempDir: string | undefined,
  opts: StartRedisServerOptions,
  log: Logger,
): Promise<RunningRedisServer> {
  const args = [
    '--port',
    String(port),
    '--bind',
    host,
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    opts.appendonly ? 'yes' : 'no',
    '--daemonize',
    'no',
    '--protected-mode',
    'no',
    ...(opts.maxmemoryBytes ? ['--maxmemory', String(opts.maxmemoryBytes), '--maxmemory-policy', 'noeviction'] : []),
    // A test server's password (visible in ps) protects nothing but the test's own data.
    ...(opts.password ? ['--requirepass', opts.password] : []),
    ...(opts.args ?? []),
  ];
  const server = spawnServer(binary, args, { name: 'redis-server', log, ...(opts.ownProcessGroup ? { ownProcessGroup: true } : {}) });
  const { child, tail } = server;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await server.terminate(opts.stopGraceMs ?? 5000);
      server.release();
      if (tempDir) await rm(tempDir, { recursive: true, force: true }).catch(() => undefined);
      log.debug({ pid: child.pid }, 'redis-server stopped');
    })();
    return stopping;
  };
  try {
    await waitForPong(host, port, opts.password, child, tail, opts.readyTimeoutMs ?? 10_000);
  } catch (err) {
    await server.terminate(1000);
    server.release();
    if (tail.some((l) => /Address already in use/i.test(l))) throw new PortTakenError(`port ${port} is taken`);
    throw err;
  }
  const hostPart = host.includes(':') ? `[${host}]` : host;
  const url = `redis://${opts.password ? `:${encodeURIComponent(opts.password)}@` : ''}${hostPart}:${port}`;
  log.info({ host, port, pid: child.pid }, 'redis-server started');
  return { url, host, port, pid: child.pid!, stop };
}

/** A port free on `host` right now (the kernel's pick for port 0). */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Polls with PING (after AUTH when there is a password) until the server answers PONG. */
async function waitForPong(
  host: string,
  port: number,
  password: string | undefined,
  child: ChildProcess,
  tail: string[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = 'timeout';
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited before accepting clients:\n${tail.join('\n')}`);
    }
    try {
      await ping(host, port, password);
      return;
    } catch (err) {
      lastError = (err as Error).message;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  throw new Error(`redis-server on ${host}:${port} did not answer PING within ${timeoutMs} ms: ${lastError}\n${tail.join('\n')}`);
}

function ping(host: string, port: number, password: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, host);
    let got = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('no answer'));
    }, 1000);
    sock.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.once('connect', () => {
      const auth = password ? `*2\r\n$4\r\nAUTH\r\n$${Buffer.byteLength(password)}\r\n${password}\r\n` : '';
      sock.write(`${auth}*1\r\n$4\r\nPING\r\n`);
    });
    sock.on('data', (d: Buffer) => {
      got += d.toString('utf8');
      if (got.includes('+PONG')) {
        clearTimeout(timer);
        sock.end();
        resolve();
      } else if (got.includes('-')) {
        clearTimeout(timer);
        sock.destroy();
        reject(new Error(got.trim()));
      }
    });
  });
}
