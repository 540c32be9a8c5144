import { DiffmeshError, fromWire } from '@diffmesh/core';

/** True for a gRPC status error as grpc-js raises it (a numeric code and details). */
function isGrpcStatus(err: unknown): boolean {
  return typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'number' && 'details' in err;
}

function asExpected(err: unknown): DiffmeshError {
  if (err instanceof DiffmeshError) return err;
  // A gRPC status carries the DiffmeshError its server raised (code, reason, field).
  if (isGrpcStatus(err)) return fromWire(err);
  throw new Error(`expected a DiffmeshError, got ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`, { cause: err });
}

/**
 * The DiffmeshError that `p` rejects with (a gRPC status error is read back into one).
 * Fails when `p` resolves or rejects with anything else, so a test of an error path cannot
 * pass on the happy path.
 */
export async function rejection(p: Promise<unknown>): Promise<DiffmeshError> {
  try {
    await p;
  } catch (err) {
    return asExpected(err);
  }
  throw new Error('expected a rejection, but the promise resolved');
}

/** The DiffmeshError that `fn` throws; fails when it returns or throws anything else. */
export function thrown(fn: () => unknown): DiffmeshError {
  try {
    fn();
  } catch (err) {
    return asExpected(err);
  }
  throw new Error('expected an error, but the call returned');
}
