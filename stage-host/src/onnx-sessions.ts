import { realpath } from 'node:fs/promises';
import { arch, platform } from 'node:os';
import ort from 'onnxruntime-node';
import { Code, DiffmeshError } from '@diffmesh/core';

/** Execution providers a stage may ask onnxruntime for. */
export const EXECUTION_PROVIDERS = ['cpu', 'cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'] as const;
export type ExecutionProvider = (typeof EXECUTION_PROVIDERS)[number];

/** Threading and execution providers of onnxruntime sessions. */
export interface OrtOptions {
  /** Threads used inside one operator; 0 = onnxruntime's default. */
  intraOpThreads: number;
  /** Threads running independent operators; 0 = default. */
  interOpThreads: number;
  /**
   * Execution providers in order of preference (onnxruntime falls back along the list, and to
   * the CPU for operators a provider lacks). Default `['cpu']`.
   */
  executionProviders?: readonly ExecutionProvider[];
}

/** The execution providers this platform's onnxruntime-node build has (cpu, cuda, … ). */
export function availableExecutionProviders(): string[] {
  return ort.listSupportedBackends().map((b) => b.name);
}

/**
 * Checks that every provider asked for exists in this platform's onnxruntime-node build:
 * `coreml` only on macOS, `dml` only on Windows, `cuda`/`tensorrt` on Linux x64 and Windows.
 * Throws FAILED_PRECONDITION naming the provider and what the platform has.
 */
export function checkExecutionProviders(providers: readonly string[]): void {
  const available = availableExecutionProviders();
  for (const p of providers) {
    if (!(EXECUTION_PROVIDERS as readonly string[]).includes(p)) {
      throw new DiffmeshError(
        Code.INVALID_ARGUMENT,
        'INVALID_PARAMETER',
        `execution provider "${p}" is unknown (known: ${EXECUTION_PROVIDERS.join(', ')})`,
        { metadata: { field: 'execution_providers' } },
      );
    }
    if (!available.includes(p)) {
      throw new DiffmeshError(
        Code.FAILED_PRECONDITION,
        'MODEL_LOAD_FAILED',
        `execution provider "${p}" is not available in onnxruntime-node on ${platform()}/${arch()} (available: ${available.join(', ')})`,
        { metadata: { field: 'execution_providers' } },
      );
    }
  }
}

/**
 * Loads each ONNX file once per process and shares the session; creating a session costs
 * tens to hundreds of milliseconds (and the weights' memory), so stage handlers never do it
 * per request. Files are keyed by their real path, so a model reached through a symlink or
 * under two ids is loaded once. Sessions are created from the path, so external weights
 * (`model.onnx_data`) are read from beside the file.
 */
export class SessionCache {
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();
  private readonly providers: readonly ExecutionProvider[];

  constructor(private readonly opts: OrtOptions = { intraOpThreads: 0, interOpThreads: 0 }) {
    this.providers = opts.executionProviders?.length ? opts.executionProviders : ['cpu'];
    checkExecutionProviders(this.providers);
  }

  /** The execution providers sessions are created with. */
  get executionProviders(): readonly ExecutionProvider[] {
    return this.providers;
  }

  async get(file: string): Promise<ort.InferenceSession> {
    const key = await realpath(file).catch(() => file);
    let s = this.sessions.get(key);
    if (!s) {
      s = this.create(key);
      // A failed load is not cached, so a fixed file can be retried.
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    return s;
  }

  /** Number of sessions created (or being created). */
  get size(): number {
    return this.sessions.size;
  }

  private async create(file: string): Promise<ort.InferenceSession> {
    const options: ort.InferenceSession.SessionOptions = { graphOptimizationLevel: 'all' };
    if (this.opts.intraOpThreads > 0) options.intraOpNumThreads = this.opts.intraOpThreads;
    if (this.opts.interOpThreads > 0) options.interOpNumThreads = this.opts.interOpThreads;
    if (this.providers.some((p) => p !== 'cpu')) options.executionProviders = [...this.providers];
    try {
      return await ort.InferenceSession.create(file, options);
    } catch (err) {
      const gpu = this.providers.filter((p) => p !== 'cpu');
      const hint =
        gpu.length > 0
          ? ` with execution providers ${this.providers.join(', ')} (a GPU provider needs its runtime libraries, e.g. CUDA and cuDNN for cuda, installed where onnxruntime-node finds them)`
          : '';
      // UNAVAILABLE: this instance cannot run the model (a corrupt copy, missing GPU libraries);
      // the task is retried elsewhere and the instance's breaker counts it.
      throw new DiffmeshError(
        Code.UNAVAILABLE,
        'MODEL_LOAD_FAILED',
        `${file}: onnxruntime could not load the model${hint}: ${(err as Error).message}`,
        { cause: err, metadata: { file } },
      );
    }
  }

  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map(async (p) => (await p.catch(() => undefined))?.release()));
  }
}

export { ort };
