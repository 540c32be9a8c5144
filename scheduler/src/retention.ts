import { isTerminalStatus, type RequestRecord } from './storage/types.js';
import type { RequestState } from './types.js';

/** Characters of each prompt a request keeps in the recent list after its retention. */
const RECENT_PROMPT_CHARS = 200;

interface Entry {
  reqId: string;
  state: RequestState;
  /** When the request's record may be forgotten (0 while it runs). */
  expiresAt: number;
  slim: boolean;
}

/**
 * The latest requests this scheduler accepted, newest first, for status reports. A request
 * stays here after its retention ends, until newer ones push it out, as a summary: without
 * its objects' refs (inline ones carry bytes) and with its prompts cut to what status reports
 * show. (How long the store keeps a finished request's record is the store's business: see
 * `StoreOptions.retentionMs`.)
 */
export class RecentRequests {
  private readonly list: Entry[] = [];
  private readonly byId = new Map<string, Entry>();

  constructor(
    private readonly max: number,
    private readonly now: () => number = Date.now,
  ) {}

  add(record: RequestRecord): void {
    if (this.max <= 0) return;
    const e: Entry = { reqId: record.state.context.reqId, state: record.state, expiresAt: record.expiresAt, slim: false };
    this.list.unshift(e);
    this.byId.set(e.reqId, e);
    if (this.list.length > this.max) {
      const gone = this.list.pop() as Entry;
      if (this.byId.get(gone.reqId) === gone) this.byId.delete(gone.reqId);
    }
  }

  /** Takes a newer record of a listed request. */
  update(record: RequestRecord): void {
    const e = this.byId.get(record.state.context.reqId);
    if (!e || e.slim) return;
    e.state = record.state;
    e.expiresAt = record.expiresAt;
  }

  /** Ids of listed requests that have not ended (their states may need a refresh). */
  running(): string[] {
    return this.list.filter((e) => !isTerminalStatus(e.state.context.status)).map((e) => e.reqId);
  }

  has(reqId: string): boolean {
    return this.byId.has(reqId);
  }

  /** The states, newest first; those past their retention as summaries. */
  states(): RequestState[] {
    const now = this.now();
    for (const e of this.list) {
      if (!e.slim && e.expiresAt > 0 && e.expiresAt <= now) {
        e.state = slimmed(e.state);
        e.slim = true;
      }
    }
    return this.list.map((e) => e.state);
  }
}

/** A finished request's state as the recent list keeps it once it is past its retention. */
function slimmed(state: RequestState): RequestState {
  const cut = (s: string): string => [...s].slice(0, RECENT_PROMPT_CHARS).join('');
  const ctx = state.context;
  return {
    ...state,
    context: {
      ...ctx,
      params: { ...ctx.params, prompt: cut(ctx.params.prompt), negativePrompt: cut(ctx.params.negativePrompt) },
      refs: {},
      traceContext: {},
    },
    timings: state.timings.map((t) => ({ ...t })),
    result: {},
  };
}
