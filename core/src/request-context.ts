import type { ExecutionPlan } from './execution-plan.js';
import type { GenerationParams } from './generation-params.js';
import type { ObjectRef } from './object-ref.js';

export type RequestStatus = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';

/** The state of one generation request as it moves through its plan. */
export interface RequestContext {
  reqId: string;
  model: string;
  params: GenerationParams;
  executionPlan: ExecutionPlan;
  currentStageIndex: number;
  /** Named objects produced so far (name → ref). */
  refs: Record<string, ObjectRef>;
  status: RequestStatus;
  /** Milliseconds since the Unix epoch. */
  createdAt: number;
  updatedAt: number;
  /** Larger runs first. */
  priority: number;
  /** Request timeout in milliseconds; 0 = none. */
  timeoutMs: number;
  retryCount: number;
  error?: { code: string; reason: string; message: string; field?: string };
  /** W3C trace context (`traceparent`, `tracestate`). */
  traceContext: Record<string, string>;
  /** The tenant the request belongs to (fair share, quotas, who may see it); absent = `default` (tenancy off). */
  tenant?: string;
  /** When the request must be done by (ms since the epoch); absent = no deadline. Earliest first within a priority. */
  deadline?: number;
}
