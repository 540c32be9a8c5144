import type { LoadResult, ProviderChoice, WireSessionOptions, WireTensor } from './onnx-runner-protocol.js';
import { SessionTable } from './session-table.js';

/**
 * Where sessions live and run: a runner thread ({@link OnnxRunner}), or the calling thread
 * ({@link InlineHost}).
 */
export interface SessionHost {
  readonly name: string;
  /** Runs queued or in progress (a session loaded on several hosts runs on the least busy). */
  readonly pendingRuns: number;
  /** False once the host is gone (its thread died or was closed): its sessions with it. */
  readonly usable: boolean;
  loadSession(source: string | Uint8Array, provider: ProviderChoice, options: WireSessionOptions): Promise<LoadResult>;
  run(
    session: number,
    feeds: Record<string, WireTensor>,
    opts?: { signal?: AbortSignal; transfer?: ArrayBuffer[] },
  ): Promise<Record<string, WireTensor>>;
  release(session: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Sessions on the calling thread (`runnerThreads: 0`): every run blocks that thread for its
 * whole length, as onnxruntime-node does. Kept to measure what runner threads change.
 */
export class InlineHost implements SessionHost {
  readonly usable = true;
  private readonly table = new SessionTable();
  private running = 0;

  constructor(readonly name: string) {}

  get pendingRuns(): number {
    return this.running;
  }

  loadSession(source: string | Uint8Array, provider: ProviderChoice, options: WireSessionOptions): Promise<LoadResult> {
    return this.table.load(source, provider, options);
  }

  async run(session: number, feeds: Record<string, WireTensor>, opts: { signal?: AbortSignal } = {}): Promise<Record<string, WireTensor>> {
    opts.signal?.throwIfAborted();
    this.running += 1;
    try {
      return (await this.table.run(session, feeds)).outputs;
    } finally {
      this.running -= 1;
    }
  }

  release(session: number): Promise<void> {
    return this.table.release(session);
  }

  close(): Promise<void> {
    return this.table.close();
  }
}
