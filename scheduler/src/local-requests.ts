/**
 * The requests this scheduler accepted and that have not ended: their count (`maxInFlight`),
 * their `diffmesh.request` spans, and their timers (the timeout, or the deadline when it comes
 * first). A request ends here or on any scheduler sharing the store; its span ends when this
 * one hears of it.
 */
import { ATTR, DiffmeshError, parseCode, recordError, type Span } from '@diffmesh/core';
import type { RecentRequests } from './retention.js';
import type { RequestRecord, SchedulerStore } from './storage/types.js';
import type { TenantQuotas } from './tenant-quotas.js';

/** A request accepted here: its span and timer. */
interface Local {
  span: Span;
  timer?: NodeJS.Timeout;
}

/** A request being accepted: `forget` it when it is not stored after all, `arm` its timer once it is. */
export interface Accepting {
  /** Still known here (its end may have come already). */
  readonly live: boolean;
  forget(): void;
  arm(ms: number, onTimer: () => void): void;
}

export class LocalRequests {
  private readonly local = new Map<string, Local>();
  private inFlight = 0;

  constructor(
    private readonly store: SchedulerStore,
    private readonly quotas: TenantQuotas,
    private readonly recent: RecentRequests,
  ) {}

  /** Requests accepted here and not yet ended. */
  get count(): number {
    return this.inFlight;
  }

  ids(): string[] {
    return [...this.local.keys()];
  }

  /**
   * Counts a request being accepted before its record is stored, so that a burst of
   * submissions cannot pass the bound together, and its end is seen however soon it comes.
   */
  accepting(reqId: string, span: Span): Accepting {
    const local: Local = { span };
    this.local.set(reqId, local);
    this.inFlight += 1;
    const live = (): boolean => this.local.get(reqId) === local;
    return {
      get live() {
        return live();
      },
      forget: () => {
        if (!live()) return;
        this.local.delete(reqId);
        this.inFlight -= 1;
        this.quotas.withdraw(reqId);
      },
      arm: (ms, onTimer) => {
        if (!live()) return;
        local.timer = setTimeout(onTimer, ms);
        local.timer.unref();
      },
    };
  }

  /** A request accepted here has ended (here or elsewhere): its span and timer end. */
  ended(reqId: string, record: RequestRecord | undefined): void {
    const l = this.local.get(reqId);
    if (!l) return;
    this.local.delete(reqId);
    this.inFlight -= 1;
    this.quotas.ended(reqId);
    clearTimeout(l.timer);
    const close = (rec: RequestRecord | undefined): void => {
      const ctx = rec?.state.context;
      if (ctx?.error) recordError(l.span, new DiffmeshError(parseCode(ctx.error.code), 'INTERNAL', ctx.error.message));
      if (ctx) l.span.setAttributes({ [ATTR.requestStatus]: ctx.status, [ATTR.retryCount]: ctx.retryCount });
      if (rec) this.recent.update(rec);
      l.span.end();
    };
    if (record) close(record);
    else void this.store.read(reqId).then(close, () => close(undefined));
  }

  /** The scheduler stops: every span and timer ends. */
  stop(): void {
    for (const [reqId, l] of this.local) {
      clearTimeout(l.timer);
      l.span.end();
      this.local.delete(reqId);
    }
    this.inFlight = 0;
  }
}
