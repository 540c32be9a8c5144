import {
  Code,
  type AdapterReport,
  DiffmeshError,
  type Cancellation,
  type GenerationParams,
  type ObjectRef,
  type RequestContext,
  type StageName,
  type StageProgress,
  type StageResult,
  type StageTask,
} from '@diffmesh/core';

/**
 * A stage instance the scheduler can dispatch to: an in-process handler in the embedded
 * runtime, a remote stage service in the mesh. `capacity` is how many tasks it may run at
 * once; the scheduler never sends more.
 */
export interface StageInstance {
  readonly id: string;
  readonly pool: string;
  readonly stage: StageName;
  readonly nodeId: string;
  readonly version: string;
  readonly capacity: number;
  /** Models served; empty = any. */
  readonly models: readonly string[];
  /** gRPC address of a remote instance (none for an in-process one). */
  readonly address?: string;
  execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult>;
  /** False while the instance must not get work (breaker open, connection lost). */
  available?(): boolean;
  /** State of its circuit breaker, for an instance that has one. */
  breakerState?(): 'open' | 'half-open' | 'closed';
  /**
   * True while its half-open breaker has its one probe out: it gets no other task until the
   * probe answers (the breaker would refuse it).
   */
  probing?(): boolean;
  /**
   * Calls `listener` whenever the instance may take work again after it could not (its
   * breaker went half-open or closed), so tasks waiting for it are dispatched. Returns a
   * function that stops the calls.
   */
  onAvailable?(listener: () => void): () => void;
  /** True once its connection is lost for good (a task that failed with it was lost, not failed). */
  isGone?(): boolean;
  /** Releases connections; the instance gets no more work. */
  close?(): void;
  /**
   * The LoRA adapters it holds and can load, as it last reported them; undefined for an
   * instance that does not report them (a stage other than denoising, an older build).
   */
  adapters?(): AdapterReport | undefined;
}

/**
 * What `execute` rejects with when the instance refused the task without running it (its
 * breaker did not let it through). The scheduler puts the task back in its queue, and the
 * try does not count as an attempt.
 */
export class TaskRefused extends DiffmeshError {
  constructor(message: string) {
    super(Code.UNAVAILABLE, 'BREAKER_OPEN', message);
    this.name = 'TaskRefused';
  }
}

export interface ExecuteHooks {
  /** Cancelled when the request ends early or the dispatch deadline passes. */
  cancel: Cancellation;
  /**
   * Aborted to preempt the task: it stops at its next step boundary with a checkpoint there
   * (its progress says `preempted`) and fails with PREEMPTED. An instance that cannot pass it
   * on lets the task finish.
   */
  preempt?: AbortSignal;
  onProgress(progress: StageProgress): void;
}

/** Longest timeout the scheduler takes (a Node timer's limit, about 24.8 days). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Longest client-chosen request id. */
export const MAX_REQUEST_ID_CHARS = 128;

/** What a client asks for. Unset params take the model's defaults. */
export interface GenerateRequest {
  model: string;
  params: Partial<GenerationParams> & { prompt: string };
  /** Larger runs first; default 0. */
  priority?: number;
  /** Request timeout in ms, at most {@link MAX_TIMEOUT_MS}; 0/unset = the scheduler's default. */
  timeoutMs?: number;
  /**
   * When the request must be done by (ms since the epoch); unset = none. Within a priority the
   * earliest deadline runs first; one the pool cannot meet by its measured speed is refused
   * (DEADLINE_EXCEEDED / DEADLINE_UNREACHABLE) or run anyway, as the scheduler's
   * `deadlinePolicy` says.
   */
  deadline?: number;
  /**
   * Client-chosen id; a repeated id returns the existing request (idempotent submit). At most
   * {@link MAX_REQUEST_ID_CHARS} characters, none of them `:` (it starts the request's object
   * ids); empty = the scheduler picks one.
   */
  requestId?: string;
  traceContext?: Record<string, string>;
  /**
   * Objects the request starts with, by name: `input_image` (the encoded input image, stored
   * by `submitWithInputImage`). They become the RequestContext's first refs, every stage gets
   * them as task inputs, and they are deleted with the request's other objects.
   */
  inputs?: Record<string, ObjectRef>;
  /**
   * The tenant the request belongs to, from the caller's credentials (the service sets it;
   * absent = `default`, tenancy off). Only this tenant (and admins) may read, follow or
   * cancel the request; fair share and quotas are per tenant (see `fair-share.ts`).
   */
  tenant?: string;
}

/** Timing of one stage of a request. Times are ms since the epoch; 0 = not yet. */
export interface StageTiming {
  stageIndex: number;
  stage: StageName;
  pool: string;
  instanceId: string;
  attempts: number;
  queuedAt: number;
  startedAt: number;
  finishedAt: number;
}

/** A snapshot of a request, as Get returns it. */
export interface RequestState {
  context: RequestContext;
  /**
   * The plan registry entry serving the request: its exact model name, or its pattern.
   * Unlike `context.model` (whatever name the client sent that the pattern accepts), a
   * bounded set of values: metrics label requests with it.
   */
  planName: string;
  /** Steps done and total of the current stage. */
  step: number;
  totalSteps: number;
  timings: StageTiming[];
  /** Outputs of the last stage once completed. */
  result: Record<string, ObjectRef>;
}
