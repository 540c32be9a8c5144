import { Code, DiffmeshError } from '@diffmesh/core/client';

/**
 * A model directory that cannot be served: FAILED_PRECONDITION / MODEL_LOAD_FAILED, with the
 * directory, the file (relative to it) and, where there is one, the graph input or output in
 * the message and in the error's metadata (`model_dir`, `file`, `input`).
 */
export function layoutError(dir: string, file: string, message: string, opts: { input?: string; cause?: unknown } = {}): DiffmeshError {
  const where = file ? `${file}: ` : '';
  return new DiffmeshError(Code.FAILED_PRECONDITION, 'MODEL_LOAD_FAILED', `model directory ${dir}: ${where}${message}`, {
    metadata: { model_dir: dir, ...(file ? { file } : {}), ...(opts.input ? { input: opts.input } : {}) },
    ...(opts.cause !== undefined ? { cause: opts.cause } : {}),
  });
}
