/**
 * A typed client of `diffmesh.scheduler.v1.SchedulerService` over the scheduler pool (with
 * its failover and request affinity), for the endpoints the gateway implements itself.
 */
import {
  SERVICE_NAMES,
  messageCodec,
  type CancelRequest,
  type CancelResponse__Output,
  type GenerateRequest,
  type GenerateResponse__Output,
  type ListModelsResponse__Output,
  type RequestEvent__Output,
  type SchedulerGetRequest,
  type SchedulerGetResponse__Output,
  type SubmitRequest,
  type SubmitResponse__Output,
  type WatchRequest,
} from '@diffmesh/protos';
import { Code, DiffmeshError, SchedulerSession, injectTraceContext } from '@diffmesh/runtime';
import type { UpstreamPool } from './upstream.js';

const pkg = 'diffmesh.scheduler.v1';
const path = (method: string): string => `/${SERVICE_NAMES.scheduler}/${method}`;

const codecs = {
  generateRes: () => messageCodec<object, GenerateResponse__Output>(`${pkg}.GenerateResponse`),
  submitReq: () => messageCodec<SubmitRequest>(`${pkg}.SubmitRequest`),
  submitRes: () => messageCodec<object, SubmitResponse__Output>(`${pkg}.SubmitResponse`),
  getReq: () => messageCodec<SchedulerGetRequest>(`${pkg}.GetRequest`),
  getRes: () => messageCodec<object, SchedulerGetResponse__Output>(`${pkg}.GetResponse`),
  cancelReq: () => messageCodec<CancelRequest>(`${pkg}.CancelRequest`),
  cancelRes: () => messageCodec<object, CancelResponse__Output>(`${pkg}.CancelResponse`),
  watchReq: () => messageCodec<WatchRequest>(`${pkg}.WatchRequest`),
  listModelsReq: () => messageCodec<object>(`${pkg}.ListModelsRequest`),
  listModelsRes: () => messageCodec<object, ListModelsResponse__Output>(`${pkg}.ListModelsResponse`),
};

const buf = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** The scheduler calls the OpenAI-compatible endpoints make. */
export class SchedulerApi {
  /** One Session stream per scheduler address, carrying every generation sent there. */
  private readonly sessions = new Map<string, SchedulerSession>();

  constructor(private readonly pool: UpstreamPool) {}

  private session(address: string): SchedulerSession {
    let s = this.sessions.get(address);
    if (!s) {
      s = new SchedulerSession(this.pool.client(address));
      this.sessions.set(address, s);
    }
    return s;
  }

  /** Closes the sessions: each ends once the requests on it have ended. */
  async close(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(sessions.map((s) => s.close()));
  }

  async listModels(signal?: AbortSignal): Promise<ListModelsResponse__Output> {
    const res = await this.pool.unary(path('ListModels'), buf(codecs.listModelsReq().encode({})), signal ? { signal } : {});
    return codecs.listModelsRes().decode(res);
  }

  /**
   * Runs a generation and yields its events; the request lives on the scheduler that took
   * it. It goes as a message on that scheduler's Session stream (no call of its own), with
   * the active trace context; a scheduler that is unreachable or draining before it accepts
   * the request hands it to the next one.
   */
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<RequestEvent__Output> {
    this.pool.checkOpen();
    const order = this.pool.candidates(req.requestId || undefined);
    if (order.length === 0) throw this.pool.noInstance();
    let lastErr: unknown;
    for (const [i, address] of order.entries()) {
      if (signal?.aborted) throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'client went away');
      let accepted = false;
      try {
        for await (const event of this.session(address).events(req, { ...(signal ? { signal } : {}), traceContext: injectTraceContext() })) {
          if (!accepted) {
            accepted = true;
            this.pool.remember(event.reqId, address);
          }
          yield event;
        }
        return;
      } catch (err) {
        lastErr = err;
        if (accepted || !this.pool.shouldMoveOn(address, err, {}, i === order.length - 1)) throw err;
      }
    }
    throw lastErr;
  }

  async submit(req: SubmitRequest, signal?: AbortSignal): Promise<SubmitResponse__Output> {
    let served = '';
    const res = await this.pool.unary(path('Submit'), buf(codecs.submitReq().encode(req)), {
      ...(signal ? { signal } : {}),
      ...(req.requestId ? { affinityKey: req.requestId } : {}),
      onServed: (a) => (served = a),
    });
    const out = codecs.submitRes().decode(res);
    if (served) this.pool.remember(out.reqId, served);
    return out;
  }

  async get(reqId: string, signal?: AbortSignal): Promise<SchedulerGetResponse__Output> {
    const res = await this.pool.unary(path('Get'), buf(codecs.getReq().encode({ reqId })), { affinityKey: reqId, ...(signal ? { signal } : {}) });
    return codecs.getRes().decode(res);
  }

  async cancel(reqId: string, reason: string): Promise<CancelResponse__Output> {
    const res = await this.pool.unary(path('Cancel'), buf(codecs.cancelReq().encode({ reqId, reason })), { affinityKey: reqId });
    return codecs.cancelRes().decode(res);
  }

  /** Follows an existing request's events until it ends. */
  async *watch(reqId: string, signal?: AbortSignal): AsyncGenerator<RequestEvent__Output> {
    const stream = this.pool.stream(path('Watch'), buf(codecs.watchReq().encode({ reqId })), {
      affinityKey: reqId,
      ...(signal ? { signal } : {}),
    });
    for await (const bytes of stream) {
      yield* codecs.generateRes().decode(bytes).events; // WatchResponse has the same shape
    }
  }
}
