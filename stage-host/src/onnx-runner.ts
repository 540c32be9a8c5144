import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Code, DiffmeshError } from '@diffmesh/core';
import {
  RUNNER_WORKER_MARK,
  type LoadResult,
  type ProviderChoice,
  type RunnerRequest,
  type RunnerResponse,
  type WireSessionOptions,
  type WireTensor,
} from './onnx-runner-protocol.js';
import { RUNNER_WORKER_URL } from './onnx-runner-worker.js';
import type { SessionHost } from './session-host.js';

/** The phases of a runner thread. */
export type RunnerState = 'STARTING' | 'RUNNING' | 'CLOSING' | 'CLOSED' | 'FAILED';

/**
 * The longest the process waits at exit for a runner thread's native call (a model run or a
 * session load) to return. onnxruntime-node aborts the whole process (`terminate called after
 * throwing an instance of 'Napi::Error'`) when a worker thread is torn down while its native
 * call runs: the call returns into an environment that is going away and throws where nothing
 * catches it. So the thread is only ever stopped between calls.
 */
const EXIT_WAIT_MS = 120_000;

/** Runner threads alive in this process, with the flag each sets while in a native call. */
const live = new Set<Int32Array>();
let exitGuard = false;

/** At exit, waits (blocking: 'exit' handlers cannot await) until no runner is inside a native call. */
function installExitGuard(): void {
  if (exitGuard) return;
  exitGuard = true;
  process.on('exit', () => {
    const deadline = Date.now() + EXIT_WAIT_MS;
    for (const flag of live) {
      while (Atomics.load(flag, 0) === 1 && Date.now() < deadline) Atomics.wait(flag, 0, 1, Math.max(1, deadline - Date.now()));
    }
  });
}

type Pending = { resolve(v: unknown): void; reject(e: unknown): void };

interface QueuedRun {
  session: number;
  feeds: Record<string, WireTensor>;
  transfer: ArrayBuffer[];
  signal: AbortSignal | undefined;
  resolve(v: Record<string, WireTensor>): void;
  reject(e: unknown): void;
  onAbort?: () => void;
}

/**
 * One worker thread that owns onnxruntime sessions and runs them, one run at a time, so a model
 * run of any length never holds up the stage's main thread. Runs wait in a queue here (not in
 * the thread), so a run whose task was cancelled before its turn never starts; one cancelled
 * while it runs is answered at once with the cancellation, and the thread finishes it and goes
 * on. A thread that dies fails every run waiting on it (UNAVAILABLE), and its sessions with it.
 */
export class OnnxRunner implements SessionHost {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private readonly queue: QueuedRun[] = [];
  private nextId = 1;
  private busy = false;
  private state: RunnerState = 'STARTING';
  private failure: Error | undefined;
  /** Runs queued or running: what a caller balancing several runners looks at. */
  private outstanding = 0;
  /** 1 while the thread is inside a native call (set by the thread itself). */
  private readonly inNative = new Int32Array(new SharedArrayBuffer(4));

