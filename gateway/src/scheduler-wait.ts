/**
 * Which scheduler calls of the proto routes wait for a restarting scheduler (see the
 * client's WaitPolicy): those that can be sent twice without a second effect — the reads,
 * Cancel, and a Submit or Generate that names its request id (a scheduler that already has
 * the id attaches to that request). A Submit without an id is sent once: if its answer was
 * lost, a second one could start the request twice.
 */
import type { WaitPolicy } from '@diffmesh/client';
import { SERVICE_NAMES } from '@diffmesh/protos';

const SAFE_TO_REPEAT = new Set(['Get', 'Watch', 'GetResult', 'Cancel', 'GetStatus', 'ListModels']);
const SAFE_WITH_ID = new Set(['Submit', 'Generate']);

/** The wait of one proto-route call to `grpcPath` with request `request` (proto field names), or undefined when it must not wait. */
export function schedulerWaitFor(
  grpcPath: string,
  request: Record<string, unknown>,
  policy: WaitPolicy | undefined,
): WaitPolicy | undefined {
  if (!policy || policy.maxWaitMs <= 0) return undefined;
  const prefix = `/${SERVICE_NAMES.scheduler}/`;
  if (!grpcPath.startsWith(prefix)) return undefined;
  const method = grpcPath.slice(prefix.length);
  if (SAFE_TO_REPEAT.has(method)) return policy;
  const id = request.request_id;
  return SAFE_WITH_ID.has(method) && typeof id === 'string' && id !== '' ? policy : undefined;
}
