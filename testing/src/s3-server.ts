import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { silentLogger, type Logger } from '@diffmesh/core';

/** Options of {@link startS3Server}. */
export interface StartS3ServerOptions {
  /** Buckets created at start. Default `['diffmesh']`. */
  buckets?: string[];
  /** Port; 0 (default) = a free one. */
  port?: number;
  /** Address to bind; default `127.0.0.1`. */
  host?: string;
  /**
   * Run the server in this process instead of a child process. A child (the default) keeps
   * its work off the caller's event loop, as a real S3 server is (benchmarks and tests of
   * other processes want that); in-process starts faster.
   */
  inProcess?: boolean;
  /** Where the server keeps objects; default a fresh temporary directory, removed on stop. */
  directory?: string;
  log?: Logger;
  /** How long to wait for the server to listen. Default 20000 ms. */
  readyTimeoutMs?: number;
}

/** A running S3-protocol server started by {@link startS3Server}. */
export interface RunningS3Server {
  /** `http://127.0.0.1:<port>`: give it to clients as their endpoint (path-style addressing). */
  endpoint: string;
  port: number;
  /** Credentials the server accepts. */
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  buckets: string[];
  /** `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` and `AWS_ENDPOINT_URL_S3` for child processes. */
  env: Record<string, string>;
  /** Stops the server and removes its temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/** The only credentials s3rver accepts. */
const ACCESS_KEY = 'S3RVER';
const SECRET_KEY = 'S3RVER';
const REGION = 'us-east-1';
const READY = /^s3 server listening on (\d+)/m;

interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
type S3rverCtor = new (options: Record<string, unknown>) => S3rverInstance;

/**
 * Starts an S3-protocol server (s3rver, from npm: nothing to install beyond `npm ci`) on a free
 * loopback port with `buckets` created, for tests, benchmarks and local meshes. It speaks
 * enough of S3 for diffmesh (put, multipart upload, ranged get, list, delete) and checks
 * request signatures against its fixed credentials, returned with it.
 */
export async function startS3Server(opts: StartS3ServerOptions = {}): Promise<RunningS3Server> {
  const log = opts.log ?? silentLogger();
  const host = opts.host ?? '127.0.0.1';
  const buckets = opts.buckets ?? ['diffmesh'];
  const tempDir = opts.directory ? undefined : await mkdtemp(path.join(tmpdir(), 'diffmesh-s3-'));
  const directory = opts.directory ?? tempDir!;
  const cleanup = async (): Promise<void> => {
    if (tempDir) await rm(tempDir, { recursive: true, force: true }).catch(() => undefined);
  };
  let port: number;
  let close: () => Promise<void>;
  try {
    if (opts.inProcess) {
      const server = await runS3rver({ host, port: opts.port ?? 0, directory, buckets });
      port = server.port;
      close = () => server.close();
    } else {
      const child = spawn(process.execPath, [compiledSelf(), 'serve', host, String(opts.port ?? 0), directory, buckets.join(',')], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const killOnExit = (): void => {
        child.kill('SIGKILL');
      };
      process.once('exit', killOnExit);
      port = await waitForReady(child, opts.readyTimeoutMs ?? 20_000);
      close = async () => {
        process.removeListener('exit', killOnExit);
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
          child.kill('SIGTERM');
          await exited;
        }
      };
    }
  } catch (err) {
    await cleanup();
    throw err;
  }
  const endpoint = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  log.info({ endpoint, buckets }, 'S3 server started');
  let stopping: Promise<void> | undefined;
  return {
    endpoint,
    port,
    accessKeyId: ACCESS_KEY,
    secretAccessKey: SECRET_KEY,
    region: REGION,
    buckets,
    env: { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET_KEY, AWS_REGION: REGION, AWS_ENDPOINT_URL_S3: endpoint },
    stop() {
      stopping ??= (async () => {
        await close();
        await cleanup();
      })();
      return stopping;
    },
  };
}

/** This module's compiled file (tests run it from its TypeScript source). */
function compiledSelf(): string {
  const self = fileURLToPath(import.meta.url);
  return self.endsWith('.ts') ? self.replace(`${path.sep}src${path.sep}`, `${path.sep}dist${path.sep}`).replace(/\.ts$/, '.js') : self;
}

async function runS3rver(o: {
  host: string;
  port: number;
  directory: string;
  buckets: string[];
}): Promise<{ port: number; close(): Promise<void> }> {
  const S3rver = createRequire(import.meta.url)('s3rver') as S3rverCtor;
  const server = new S3rver({
    address: o.host,
    port: o.port,
    directory: o.directory,
    silent: true,
    // Path-style only: the endpoint is an IP address.
    vhostBuckets: false,
    configureBuckets: o.buckets.map((name) => ({ name })),
  });
  const { port } = await server.run();
  return { port, close: () => server.close() };
}

function waitForReady(child: ChildProcess, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`S3 server did not start within ${timeoutMs} ms:\n${err}`));
    }, timeoutMs);
    child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = READY.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`S3 server exited (${signal ?? `code ${code}`}) before listening:\n${err}`));
    });
  });
}

// The child process: `node s3-server.js serve <host> <port> <directory> <buckets>`.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1]) && process.argv[2] === 'serve') {
  const [host = '127.0.0.1', port = '0', directory = '', buckets = ''] = process.argv.slice(3);
  runS3rver({ host, port: Number(port), directory, buckets: buckets.split(',').filter(Boolean) }).then(
    (server) => {
      process.stdout.write(`s3 server listening on ${server.port}\n`);
      const stop = (): void => {
        void server.close().finally(() => process.exit(0));
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    },
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
