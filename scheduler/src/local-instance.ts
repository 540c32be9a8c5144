import {
  SPAN,
  extractTraceContext,
  stageExecuteAttributes,
  withSpan,
  type AdapterReport,
  type Logger,
  type StageHandler,
  type StageResult,
  type StageTask,
} from '@diffmesh/core';
import type { ExecuteHooks, StageInstance } from './types.js';

/** A stage handler running in this process, as a dispatch target (the embedded runtime). */
export class LocalInstance implements StageInstance {
  readonly stage;
  readonly nodeId;
  readonly version;
  readonly models: readonly string[];

  constructor(
    readonly id: string,
    readonly pool: string,
    private readonly handler: StageHandler,
    readonly capacity: number,
    private readonly log: Logger,
    opts: { nodeId?: string; version?: string } = {},
  ) {
    this.stage = handler.stage;
    this.nodeId = opts.nodeId ?? 'local';
    this.version = opts.version ?? '0.0.0';
    this.models = handler.models();
  }

  adapters(): AdapterReport | undefined {
    return this.handler.adapters?.();
  }

  execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    // The same span a stage service makes, so an embedded trace has the mesh's shape.
    return withSpan(
      SPAN.stageExecute,
      stageExecuteAttributes(task, { pool: this.pool, instanceId: this.id, nodeId: this.nodeId }),
      () =>
        this.handler.execute(task, {
          get signal() {
            return hooks.cancel.signal;
          },
          ...(hooks.preempt ? { preempt: hooks.preempt } : {}),
          onProgress: hooks.onProgress,
          log: this.log.child({ reqId: task.reqId, stage: task.stage }),
        }),
      { parent: extractTraceContext(task.traceContext) },
    );
  }
}
