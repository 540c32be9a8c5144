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
  /**
   * A command the process runs under, e.g. `['ip', 'netns', 'exec', 'ns1']` (a node's
   * network namespace, see `createNodeNetwork`); it must exec the service so that signals reach it.
   */
  launcher?: string[];
  /** Line printed on stdout once the service listens, with the address after it. */
  readyPrefix: string;
  /**
   * The flag whose value is the listen address (e.g. `--listen`). A restarted process gets
   * the address its first run listened on, so that others keep finding it there.
   */
  listenFlag?: string;
}

/** A started service process. `pid`, `child` and `exited` follow restarts. */
export interface ManagedProcess {
  name: string;
  address: string;
  pid: number;
  child: ChildProcess;
  /** Resolves with the exit code (or signal) when the current run of the process ends. */
  exited: Promise<number | NodeJS.Signals>;
  /** Times the supervisor restarted it. */
  restarts: number;
  /** `running`, `restarting` (waiting out its back-off or for its ready line), `stopped`. */
  state: 'running' | 'restarting' | 'stopped';
}

/** What the supervisor tells about its processes. */
export type SupervisorEvent =
  | { type: 'exited'; name: string; how: number | NodeJS.Signals; restartInMs?: number; restarts: number }
  | { type: 'restarted'; name: string; pid: number; address: string; restarts: number }
  | { type: 'restart-failed'; name: string; error: string; restartInMs: number };

/** Restart policy: a process that exits on its own is started again after a back-off. */
export interface RestartPolicy {
  /** First back-off. Default 500 ms. */
  initialBackoffMs?: number;
  /** Longest back-off (it doubles per restart). Default 30 s. */
  maxBackoffMs?: number;
  /** A run that lasted this long resets the back-off. Default 30 s. */
  resetAfterMs?: number;
}

export interface SupervisorOptions {
  /** Where each process's stderr goes (a file per process); undefined = discarded. */
  logPath?: (name: string) => string;
  /** How long a process may take to print its ready line. */
  readyTimeoutMs?: number;
  /** Restart processes that exit without being told to, as Kubernetes would; off by default. */
  restart?: RestartPolicy;
  /**
   * Start each process in its own process group, so that a terminal's Ctrl-C (sent to the
   * foreground group) reaches only this process, which then stops the others once, in order.
   * They are still killed if this process exits without stopping them.
   */
  ownProcessGroup?: boolean;
  /** Sees exits and restarts. */
  onEvent?: (event: SupervisorEvent) => void;
}

interface Entry {
  spec: ProcessSpec;
  proc: ManagedProcess;
  /** Told to stop: its exit is not restarted. */
  stopping: boolean;
  startedAt: number;
  backoffMs: number;
  timer?: NodeJS.Timeout;
  stderrTail: string[];
  log?: WriteStream;
}

/**
 * Starts service processes, waits for each to say it listens, restarts those that die (with
 * a restart policy), and stops them all: SIGTERM (graceful drain) first, SIGKILL after a
 * grace period.
 */
export class Supervisor {
  private readonly entries = new Map<string, Entry>();
  private readonly logs: WriteStream[] = [];
  private readonly killAtExit = (): void => {
    for (const e of this.entries.values()) if (e.proc.state !== 'stopped') e.proc.child.kill('SIGKILL');
  };

  constructor(private readonly opts: SupervisorOptions = {}) {
    process.on('exit', this.killAtExit);
  }

  get processes(): ManagedProcess[] {
    return [...this.entries.values()].filter((e) => e.proc.state !== 'stopped').map((e) => e.proc);
  }

  get(name: string): ManagedProcess | undefined {
    const e = this.entries.get(name);
    return e && e.proc.state !== 'stopped' ? e.proc : undefined;
  }

  /** Starts a process and resolves once it printed its ready line. */
  async start(spec: ProcessSpec): Promise<ManagedProcess> {
    const existing = this.entries.get(spec.name);
    if (existing && existing.proc.state !== 'stopped') throw new Error(`process "${spec.name}" already started`);
    const logFile = this.opts.logPath ? createWriteStream(this.opts.logPath(spec.name), { flags: 'a' }) : undefined;
    if (logFile) this.logs.push(logFile);
    const entry: Entry = {
      spec,
      proc: undefined as unknown as ManagedProcess,
      stopping: false,
      startedAt: Date.now(),
      backoffMs: this.opts.restart?.initialBackoffMs ?? 500,
      stderrTail: [],
      ...(logFile ? { log: logFile } : {}),
    };
    const run = await this.launch(entry, spec.args);
    entry.proc = {
      name: spec.name,
      address: run.address,
      pid: run.child.pid ?? 0,
      child: run.child,
      exited: run.exited,
      restarts: 0,
      state: 'running',
    };
    this.entries.set(spec.name, entry);
    this.watch(entry);
    return entry.proc;
  }

