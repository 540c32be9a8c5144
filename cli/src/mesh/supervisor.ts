import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { createInterface } from 'node:readline';

/** A service process to start. */
export interface ProcessSpec {
  /** Unique name, e.g. `dit-svc-1`. */
  name: string;
  /** Absolute path of the service's compiled main.js. */
  entry: string;
  args: string[];
  env?: Record<string, string>;
  /** Line printed on stdout once the service listens, with the address after it. */
  readyPrefix: string;
}

/** A started service process. */
export interface ManagedProcess {
  name: string;
  address: string;
  pid: number;
  child: ChildProcess;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<number | NodeJS.Signals>;
}

export interface SupervisorOptions {
  /** Where each process's stderr goes (a file per process); undefined = discarded. */
  logPath?: (name: string) => string;
  /** How long a process may take to print its ready line. */
  readyTimeoutMs?: number;
}

/**
 * Starts service processes, waits for each to say it listens, and stops them all:
 * SIGTERM (graceful drain) first, SIGKILL after a grace period.
 */
export class Supervisor {
  private readonly procs = new Map<string, ManagedProcess>();
  private readonly logs: WriteStream[] = [];

  constructor(private readonly opts: SupervisorOptions = {}) {}

  get processes(): ManagedProcess[] {
    return [...this.procs.values()];
  }

  get(name: string): ManagedProcess | undefined {
    return this.procs.get(name);
  }

  async start(spec: ProcessSpec): Promise<ManagedProcess> {
    if (this.procs.has(spec.name)) throw new Error(`process "${spec.name}" already started`);
    const child = spawn(process.execPath, [spec.entry, ...spec.args], {
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stderrTail: string[] = [];
    const logFile = this.opts.logPath ? createWriteStream(this.opts.logPath(spec.name), { flags: 'a' }) : undefined;
    if (logFile) this.logs.push(logFile);
    child.stderr?.on('data', (chunk: Buffer) => {
      logFile?.write(chunk);
      stderrTail.push(chunk.toString('utf8'));
      if (stderrTail.length > 40) stderrTail.shift();
    });
    const exited = new Promise<number | NodeJS.Signals>((resolve) => {
      child.once('exit', (code, signal) => resolve(signal ?? code ?? 0));
    });
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${spec.name} did not become ready within ${this.opts.readyTimeoutMs ?? 60_000} ms`));
      }, this.opts.readyTimeoutMs ?? 60_000);
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        if (line.startsWith(spec.readyPrefix)) {
          clearTimeout(timer);
          resolve(line.slice(spec.readyPrefix.length).trim());
        }
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      void exited.then((how) => {
        clearTimeout(timer);
        reject(new Error(`${spec.name} exited (${how}) before it was ready:\n${stderrTail.join('').split('\n').slice(-15).join('\n')}`));
      });
    });
    const proc: ManagedProcess = { name: spec.name, address, pid: child.pid ?? 0, child, exited };
    this.procs.set(spec.name, proc);
    void exited.then(() => this.procs.delete(spec.name));
    return proc;
  }

  /** Sends `signal` to one process and waits for it to exit (SIGKILL after `graceMs`). */
  async stop(name: string, signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<void> {
    const p = this.procs.get(name);
    if (!p) return;
    p.child.kill(signal);
    const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
    await p.exited;
    clearTimeout(timer);
  }

  /** Stops every process, last started first. */
  async stopAll(graceMs = 10_000): Promise<void> {
    for (const p of [...this.procs.values()].reverse()) await this.stop(p.name, 'SIGTERM', graceMs);
    for (const l of this.logs) l.end();
  }
}
