import type * as grpc from '@grpc/grpc-js';
import { context as otelContext, trace } from '@opentelemetry/api';
import {
  type AdapterReport,
  type DescribeResponse,
  type ExecuteRequest__Output,
  type ExecuteResponse,
  type TaskProgress,
  type WorkRequest__Output,
  type WorkResponse,
  loadDiffmeshProtos,
  messageCodec,
  preEncoded,
} from '@diffmesh/protos';
import {
  Cancellation,
  Code,
  DiffmeshError,
  asDiffmeshError,
  traceFieldsFromTraceparent,
  type Logger,
  type ServiceBinding,
  extractTraceContext,
  ATTR,
  SPAN,
  SpanKind,
  diffmeshTracer,
  recordError,
  objectRefsToWire,
  stageNameToWire,
  timestampToWire,
  errorDetailToWire,
  toWire,
  type StageContext,
  type StageHandler,
  type StageProgress,
  type StageResult,
  type StageTask,
  stageExecuteAttributes,
  taskFromWire,
} from '@diffmesh/core';
import type { StageMetrics, StageTaskOutcome } from './stage-metrics.js';
import { withPutOptions } from '@diffmesh/tensor-client';

const workResponses = messageCodec<WorkResponse>('diffmesh.stage.v1.WorkResponse');

/** Longest delay a Node timer takes (about 24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Runs `fn` at time `at` (ms since the epoch), however far away, without keeping the
 * process alive; returns a function that cancels it.
 */
function atDeadline(at: number, fn: () => void): () => void {
  let timer: NodeJS.Timeout;
  const arm = (): void => {
    const left = at - Date.now();
    timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fn, Math.max(1, left));
    timer.unref();
  };
  arm();
  return () => clearTimeout(timer);
}

/** Identity of a stage instance, as Describe reports it. */
export interface StageInstanceIdentity {
  instanceId: string;
  nodeId: string;
  pool: string;
  version: string;
  /** Tasks run at once; more are refused with RESOURCE_EXHAUSTED. */
  capacity: number;
  /** Address of this node's tensor-svc, if any. */
  tensorAddress?: string;
  /**
   * Least time between two progress messages of a task (the last step is always sent).
   * 0 = every step. Keeps fast models from spending their CPU on progress traffic.
   */
  progressIntervalMs?: number;
}

/** Options of {@link StageService}. */
export interface StageServiceOptions {
  /** Task counts, durations, in-flight and step metrics; absent = none. */
  metrics?: StageMetrics;
}

/**
 * Serves a StageHandler as `diffmesh.stage.v1.StageService`: `Execute` for one task per
 * call, `Work` for the scheduler's long-lived dispatch stream (assignments and
 * cancellations in, progress and results out), `Describe` for identity and load. The
 * instance never runs more than `capacity` tasks; a task whose call or stream goes away
 * is aborted.
 */
export class StageService {
  private inFlight = 0;
  private draining = false;
  /** Open Work streams; and the one a scheduler holds for itself, if one does. */
  private readonly workStreams = new Set<grpc.ServerDuplexStream<WorkRequest__Output, WorkResponse>>();
  private exclusiveStream: grpc.ServerDuplexStream<WorkRequest__Output, WorkResponse> | undefined;
  private readonly idle = new Set<() => void>();
  /** The cancellations of the tasks running now; those {@link handBack} stopped. */
  private readonly running = new Set<Cancellation>();
  private readonly handedBack = new WeakSet<Cancellation>();
  /** Each open Work stream's status sender (sent again when the handler's adapters change). */
  private readonly statusSenders = new Set<() => void>();
  private statusDue = false;

  constructor(
    private readonly handler: StageHandler,
    readonly identity: StageInstanceIdentity,
    private readonly log: Logger,
    private readonly opts: StageServiceOptions = {},
  ) {
    // Several changes in one turn (a load that evicts another) make one status message.
    handler.onAdaptersChange?.(() => {
      if (this.statusDue) return;
      this.statusDue = true;
      setImmediate(() => {
        this.statusDue = false;
        for (const send of this.statusSenders) send();
      });
    });
  }

  /** The handler's adapters as the wire reports them (absent when it has none to report). */
  private adapterReport(): { adapters: AdapterReport } | Record<string, never> {
    const r = this.handler.adapters?.();
    return r ? { adapters: { held: r.held, available: r.available } } : {};
  }

  get load(): { inFlight: number; capacity: number; draining: boolean } {
    return { inFlight: this.inFlight, capacity: this.identity.capacity, draining: this.draining };
  }

