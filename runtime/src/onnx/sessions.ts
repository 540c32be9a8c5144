import ort from 'onnxruntime-node';

/** Threading for onnxruntime sessions. */
export interface OrtOptions {
  /** Threads used inside one operator; 0 = onnxruntime's default. */
  intraOpThreads: number;
  /** Threads running independent operators; 0 = default. */
  interOpThreads: number;
}

/**
 * Loads each ONNX file once per process and shares the session; creating a session costs
 * tens to hundreds of milliseconds, so stage handlers never do it per request.
 */
export class SessionCache {
  private readonly sessions = new Map<string, Promise<ort.InferenceSession>>();

  constructor(private readonly opts: OrtOptions = { intraOpThreads: 0, interOpThreads: 0 }) {}

  get(file: string): Promise<ort.InferenceSession> {
    let s = this.sessions.get(file);
    if (!s) {
      const options: ort.InferenceSession.SessionOptions = { graphOptimizationLevel: 'all' };
      if (this.opts.intraOpThreads > 0) options.intraOpNumThreads = this.opts.intraOpThreads;
      if (this.opts.interOpThreads > 0) options.interOpNumThreads = this.opts.interOpThreads;
      s = ort.InferenceSession.create(file, options);
      // A failed load is not cached, so a fixed file can be retried.
      s.catch(() => this.sessions.delete(file));
      this.sessions.set(file, s);
    }
    return s;
  }

  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map(async (p) => (await p.catch(() => undefined))?.release()));
  }
}

export { ort };
