import ort from 'onnxruntime-node';
import type { LoadResult, ProviderChoice, WireSessionOptions, WireTensor, WireValueMetadata } from './onnx-runner-protocol.js';

/**
 * The onnxruntime sessions of one thread, by handle: what a runner thread keeps, and what the
 * main thread keeps when models run on it (`runnerThreads: 0`).
 */
export class SessionTable {
  private readonly sessions = new Map<number, ort.InferenceSession>();
  private next = 1;

  /** Creates a session from a file path (external weights beside it) or the model's bytes, on one provider. */
  async load(source: string | Uint8Array, provider: ProviderChoice, options: WireSessionOptions): Promise<LoadResult> {
    const ep: ort.InferenceSession.ExecutionProviderConfig = provider.options
      ? { ...provider.options, name: provider.name }
      : provider.name;
    const opts: ort.InferenceSession.SessionOptions = { graphOptimizationLevel: 'all', ...options, executionProviders: [ep] };
    const session =
      typeof source === 'string' ? await ort.InferenceSession.create(source, opts) : await ort.InferenceSession.create(source, opts);
    const id = this.next++;
    this.sessions.set(id, session);
    return { session: id, inputMetadata: session.inputMetadata.map(metadata), outputMetadata: session.outputMetadata.map(metadata) };
  }

  /**
   * Runs a session. Returns the outputs and the buffers they own outright, which can be
   * transferred to another thread instead of copied.
   */
  async run(id: number, feeds: Record<string, WireTensor>): Promise<{ outputs: Record<string, WireTensor>; transfer: ArrayBuffer[] }> {
    const session = this.sessions.get(id);
    if (!session) throw new Error(`session ${id} is not loaded in this runner`);
    const input: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(feeds)) input[name] = new ort.Tensor(t.type as 'float32', t.data as Float32Array, t.dims);
    const out = await session.run(input);
    const outputs: Record<string, WireTensor> = {};
    const transfer: ArrayBuffer[] = [];
    for (const [name, t] of Object.entries(out)) {
      // A GPU-resident output (`preferredOutputLocation: 'gpu-buffer'`) must never be read here:
      // onnxruntime-node cannot download one, and its attempt throws a C++ exception nothing
      // catches, which aborts the whole process. diffmesh asks for CPU outputs; refuse anything else.
      if (t.location !== 'cpu' && t.location !== 'cpu-pinned') {
        throw new Error(`output "${name}" is on the device (${t.location}); onnxruntime-node cannot copy it to the CPU`);
      }
      const data = t.data as ArrayBufferView;
      outputs[name] = { type: t.type, dims: [...t.dims], data };
      if (
        data.buffer instanceof ArrayBuffer &&
        data.byteOffset === 0 &&
        data.byteLength === data.buffer.byteLength &&
        !transfer.includes(data.buffer)
      ) {
        transfer.push(data.buffer);
      }
    }
    return { outputs, transfer };
  }

  async release(id: number): Promise<void> {
    const session = this.sessions.get(id);
    this.sessions.delete(id);
    await session?.release();
  }

  /** Releases every session. */
  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map((s) => s.release().catch(() => undefined)));
  }
}

function metadata(m: ort.InferenceSession.ValueMetadata): WireValueMetadata {
  return m.isTensor ? { name: m.name, isTensor: true, type: m.type, shape: [...m.shape] } : { name: m.name, isTensor: false };
}

/**
 * onnxruntime's messages carry a source path, the failed C++ condition and a long tail; what
 * failed is the first line, after the condition (`… == Success was false. Failed to get a
 * WebGPU adapter: No supported adapters`).
 */
export function firstLine(message: string): string {
  const line = message.split('\n')[0].trim();
  const cut = line.lastIndexOf(' was false. ');
  return cut >= 0 ? line.slice(cut + ' was false. '.length) : line.replace(/^\/onnxruntime_src\/\S+ /, '');
}