  binding(): ServiceBinding {
    const proto = loadDiffmeshProtos();
    return {
      name: 'diffmesh.stage.v1.StageService',
      definition: proto.diffmesh.stage.v1.StageService.service,
      implementation: {
        Execute: (call: grpc.ServerWritableStream<ExecuteRequest__Output, ExecuteResponse>) => this.onExecute(call),
        Describe: (_call: grpc.ServerUnaryCall<unknown, DescribeResponse>, cb: grpc.sendUnaryData<DescribeResponse>) =>
          cb(null, this.describe()),
        Work: (call: grpc.ServerDuplexStream<WorkRequest__Output, WorkResponse>) => this.onWork(call),
      },
    };
  }

  /**
   * Gives the running tasks back (a drain grace is over): each stops and fails with
   * UNAVAILABLE/DRAINING, which the scheduler takes as a hand-back (the task goes back to its
   * queue at once and does not count as a failure; a denoiser's next try resumes from its
   * last checkpoint). Answers how many there were.
   */
  handBack(): number {
    const n = this.running.size;
    for (const c of this.running) {
      this.handedBack.add(c);
      c.cancel(
        new DiffmeshError(
          Code.UNAVAILABLE,
          'DRAINING',
          `instance ${this.identity.instanceId} is shutting down; the task goes back to its queue`,
          {
            retryAfterMs: 100,
          },
        ),
      );
    }
    return n;
  }

