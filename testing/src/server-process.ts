import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '@diffmesh/core';

const LOG_TAIL_LINES = 20;

/** A server binary started by a launcher (nats-server, redis-server): its process and log. */
export interface ServerProcess {
  readonly child: ChildProcess;
  /** The last lines of its stdout and stderr, for error messages. */
  readonly tail: string[];
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>;
  /** Calls `fn` with every later line of its output. */
  onLine(fn: (line: string) => void): void;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  terminate(graceMs: number): Promise<void>;
  /** Stops killing it when this process exits (it is stopped, or no longer ours to stop). */
  release(): void;
}

/**
 * Spawns a server with its output read line by line (kept in a short tail and logged at
 * debug as `source: name`). The server is killed when this process exits, so a crashed test
 * leaves nothing behind; `ownProcessGroup` starts it in its own group (a terminal's Ctrl-C
 * then reaches only the launcher, which stops it in order).
 */
export function spawnServer(binary: string, args: string[], opts: { name: string; log: Logger; ownProcessGroup?: boolean }): ServerProcess {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: opts.ownProcessGroup === true });
  const tail: string[] = [];
  const listeners: Array<(line: string) => void> = [];
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (const stream of [child.stdout, child.stderr]) {
    let buf = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        tail.push(line);
        if (tail.length > LOG_TAIL_LINES) tail.shift();
        opts.log.debug({ source: opts.name }, line);
        for (const fn of listeners) fn(line);
      }
    });
  }
  return {
    child,
    tail,
    exited,
    onLine: (fn) => void listeners.push(fn),
    async terminate(graceMs) {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<'timeout'>((r) => {
        timer = setTimeout(() => r('timeout'), graceMs);
      });
      const result = await Promise.race([exited.then(() => 'exited' as const), graceOver]);
      clearTimeout(timer);
      if (result === 'timeout') {
        child.kill('SIGKILL');
        await exited;
      }
    },
    release: () => void process.removeListener('exit', killOnExit),
  };
}