  constructor(readonly name: string) {
    installExitGuard();
    live.add(this.inNative);
    this.worker = new Worker(new URL(runnerWorkerUrl()), {
      workerData: { [RUNNER_WORKER_MARK]: true, inNative: this.inNative.buffer },
      name: `onnx-runner ${name}`,
    });
    this.worker.on('online', () => this.transition(['STARTING'], 'RUNNING'));
    this.worker.on('message', (msg: RunnerResponse) => this.onMessage(msg));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`the runner thread exited with code ${code}`)));
    // An idle runner does not keep the process alive.
    this.worker.unref();
  }

  /** Runs queued or in progress. */
  get pendingRuns(): number {
    return this.outstanding;
  }

  /** False once the thread has died or been closed. */
  get usable(): boolean {
    return this.state === 'STARTING' || this.state === 'RUNNING';
  }

  /** Creates a session in the thread from a file (or a model's bytes) on one provider. */
  loadSession(source: string | Uint8Array, provider: ProviderChoice, options: WireSessionOptions): Promise<LoadResult> {
    return this.request<LoadResult>({ op: 'load', id: 0, source, provider, options });
  }

  /**
   * Runs a loaded session. `transfer` lists input buffers the caller gives up (they are moved
   * to the thread, not copied). With `signal`, a run not yet started is dropped when it aborts,
   * and one running is answered with the abort reason at once.
   */
  run(session: number, feeds: Record<string, WireTensor>, opts: { signal?: AbortSignal; transfer?: ArrayBuffer[] } = {}) {
    return new Promise<Record<string, WireTensor>>((resolve, reject) => {
      if (!this.usable) {
        reject(this.gone());
        return;
      }
      if (opts.signal?.aborted) {
        reject(opts.signal.reason);
        return;
      }
      const item: QueuedRun = { session, feeds, transfer: opts.transfer ?? [], signal: opts.signal, resolve, reject };
      if (opts.signal) {
        const signal = opts.signal;
        item.onAbort = () => {
          const i = this.queue.indexOf(item);
          if (i >= 0) {
            this.queue.splice(i, 1);
            this.outstanding -= 1;
          }
          reject(signal.reason);
        };
        signal.addEventListener('abort', item.onAbort, { once: true });
      }
      this.outstanding += 1;
      this.queue.push(item);
      this.pump();
    });
  }

  /** Frees a session in the thread. */
  async release(session: number): Promise<void> {
    if (!this.usable) return;
    await this.request({ op: 'release', id: 0, session });
  }

  /**
   * Stops the thread: runs waiting fail with UNAVAILABLE at once, and a run in progress is
   * abandoned (its caller is answered now), but the thread itself is stopped only once that
   * native call has returned (see {@link EXIT_WAIT_MS}). Idempotent.
   */
  async close(): Promise<void> {
    if (this.state === 'CLOSED' || this.state === 'CLOSING') return;
    this.transition(['STARTING', 'RUNNING', 'FAILED'], 'CLOSING');
    const err = new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `model runner ${this.name} is closing`);
    for (const q of this.queue.splice(0)) q.reject(err);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    while (Atomics.load(this.inNative, 0) === 1) await new Promise((resolve) => setTimeout(resolve, 20));
    await this.worker.terminate();
    live.delete(this.inNative);
    this.state = 'CLOSED';
  }

  private pump(): void {
    if (this.busy || !this.usable) return;
    const item = this.queue.shift();
    if (!item) return;
    this.busy = true;
    const done = (): void => {
      if (item.onAbort) item.signal?.removeEventListener('abort', item.onAbort);
      this.outstanding -= 1;
      this.busy = false;
      this.pump();
    };
    this.request<Record<string, WireTensor>>({ op: 'run', id: 0, session: item.session, feeds: item.feeds }, item.transfer).then(
      (out) => {
        done();
        item.resolve(out);
      },
      (err: unknown) => {
        done();
        item.reject(err);
      },
    );
  }

  private request<T>(req: RunnerRequest, transfer: ArrayBuffer[] = []): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (!this.usable) {
        reject(this.gone());
        return;
      }
      const id = this.nextId++;
      this.pending.set(id, { resolve: (v: unknown) => resolve(v as T), reject });
      this.worker.ref();
      try {
        this.worker.postMessage({ ...req, id }, transfer);
      } catch (err) {
        this.pending.delete(id);
        this.idle();
        reject(err);
      }
    });
  }

  private onMessage(msg: RunnerResponse): void {
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    this.idle();
    if (msg.ok) p.resolve(msg.result);
    else p.reject(Object.assign(new Error(msg.error.message), { name: msg.error.name }));
  }

  /** A thread with nothing to answer does not keep the process alive. */
  private idle(): void {
    if (this.pending.size === 0) this.worker.unref();
  }

  private fail(err: Error): void {
    if (this.state === 'CLOSING' || this.state === 'CLOSED') return;
    live.delete(this.inNative);
    this.state = 'FAILED';
    this.failure = err;
    const e = this.gone();
    for (const q of this.queue.splice(0)) q.reject(e);
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  private gone(): DiffmeshError {
    return new DiffmeshError(
      Code.UNAVAILABLE,
      'MODEL_LOAD_FAILED',
      `model runner ${this.name} is not running${this.failure ? ` (${this.failure.message})` : ''}`,
      this.failure ? { cause: this.failure } : {},
    );
  }

  private transition(from: RunnerState[], to: RunnerState): void {
    if (from.includes(this.state)) this.state = to;
  }
}

/**
 * The file a runner thread starts from: the compiled runner module beside this one. Under a
 * test runner that loads TypeScript sources, its build in `dist/`; in a single-file bundle,
 * the bundle itself (the runner module is part of it and starts on the mark).
 */
function runnerWorkerUrl(): string {
  const url = RUNNER_WORKER_URL;
  if (url.endsWith('.ts')) {
    const js = url.replace(/\/src\/([^/]+)\.ts$/, '/dist/$1.js');
    if (existsSync(fileURLToPath(js))) return js;
  }
  return url;
}
