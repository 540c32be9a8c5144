/**
 * The body of an ONNX runner thread: loads sessions and runs them, one message at a time.
 * onnxruntime-node's `session.run` blocks the thread it runs on for the whole model run, so
 * it runs here and never on a stage's main thread (which answers gRPC, health, NATS and
 * cancellation).
 *
 * The loop starts when this module is evaluated in a worker thread whose `workerData` carries
 * {@link RUNNER_WORKER_MARK}: the runner starts the worker on this very file (or, in a
 * single-file bundle, on the bundle, which contains it).
 */
import { isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { RUNNER_WORKER_MARK, type RunnerRequest, type RunnerResponse } from './onnx-runner-protocol.js';
import { SessionTable } from './session-table.js';

/** The URL of the module a runner thread starts from: this file's (compiled) JavaScript. */
export const RUNNER_WORKER_URL: string = import.meta.url;

if (!isMainThread && parentPort && isRunnerData(workerData)) {
  serve(parentPort, new Int32Array((workerData as { inNative: SharedArrayBuffer }).inNative));
}

function isRunnerData(data: unknown): boolean {
  return typeof data === 'object' && data !== null && (data as Record<string, unknown>)[RUNNER_WORKER_MARK] === true;
}

/**
 * @param inNative set to 1 while a request (a native load or run) is handled, so the main
 * thread never stops this thread in the middle of one (onnxruntime-node would abort the process).
 */
function serve(port: MessagePort, inNative: Int32Array): void {
  const table = new SessionTable();
  // Messages are handled strictly one after another: a run blocks this thread anyway, and a
  // release must not overtake the run before it.
  let chain: Promise<void> = Promise.resolve();
  port.on('message', (req: RunnerRequest) => {
    chain = chain.then(() => handle(req));
  });

  async function handle(req: RunnerRequest): Promise<void> {
    Atomics.store(inNative, 0, 1);
    try {
      switch (req.op) {
        case 'load':
          reply({ id: req.id, ok: true, result: await table.load(req.source, req.provider, req.options) });
          return;
        case 'run': {
          const { outputs, transfer } = await table.run(req.session, req.feeds);
          reply({ id: req.id, ok: true, result: outputs }, transfer);
          return;
        }
        case 'release':
          await table.release(req.session);
          reply({ id: req.id, ok: true, result: null });
          return;
      }
    } catch (err) {
      const e = err as Error | undefined;
      reply({ id: req.id, ok: false, error: { message: e?.message ?? String(err), name: e?.name ?? 'Error' } });
    } finally {
      Atomics.store(inNative, 0, 0);
      Atomics.notify(inNative, 0);
    }
  }

  function reply(msg: RunnerResponse, transfer: ArrayBuffer[] = []): void {
    port.postMessage(msg, transfer);
  }
}