  /** Stops taking tasks; resolves when the ones running have finished. */
  drain(): Promise<void> {
    this.draining = true;
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.add(resolve));
  }

  private describe(): DescribeResponse {
    const id = this.identity;
    return {
      stage: stageNameToWire(this.handler.stage),
      pool: id.pool,
      models: this.handler.models(),
      capacity: id.capacity,
      inFlight: this.inFlight,
      version: id.version,
      instanceId: id.instanceId,
      nodeId: id.nodeId,
      tensorAddress: id.tensorAddress ?? '',
      ...this.adapterReport(),
    };
  }

  /** Admits a task or says why not. */
  private admit(): void {
    if (this.draining) {
      throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', `instance ${this.identity.instanceId} is draining`, {
        retryAfterMs: 100,
      });
    }
    if (this.inFlight >= this.identity.capacity) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'TOO_MANY_REQUESTS',
        `instance ${this.identity.instanceId} is at capacity (${this.identity.capacity})`,
        { retryAfterMs: 100 },
      );
    }
  }

  /**
   * Runs one task in a `diffmesh.stage.execute` span, a child of the trace context the task
   * carries (the scheduler's dispatch span): everything the handler does — model runs, tensor
   * transfers, log lines — belongs to the request's trace.
   */
  private async run(
    task: StageTask,
    cancel: Cancellation,
    onProgress: (progress: StageProgress) => void,
    preempt?: AbortSignal,
  ): Promise<StageResult> {
    const id = this.identity;
    const parent = extractTraceContext(task.traceContext);
    const span = diffmeshTracer().startSpan(
      SPAN.stageExecute,
      { kind: SpanKind.SERVER, attributes: stageExecuteAttributes(task, id) },
      parent,
    );
    const metrics = this.opts.metrics;
    try {
      this.admit();
    } catch (err) {
      metrics?.refused();
      recordError(span, err);
      span.setAttribute(ATTR.outcome, 'refused');
      span.end();
      throw err;
    }
    this.inFlight += 1;
    this.running.add(cancel);
    const ended = metrics?.taskStarted();
    let outcome: Exclude<StageTaskOutcome, 'refused'> = 'failed';
    let step = 0;
    let totalSteps = task.stage === 'denoising' ? task.params.numInferenceSteps : 1;
    // The deadline cancels the task like a cancel message would, remembering that it expired.
    let expired = false;
    const clearDeadline =
      task.deadline > 0
        ? atDeadline(task.deadline, () => {
            expired = true;
            cancel.cancel(new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `task deadline passed during ${task.stage}`));
          })
        : undefined;
    try {
      if (task.stage !== this.handler.stage) {
        throw new DiffmeshError(
          Code.INVALID_ARGUMENT,
          'INVALID_PARAMETER',
          `stage: this instance runs ${this.handler.stage}, not ${task.stage}`,
          { metadata: { field: 'stage' } },
        );
      }
      const models = this.handler.models();
      if (models.length > 0 && !models.includes(task.model)) {
        throw new DiffmeshError(Code.NOT_FOUND, 'UNKNOWN_MODEL', `model: this instance does not serve "${task.model}"`, {
          metadata: { field: 'model' },
        });
      }
      const interval = id.progressIntervalMs ?? 0;
      const denoising = task.stage === 'denoising';
      let lastProgress = -Infinity;
      const baseLog = this.log;
      let taskLog: Logger | undefined;
      // The signal and the task's logger are made only if the handler uses them.
      const ctx: StageContext = {
        get signal() {
          return cancel.signal;
        },
        ...(preempt ? { preempt } : {}),
        onProgress: (p) => {
          if (denoising) metrics?.denoisingSteps(p.step - step);
          step = Math.max(step, p.step);
          totalSteps = p.totalSteps;
          const now = performance.now();
          // A checkpoint always goes out (the next try resumes from it), and so does a preview.
          if (!p.checkpoint && !p.previews?.length && p.step < p.totalSteps && now - lastProgress < interval) return;
          lastProgress = now;
          onProgress(p);
        },
        get log() {
          return (taskLog ??= baseLog.child({ reqId: task.reqId, stage: task.stage, attempt: task.attempt }));
        },
      };
      try {
        // The outputs of a plan's last stage are the request's result: stores may keep them durably.
        const run = (): Promise<StageResult> =>
          task.lastStage ? withPutOptions({ finalResult: true }, () => this.handler.execute(task, ctx)) : this.handler.execute(task, ctx);
        const result = await (span.isRecording() ? otelContext.with(trace.setSpan(parent, span), run) : run());
        outcome = 'ok';
        return result;
      } catch (err) {
        if (expired) {
          outcome = 'timeout';
          throw new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', `task deadline passed during ${task.stage}`);
        }
        if (cancel.aborted) outcome = 'cancelled';
        else if (preempt?.aborted && asDiffmeshError(err).reason === 'PREEMPTED') {
          outcome = 'preempted';
          span.addEvent('diffmesh.preempted', { [ATTR.stepsDone]: step, [ATTR.stepCount]: totalSteps });
        }
        // Handed back: the scheduler is told so, whatever the handler threw when it stopped.
        if (this.handedBack.has(cancel)) throw cancel.reason;
        throw err;
      }
    } catch (err) {
      recordError(span, err);
      throw err;
    } finally {
      clearDeadline?.();
      cancel.dispose();
      span.setAttributes({ [ATTR.outcome]: outcome, [ATTR.stepCount]: totalSteps, [ATTR.stepsDone]: step });
      span.end();
      ended?.(outcome);
      this.running.delete(cancel);
      this.inFlight -= 1;
      if (this.inFlight === 0) {
        for (const resolve of this.idle) resolve();
        this.idle.clear();
      }
    }
  }

  private onExecute(call: grpc.ServerWritableStream<ExecuteRequest__Output, ExecuteResponse>): void {
    const cancel = new Cancellation();
    let answered = false;
    // grpc-js also reports a call it ended normally as cancelled: only an unanswered call is.
    call.on('cancelled', () => {
      if (!answered) cancel.cancel(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'call cancelled'));
    });
    let task: StageTask;
    try {
      task = taskFromWire(call.request.task);
    } catch (err) {
      call.emit('error', toWire(err));
      return;
    }
    const ids = { reqId: task.reqId, stageIndex: task.stageIndex, attempt: task.attempt };
    const started = Date.now();
    this.run(task, cancel, (p) => call.write({ progress: progressToWire(ids, p) }))
      .then((result) => {
        answered = true;
        call.write({
          result: {
            ...ids,
            outputs: objectRefsToWire(result.outputs),
            startedAt: timestampToWire(started),
            finishedAt: timestampToWire(Date.now()),
            warnings: result.warnings ?? [],
          },
        });
        call.end();
      })
      .catch((err: unknown) => {
        answered = true;
        if (!cancel.aborted) this.logFailure(task, err);
        call.emit('error', toWire(err));
      });
  }

  private onWork(call: grpc.ServerDuplexStream<WorkRequest__Output, WorkResponse>): void {
    // A scheduler that shares its queue with others asks for the instance to itself
    // (`diffmesh-work: exclusive`): one such scheduler at a time dispatches to it, so its slot
    // count is the truth whichever scheduler takes a task from the shared queue. Another is
    // refused and tries again later (it takes over when the holder's stream ends). Schedulers
    // with queues of their own (memory) share the instance as they always have.
    const exclusive = call.metadata.get('diffmesh-work')[0] === 'exclusive';
    if (this.exclusiveStream || (exclusive && this.workStreams.size > 0)) {
      call.emit(
        'error',
        toWire(
          new DiffmeshError(
            Code.FAILED_PRECONDITION,
            'INSTANCE_HELD',
            `instance ${this.identity.instanceId} takes work from one scheduler at a time, and another one holds its Work stream`,
            { retryAfterMs: 1000 },
          ),
        ),
      );
      return;
    }
    this.workStreams.add(call);
    if (exclusive) this.exclusiveStream = call;
    const letGo = (): void => {
      this.workStreams.delete(call);
      this.statusSenders.delete(status);
      if (this.exclusiveStream === call) this.exclusiveStream = undefined;
    };
    const running = new Map<string, Cancellation>();
    const preempts = new Map<string, AbortController>();
    const key = (reqId: string, stageIndex: number, attempt: number) => `${reqId}#${stageIndex}#${attempt}`;
    // Every answer is encoded directly (the converters build the encoder's form): they are on
    // every request's path.
    const send = (msg: WorkResponse): void => {
      if (call.writable) call.write(preEncoded<WorkResponse>(workResponses.encodeReady(msg)));
    };
    const status = (): void => {
      if (call.writable) {
        call.write({
          status: {
            instanceId: this.identity.instanceId,
            capacity: this.identity.capacity,
            inFlight: this.inFlight,
            draining: this.draining,
            ...this.adapterReport(),
          },
        });
      }
    };
    this.statusSenders.add(status);
    const abortAll = (why: string): void => {
      for (const c of running.values()) c.cancel(new DiffmeshError(Code.CANCELLED, 'CANCELLED', why));
      running.clear();
    };
    call.on('data', (msg: WorkRequest__Output) => {
      if (msg.cancel) {
        const c = running.get(key(msg.cancel.reqId, msg.cancel.stageIndex, msg.cancel.attempt));
        c?.cancel(new DiffmeshError(Code.CANCELLED, 'CANCELLED', msg.cancel.reason || 'cancelled by the scheduler'));
        return;
      }
      if (msg.preempt) {
        // The task stops at its next step boundary (a stage without steps finishes).
        preempts.get(key(msg.preempt.reqId, msg.preempt.stageIndex, msg.preempt.attempt))?.abort();
        return;
      }
      if (!msg.assignment) return;
      let task: StageTask;
      try {
        task = taskFromWire(msg.assignment.task);
      } catch (err) {
        const t = msg.assignment.task;
        send({
          failed: { reqId: t?.reqId ?? '', stageIndex: t?.stageIndex ?? 0, attempt: t?.attempt ?? 0, error: errorDetailToWire(err) },
        });
        return;
      }
      const ids = { reqId: task.reqId, stageIndex: task.stageIndex, attempt: task.attempt };
      const k = key(task.reqId, task.stageIndex, task.attempt);
      const cancel = new Cancellation();
      running.set(k, cancel);
      const preempt = new AbortController();
      preempts.set(k, preempt);
      const started = Date.now();
      this.run(task, cancel, (p) => send({ progress: progressToWire(ids, p) }), preempt.signal)
        .then((result) => {
          send({
            result: {
              ...ids,
              outputs: objectRefsToWire(result.outputs),
              startedAt: timestampToWire(started),
              finishedAt: timestampToWire(Date.now()),
              warnings: result.warnings ?? [],
            },
          });
        })
        .catch((err: unknown) => {
          if (!cancel.aborted) this.logFailure(task, err);
          send({ failed: { ...ids, error: errorDetailToWire(err) } });
        })
        .finally(() => {
          running.delete(k);
          preempts.delete(k);
        });
    });
    call.on('end', () => {
      letGo();
      abortAll('dispatch stream closed');
      call.end();
    });
    call.on('cancelled', () => {
      letGo();
      abortAll('dispatch stream cancelled');
    });
    call.on('error', () => {
      letGo();
      abortAll('dispatch stream failed');
    });
    status();
  }

  private logFailure(task: StageTask, err: unknown): void {
    const e = asDiffmeshError(err);
    const { traceId } = traceFieldsFromTraceparent(task.traceContext.traceparent);
    const fields = { reqId: task.reqId, stage: task.stage, attempt: task.attempt, reason: e.reason, ...(traceId ? { traceId } : {}) };
    if (e.code === Code.INTERNAL) this.log.error({ ...fields, err }, 'task failed');
    else this.log.warn({ ...fields, message: e.message }, 'task failed');
  }
}

/** A task's progress as a TaskProgress message (a checkpoint's refs, previews' bytes inline). */
function progressToWire(ids: { reqId: string; stageIndex: number; attempt: number }, p: StageProgress): TaskProgress {
  const { step, totalSteps, checkpoint, previews, preempted } = p;
  return {
    ...ids,
    step,
    totalSteps,
    ...(checkpoint ? { checkpoint: objectRefsToWire(checkpoint) } : {}),
    ...(previews?.length
      ? { previews: previews.map((v) => ({ ...v, data: Buffer.from(v.data.buffer, v.data.byteOffset, v.data.byteLength) })) }
      : {}),
    ...(preempted ? { preempted: true } : {}),
  };
}
