import * as grpc from '@grpc/grpc-js';
import { loadDiffmeshProtos, messageCodec, preEncoded, type WorkRequest, type WorkResponse__Output } from '@diffmesh/protos';
import {
  Code,
  DiffmeshError,
  channelOptions,
  clientCredentials,
  countsForBreaker,
  createBreaker,
  errorDetailFromWire,
  fromWire,
  objectRefsFromWire,
  taskToWire,
  type AdapterReport,
  type BreakerOptions,
  type CircuitBreaker,
  type Logger,
  type StageName,
  type StageResult,
  type StageTask,
  type TlsFiles,
} from '@diffmesh/core';
import { TaskRefused, type ExecuteHooks, type StageInstance } from './types.js';

/** What the scheduler knows of a stage instance from discovery. */
export interface RemoteInstanceInfo {
  id: string;
  pool: string;
  stage: StageName;
  nodeId: string;
  version: string;
  capacity: number;
  models: string[];
  grpcAddress: string;
}

export interface RemoteInstanceOptions {
  info: RemoteInstanceInfo;
  log: Logger;
  tls?: TlsFiles;
  breaker?: Partial<Omit<BreakerOptions, 'name'>>;
  /** Called once when the dispatch stream breaks: the instance is gone. */
  onGone?: (id: string, reason: string) => void;
  /**
   * Ask for the instance to this scheduler alone (schedulers sharing a queue): no other
   * scheduler dispatches to it while this stream is open, so capacity holds globally.
   */
  exclusive?: boolean;
}

const workRequests = messageCodec<WorkRequest>('diffmesh.stage.v1.WorkRequest');

/** How long a cancelled task may take to confirm before its slot is freed anyway. */
const CANCEL_CONFIRM_MS = 5_000;

interface Pending {
  resolve(r: StageResult): void;
  reject(e: unknown): void;
  hooks: ExecuteHooks;
}

/**
 * A stage instance in another process. Tasks, progress, results and cancellations travel
 * on one long-lived bidirectional `Work` stream; a broken stream fails every task on it
 * with UNAVAILABLE at once (so the scheduler retries them elsewhere) and marks the
 * instance gone. Each instance sits behind a circuit breaker that counts only
 * UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and INTERNAL.
 */
export class RemoteInstance implements StageInstance {
  readonly id: string;
  readonly pool: string;
  readonly stage: StageName;
  readonly nodeId: string;
  readonly version: string;
  readonly capacity: number;
  readonly models: readonly string[];
  readonly address: string;
  readonly breaker: CircuitBreaker<[StageTask, ExecuteHooks], StageResult>;
  private readonly client: grpc.Client & { Work(metadata?: grpc.Metadata): grpc.ClientDuplexStream<WorkRequest, WorkResponse__Output> };
  private readonly stream: grpc.ClientDuplexStream<WorkRequest, WorkResponse__Output>;
  private readonly pending = new Map<string, Pending>();
  private gone = false;
  private heldElsewhere = false;
  /** Its adapters, as its last status reported them. */
  private report: AdapterReport | undefined;
  /**
   * Settles once the instance has answered the new stream: `ready` with its first status,
   * `held` when another scheduler holds its Work stream, `lost` when the stream failed.
   */
  readonly attached: Promise<'ready' | 'held' | 'lost'>;
  private settleAttached!: (how: 'ready' | 'held' | 'lost') => void;

