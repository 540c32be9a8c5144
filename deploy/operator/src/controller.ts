import type { Logger } from 'pino';
import type { DiffusionPipeline } from './pipeline.js';
import type { ReconcileResult } from './reconcile.js';

/** Where DiffusionPipelines come from: the API server in production, a fake in tests. */
export interface PipelineSource {
  /** The pipeline now, or undefined when it is gone. */
  get(namespace: string, name: string): Promise<DiffusionPipeline | undefined>;
  /** Every pipeline (watched namespace or all). */
  list(): Promise<DiffusionPipeline[]>;
  /**
   * Calls `onChange` for each added/modified/deleted pipeline, and `onEnd` when the watch
   * stops (error or server timeout); returns a function that stops it.
   */
  watch(onChange: (namespace: string, name: string) => void, onEnd: (err?: unknown) => void): Promise<() => void>;
}

type State = 'INITIALIZED' | 'RUNNING' | 'STOPPING' | 'STOPPED';

/**
 * A work queue over pipeline keys (`namespace/name`): each key is reconciled by one worker at a
 * time, changes that arrive meanwhile fold into one more pass, failures back off
 * exponentially, and every pipeline is looked at again after its reconcile's requeue time.
 */
export class Controller {
  private state: State = 'INITIALIZED';
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private stopWatch?: () => void;
  private idle = Promise.resolve();

  constructor(
    private readonly source: PipelineSource,
    private readonly reconcile: (p: DiffusionPipeline) => Promise<ReconcileResult>,
    private readonly log: Logger,
    private readonly opts: { maxBackoffMs?: number; rewatchMs?: number } = {},
  ) {}

  get phase(): State {
    return this.state;
  }

  async start(): Promise<void> {
    if (this.state !== 'INITIALIZED') return;
    this.state = 'RUNNING';
    for (const p of await this.source.list()) this.enqueue(p.metadata.namespace ?? 'default', p.metadata.name);
    await this.watch();
  }

  private async watch(): Promise<void> {
    if (this.state !== 'RUNNING') return;
    this.stopWatch = await this.source.watch(
      (ns, name) => this.enqueue(ns, name),
      (err) => {
        if (this.state !== 'RUNNING') return;
        if (err) this.log.warn({ err: err instanceof Error ? err.message : JSON.stringify(err) }, 'watch ended; restarting');
        // List again on restart: events during the gap are not lost.
        setTimeout(() => {
          void this.source
            .list()
            .then((all) => all.forEach((p) => this.enqueue(p.metadata.namespace ?? 'default', p.metadata.name)))
            .then(() => this.watch())
            .catch((e) => this.log.error({ err: String(e) }, 'relist failed'));
        }, this.opts.rewatchMs ?? 1000).unref();
      },
    );
  }

  /** Schedules a reconcile of `namespace/name` after `delayMs` (0 = now). */
  enqueue(namespace: string, name: string, delayMs = 0): void {
    if (this.state !== 'RUNNING') return;
    const key = `${namespace}/${name}`;
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    const existing = this.timers.get(key);
    if (existing) clearTimeout(existing);
    const t = setTimeout(() => {
      this.timers.delete(key);
      void this.process(key);
    }, delayMs);
    t.unref();
    this.timers.set(key, t);
  }

  private async process(key: string): Promise<void> {
    if (this.state !== 'RUNNING') return;
    this.running.add(key);
    const [ns, name] = key.split('/') as [string, string];
    let next: number | undefined;
    const work = (async () => {
      try {
        const p = await this.source.get(ns, name);
        if (!p) return; // deleted: owner references take its objects with it
        const res = await this.reconcile(p);
        this.failures.delete(key);
        next = res.requeueAfterMs;
      } catch (e) {
        const n = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, n);
        next = Math.min(this.opts.maxBackoffMs ?? 300_000, 500 * 2 ** (n - 1));
        this.log.error({ pipeline: key, err: String(e), retryInMs: next }, 'reconcile failed');
      }
    })();
    this.idle = this.idle.then(() => work);
    await work;
    this.running.delete(key);
    if (this.dirty.delete(key)) this.enqueue(ns, name);
    else if (next !== undefined) this.enqueue(ns, name, next);
  }

  /** Stops watching and waits for reconciles under way. Idempotent. */
  async stop(): Promise<void> {
    if (this.state === 'STOPPED' || this.state === 'STOPPING') return;
    this.state = 'STOPPING';
    this.stopWatch?.();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await this.idle;
    this.state = 'STOPPED';
  }
}
