/**
 * The messages between a stage's main thread and its ONNX runner threads
 * (see {@link OnnxRunner}). Tensors cross as plain `{ type, dims, data }` records; output
 * buffers are transferred, not copied.
 */

/** A tensor as it crosses a thread boundary. */
export interface WireTensor {
  type: string;
  dims: number[];
  data: ArrayBufferView;
}

/** One execution provider to try, with its options (onnxruntime's EP config object). */
export interface ProviderChoice {
  name: string;
  options?: Record<string, unknown>;
}

/** The session options that cross to the runner (no functions, no EP list: that is {@link ProviderChoice}). */
export interface WireSessionOptions {
  graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'layout' | 'all';
  intraOpNumThreads?: number;
  interOpNumThreads?: number;
  logSeverityLevel?: 0 | 1 | 2 | 3 | 4;
  enableGraphCapture?: boolean;
  freeDimensionOverrides?: Record<string, number>;
  extra?: Record<string, unknown>;
}

/** Input or output metadata of a loaded session, as onnxruntime reports it. */
export interface WireValueMetadata {
  name: string;
  isTensor: boolean;
  type?: string;
  shape?: Array<number | string>;
}

export type RunnerRequest =
  | { op: 'load'; id: number; source: string | Uint8Array; provider: ProviderChoice; options: WireSessionOptions }
  | { op: 'run'; id: number; session: number; feeds: Record<string, WireTensor> }
  | { op: 'release'; id: number; session: number };

/** What a load answers: the session's handle in its runner, and its inputs and outputs. */
export interface LoadResult {
  session: number;
  inputMetadata: WireValueMetadata[];
  outputMetadata: WireValueMetadata[];
}

export type RunnerResponse =
  | { id: number; ok: true; result: LoadResult | Record<string, WireTensor> | null }
  | { id: number; ok: false; error: { message: string; name: string } };

/** The key of `workerData` that makes a module loaded in a worker thread start the runner loop. */
export const RUNNER_WORKER_MARK = 'diffmeshOnnxRunner';