  constructor(private readonly opts: RemoteInstanceOptions) {
    const { info } = opts;
    this.id = info.id;
    this.pool = info.pool;
    this.stage = info.stage;
    this.nodeId = info.nodeId;
    this.version = info.version;
    this.capacity = info.capacity;
    this.models = info.models;
    this.address = info.grpcAddress;
    const Ctor = loadDiffmeshProtos().diffmesh.stage.v1.StageService as unknown as new (
      address: string,
      creds: grpc.ChannelCredentials,
      options: grpc.ChannelOptions,
    ) => RemoteInstance['client'];
    // Keepalive pings on the dispatch stream: a hung (not just dead) instance's stream breaks
    // within about 15 s, and its tasks go back to the queue.
    this.client = new Ctor(
      info.grpcAddress,
      clientCredentials(opts.tls),
      channelOptions({ 'grpc.keepalive_time_ms': 10_000, 'grpc.keepalive_timeout_ms': 5_000 }),
    );
    let settled = false;
    this.attached = new Promise((resolve) => {
      this.settleAttached = (how) => {
        if (settled) return;
        settled = true;
        resolve(how);
      };
    });
    const metadata = new grpc.Metadata();
    if (opts.exclusive) metadata.set('diffmesh-work', 'exclusive');
    this.stream = this.client.Work(metadata);
    this.stream.on('data', (msg: WorkResponse__Output) => this.onMessage(msg));
    this.stream.on('error', (err: Error) => {
      if (fromWire(err).reason === 'INSTANCE_HELD') {
        this.heldElsewhere = true;
        this.settleAttached('held');
        this.lost('another scheduler holds its Work stream', true);
        return;
      }
      this.lost(`dispatch stream failed: ${err.message}`);
    });
    this.stream.on('end', () => this.lost('dispatch stream ended'));
    this.breaker = createBreaker((task: StageTask, hooks: ExecuteHooks) => this.send(task, hooks), {
      name: info.id,
      ...opts.breaker,
      // A half-open breaker's probe that its request cancelled proves nothing about the
      // instance, yet opossum would take an uncounted failure for a success and close the
      // breaker: counted, it reopens, and another probe goes after resetTimeout.
      counts: (err) => countsForBreaker(err) || (this.breaker.halfOpen && (err as { code?: unknown })?.code === Code.CANCELLED),
    });
    this.breaker.on('open', () => opts.log.warn({ instance: info.id, pool: info.pool }, 'breaker opened'));
    this.breaker.on('close', () => opts.log.info({ instance: info.id, pool: info.pool }, 'breaker closed'));
  }

  /** Open breaker or lost stream → no work. A half-open breaker lets a probe through. */
  available(): boolean {
    return !this.gone && !this.breaker.opened;
  }

  /** True once it was closed or its dispatch stream broke: it takes no more work. */
  isGone(): boolean {
    return this.gone;
  }

  /** True when the instance refused this scheduler's stream: another scheduler dispatches to it. */
  isHeldElsewhere(): boolean {
    return this.heldElsewhere;
  }

  /** `open`, `half-open` or `closed`. */
  breakerState(): 'open' | 'half-open' | 'closed' {
    return this.breaker.opened ? 'open' : this.breaker.halfOpen ? 'half-open' : 'closed';
  }

  /** Calls `listener` when the breaker goes half-open (a probe may go) or closes. */
  onAvailable(listener: () => void): () => void {
    const call = (): void => listener();
    this.breaker.on('halfOpen', call);
    this.breaker.on('close', call);
    return () => {
      this.breaker.off('halfOpen', call);
      this.breaker.off('close', call);
    };
  }

  /** True while its half-open breaker's one probe is out (the breaker refuses other calls). */
  probing(): boolean {
    return !this.gone && this.breaker.halfOpen && !this.breaker.pendingClose;
  }

  execute(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    // The breaker lets a call through only when closed, or half-open before its probe: a
    // call it would refuse is refused here, so the scheduler knows the task never ran.
    if (!this.breaker.closed && !this.breaker.pendingClose) {
      return Promise.reject(new TaskRefused(`circuit breaker of instance ${this.id} is ${this.breakerState()}`));
    }
    return this.breaker.fire(task, hooks);
  }

