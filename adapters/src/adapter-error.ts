import { Code, DiffmeshError } from '@diffmesh/core';

/**
 * An adapter file that cannot be used: INVALID_ARGUMENT / INVALID_PARAMETER, naming the file
 * and, where there is one, the tensor key (also in the error's metadata: `adapter_file`, `key`).
 */
export function adapterFileError(file: string, message: string, opts: { key?: string; node?: string } = {}): DiffmeshError {
  return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `adapter ${file}: ${message}`, {
    metadata: { adapter_file: file, ...(opts.key ? { key: opts.key } : {}), ...(opts.node ? { node: opts.node } : {}) },
  });
}