  /** Sends `signal` to one process and waits for it to exit (SIGKILL after `graceMs`); it is not restarted. */
  async stop(name: string, signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<void> {
    const e = this.entries.get(name);
    if (!e || e.proc.state === 'stopped') return;
    e.stopping = true;
    clearTimeout(e.timer);
    if (e.proc.state === 'restarting' && e.proc.child.exitCode !== null) {
      e.proc.state = 'stopped';
      return;
    }
    e.proc.child.kill(signal);
    const timer = setTimeout(() => e.proc.child.kill('SIGKILL'), graceMs);
    await e.proc.exited;
    clearTimeout(timer);
    e.proc.state = 'stopped';
  }

  /**
   * Sends a signal without stopping the process for good (e.g. SIGKILL in a chaos test): with
   * a restart policy it is started again like any process that died.
   */
  kill(name: string, signal: NodeJS.Signals = 'SIGKILL'): boolean {
    const e = this.entries.get(name);
    if (!e || e.proc.state !== 'running') return false;
    return e.proc.child.kill(signal);
  }

  /** Stops every process, last started first. */
  async stopAll(graceMs = 10_000): Promise<void> {
    for (const e of [...this.entries.values()].reverse()) await this.stop(e.spec.name, 'SIGTERM', graceMs);
    for (const l of this.logs) l.end();
    process.removeListener('exit', this.killAtExit);
  }

  // ---- internals -------------------------------------------------------------------------

  private async launch(
    entry: Entry,
    args: string[],
  ): Promise<{ child: ChildProcess; address: string; exited: Promise<number | NodeJS.Signals> }> {
    const { spec } = entry;
    const command = [...(spec.launcher ?? []), process.execPath, spec.entry, ...args];
    const child = spawn(command[0], command.slice(1), {
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: this.opts.ownProcessGroup === true,
    });
    const tail = entry.stderrTail;
    child.stderr?.on('data', (chunk: Buffer) => {
      entry.log?.write(chunk);
      tail.push(chunk.toString('utf8'));
      if (tail.length > 40) tail.shift();
    });
    const exited = new Promise<number | NodeJS.Signals>((resolve) => {
      child.once('exit', (code, signal) => resolve(signal ?? code ?? 0));
    });
    const readyTimeoutMs = this.opts.readyTimeoutMs ?? 60_000;
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${spec.name} did not become ready within ${readyTimeoutMs} ms`));
      }, readyTimeoutMs);
      const lines = createInterface({ input: child.stdout });
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
        reject(new Error(`${spec.name} exited (${how}) before it was ready:\n${tail.join('').split('\n').slice(-15).join('\n')}`));
      });
    });
    return { child, address, exited };
  }

  /** Restarts the process when its current run ends on its own (with a restart policy). */
  private watch(entry: Entry): void {
    const { proc } = entry;
    void proc.exited.then((how) => {
      if (entry.stopping || proc.state === 'stopped') {
        proc.state = 'stopped';
        return;
      }
      const policy = this.opts.restart;
      if (!policy) {
        proc.state = 'stopped';
        this.opts.onEvent?.({ type: 'exited', name: proc.name, how, restarts: proc.restarts });
        return;
      }
      if (Date.now() - entry.startedAt >= (policy.resetAfterMs ?? 30_000)) entry.backoffMs = policy.initialBackoffMs ?? 500;
      proc.state = 'restarting';
      this.opts.onEvent?.({ type: 'exited', name: proc.name, how, restartInMs: entry.backoffMs, restarts: proc.restarts });
      this.scheduleRestart(entry);
    });
  }

  private scheduleRestart(entry: Entry): void {
    const policy = this.opts.restart ?? {};
    const delay = entry.backoffMs;
    entry.backoffMs = Math.min(policy.maxBackoffMs ?? 30_000, entry.backoffMs * 2);
    entry.timer = setTimeout(() => {
      if (entry.stopping) return;
      void this.restart(entry);
    }, delay);
  }

  private async restart(entry: Entry): Promise<void> {
    const { proc, spec } = entry;
    const args = withListen(spec.args, spec.listenFlag, proc.address);
    try {
      const run = await this.launch(entry, args);
      if (entry.stopping) {
        run.child.kill('SIGTERM');
        return;
      }
      proc.child = run.child;
      proc.pid = run.child.pid ?? 0;
      proc.exited = run.exited;
      proc.address = run.address;
      proc.restarts += 1;
      proc.state = 'running';
      entry.startedAt = Date.now();
      this.opts.onEvent?.({ type: 'restarted', name: proc.name, pid: proc.pid, address: proc.address, restarts: proc.restarts });
      this.watch(entry);
    } catch (err) {
      if (entry.stopping) return;
      this.opts.onEvent?.({
        type: 'restart-failed',
        name: proc.name,
        error: (err as Error).message.split('\n')[0],
        restartInMs: entry.backoffMs,
      });
      this.scheduleRestart(entry);
    }
  }
}

/** `args` with the value of `flag` set to `address` (added when missing). */
function withListen(args: string[], flag: string | undefined, address: string): string[] {
  if (!flag || !address) return args;
  const i = args.indexOf(flag);
  if (i === -1) return [...args, flag, address];
  const out = [...args];
  out[i + 1] = address;
  return out;
}