  close(): void {
    this.settleAttached('lost');
    if (this.gone) return;
    this.gone = true;
    this.failAll(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `instance ${this.id} was removed`));
    this.stream.end();
    this.client.close();
    this.breaker.shutdown();
  }

  private send(task: StageTask, hooks: ExecuteHooks): Promise<StageResult> {
    if (this.gone) {
      return Promise.reject(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `instance ${this.id} is gone`));
    }
    const key = `${task.reqId}#${task.stageIndex}#${task.attempt}`;
    return new Promise<StageResult>((resolve, reject) => {
      // A task stopped by the dispatch's own deadline is a timeout whatever the instance
      // answers (it says CANCELLED, or nothing): so the breaker counts it, and a hung
      // instance stops getting work.
      const fail = (e: unknown): void =>
        reject(
          hooks.cancel.timedOut()
            ? new DiffmeshError(
                Code.DEADLINE_EXCEEDED,
                'TIMEOUT',
                `instance ${this.id} did not finish ${task.stage} within the stage deadline`,
              )
            : e,
        );
      // The slot stays taken until the instance confirms it stopped (its TaskFailed answer),
      // so the next task is never sent to an instance that is still busy; an instance that
      // does not answer in time is given up on.
      const onAbort = (): void => {
        if (!this.pending.has(key)) return;
        const reason = hooks.cancel.timedOut() ? 'stage deadline passed' : 'request cancelled';
        this.stream.write({ cancel: { reqId: task.reqId, stageIndex: task.stageIndex, attempt: task.attempt, reason } });
        setTimeout(() => {
          const p = this.pending.get(key);
          if (!p) return;
          this.pending.delete(key);
          p.reject(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'task cancelled; the instance did not confirm'));
        }, CANCEL_CONFIRM_MS).unref();
      };
      if (hooks.cancel.aborted) {
        fail(new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'task cancelled'));
        return;
      }
      const done = hooks.cancel.onCancel(onAbort);
      // A preemption goes to the instance as is: the task stops at its next step boundary.
      const onPreempt = (): void => {
        if (this.pending.has(key))
          this.stream.write({ preempt: { reqId: task.reqId, stageIndex: task.stageIndex, attempt: task.attempt } });
      };
      hooks.preempt?.addEventListener('abort', onPreempt, { once: true });
      const unpreempt = (): void => hooks.preempt?.removeEventListener('abort', onPreempt);
      this.pending.set(key, {
        resolve: (r) => {
          done();
          unpreempt();
          resolve(r);
        },
        reject: (e) => {
          done();
          unpreempt();
          fail(e);
        },
        hooks,
      });
      // Encoded directly (taskToWire builds the encoder's form): the assignment is on every request's path.
      this.stream.write(preEncoded<WorkRequest>(workRequests.encodeReady({ assignment: { task: taskToWire(task) } })));
    });
  }

  adapters(): AdapterReport | undefined {
    return this.report;
  }

  private onMessage(msg: WorkResponse__Output): void {
    const body = msg.progress ?? msg.result ?? msg.failed;
    if (!body) {
      // Status: the stream is ours (load is tracked by the scheduler's own slot count); it
      // carries the instance's adapters, again whenever they change.
      if (msg.status) {
        const a = msg.status.adapters;
        this.report = a ? { held: [...a.held], available: [...a.available] } : undefined;
        this.settleAttached('ready');
      }
      return;
    }
    const key = `${body.reqId}#${body.stageIndex}#${body.attempt}`;
    const p = this.pending.get(key);
    if (!p) return;
    // This runs in the stream's listener, where a throw would end the process: an answer this
    // scheduler cannot read (e.g. a newer worker's dtype) fails its task, which is retried.
    try {
      if (msg.progress) {
        const checkpoint =
          msg.progress.checkpoint && Object.keys(msg.progress.checkpoint).length > 0
            ? objectRefsFromWire(msg.progress.checkpoint)
            : undefined;
        const previews = (msg.progress.previews ?? [])
          .filter((v) => v.data.byteLength > 0)
          .map((v) => ({ mediaType: v.mediaType, data: new Uint8Array(v.data), width: v.width, height: v.height, step: v.step }));
        p.hooks.onProgress({
          step: msg.progress.step,
          totalSteps: msg.progress.totalSteps,
          ...(checkpoint ? { checkpoint } : {}),
          ...(previews.length > 0 ? { previews } : {}),
          ...(msg.progress.preempted ? { preempted: true } : {}),
        });
      } else if (msg.result) {
        const outputs = objectRefsFromWire(msg.result.outputs);
        const warnings = msg.result.warnings ?? [];
        this.pending.delete(key);
        p.resolve(warnings.length > 0 ? { outputs, warnings } : { outputs });
      } else if (msg.failed) {
        this.pending.delete(key);
        p.reject(msg.failed.error ? errorDetailFromWire(msg.failed.error) : new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'task failed'));
      }
    } catch (err) {
      this.opts.log.error(
        { instance: this.id, pool: this.pool, reqId: body.reqId, stageIndex: body.stageIndex, err },
        'unreadable answer from a stage instance',
      );
      this.pending.delete(key);
      p.reject(
        new DiffmeshError(Code.INTERNAL, 'INTERNAL', `instance ${this.id} sent an answer this scheduler cannot read`, { cause: err }),
      );
    }
  }

  private lost(reason: string, quiet = false): void {
    this.settleAttached('lost');
    if (this.gone) return;
    this.gone = true;
    if (quiet) this.opts.log.debug({ instance: this.id, pool: this.pool, reason }, 'stage instance not available to this scheduler');
    else this.opts.log.warn({ instance: this.id, pool: this.pool, reason }, 'stage instance lost');
    this.failAll(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `instance ${this.id}: ${reason}`));
    this.client.close();
    this.opts.onGone?.(this.id, reason);
  }

  private failAll(err: DiffmeshError): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(err);
  }
}
