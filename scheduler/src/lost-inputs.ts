/**
 * Inputs of a failed task that are gone: their owner lost them (a tensor-svc restarted, a node
 * died) or cannot be reached. Asked only for failures that may come from a lost input
 * (`inputsMayBeLost`, see `classifyTaskEnd`); the stage that made one then runs again.
 */
import { Code, DiffmeshError, asDiffmeshError } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import type { RequestRecord } from './storage/types.js';

/** How long the probe of one input may take before the input counts as lost. */
const INPUT_PROBE_MS = 3000;

/** The names of the record's inputs (its refs) their owner does not have, or that could not be asked for in time. */
export async function lostInputs(tensors: TensorStore, rec: RequestRecord): Promise<string[]> {
  const refs = Object.entries(rec.state.context.refs).filter(([, r]) => !r.inlineData);
  const probes = await Promise.all(
    refs.map(async ([name, ref]) => {
      try {
        await withTimeout(tensors.stat(ref), INPUT_PROBE_MS);
        return undefined;
      } catch (err) {
        const e = asDiffmeshError(err);
        return e.code === Code.INVALID_ARGUMENT ? undefined : name;
      }
    }),
  );
  return probes.filter((n): n is string => n !== undefined);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
