import type * as grpc from '@grpc/grpc-js';
import {
  loadDiffmeshProtos,
  type CancelRequest__Output,
  type CancelResponse,
  type GenerateRequest__Output,
  type GenerateResponse,
  type GetResultRequest__Output,
  type GetResultResponse,
  type GetStatusResponse,
  type SchedulerGetRequest__Output,
  type ListModelsResponse,
  type SchedulerGetResponse,
  type SessionRequest__Output,
  type SessionResponse,
  type SubmitRequest__Output,
  type SubmitResponse,
  type WatchRequest__Output,
  type WatchResponse,
} from '@diffmesh/protos';
import {
  callCredentials,
  Code,
  DiffmeshError,
  TenantDirectory,
  requestStatusToWire,
  toWire,
  traceContextFromMetadata,
  type ServiceBinding,
  type Tenant,
} from '@diffmesh/core';
import { type PlanRegistry } from './plans/registry.js';
import type { Scheduler } from './scheduler.js';
import { getResultHandler, type ResultServiceDeps } from './result-service.js';
import { getResponse, listModelsResponse, requireId, statusResponse, submit, type SchedulerIdentity } from './service-wire.js';
import { cancelQuietly, stream } from './event-streams.js';
import { session } from './session-stream.js';

export { eventToWire, getResponse, statusResponse } from './service-wire.js';
export type { SchedulerIdentity } from './service-wire.js';

/** How the scheduler's API streams events. */
export interface StreamOptions {
  /**
   * Least time between two messages of a Generate or Watch stream; the events of the
   * meantime go together in the next one, and the request's end is sent at once. Keeps a
   * client from waking for every event of a fast request. 0 = every turn of the event loop.
   */
  eventIntervalMs?: number;
  /** Where GetResult reads results from and how it encodes videos; absent = UNIMPLEMENTED. */
  results?: Omit<ResultServiceDeps, 'get'>;
  /**
   * Who may call: each call's bearer key or client certificate names its tenant, and every
   * read or action on a request is scoped to it (another tenant's request is NOT_FOUND).
   * Absent or without a tenants file: tenancy off, every caller is `default`.
   */
  tenants?: TenantDirectory;
}

/** Default of {@link StreamOptions.eventIntervalMs}. */
export const DEFAULT_EVENT_INTERVAL_MS = 20;

/** The SchedulerService binding, with the hook a draining server calls. */
export interface SchedulerServiceBinding extends ServiceBinding {
  /**
   * Makes every open Session end once its requests have ended, as if its client had closed
   * its side (new requests on it are refused by the draining scheduler anyway).
   */
  endSessions(): void;
  /**
   * Ends every open Generate, Watch and Session stream that is still following an unfinished
   * request, after the events already written, with `error` (a draining scheduler that has
   * handed its work back: the client follows the request on another scheduler).
   */
  endStreams(error: DiffmeshError): void;
  /** Open Session streams. */
  openSessions(): number;
}

/** `diffmesh.scheduler.v1.SchedulerService` over a Scheduler. */
export function schedulerServiceBinding(
  scheduler: Scheduler,
  registry: PlanRegistry,
  identity: SchedulerIdentity = { instanceId: '', version: '' },
  streams: StreamOptions = {},
): SchedulerServiceBinding {
  const interval = streams.eventIntervalMs ?? DEFAULT_EVENT_INTERVAL_MS;
  const tenants = streams.tenants ?? TenantDirectory.open();
  /** The caller's tenant (UNAUTHENTICATED when tenancy is on and its credentials name none). */
  const tenantOf = (call: CallWithCredentials): Tenant => tenants.resolve(callCredentials(call));
  /** Runs a streaming handler as the caller's tenant; a refusal ends the call. */
  const asTenant = (call: CallWithCredentials & { emit(event: 'error', err: unknown): boolean }, run: (tenant: Tenant) => void): void => {
    try {
      run(tenantOf(call));
    } catch (err) {
      call.emit('error', toWire(err));
    }
  };
  const proto = loadDiffmeshProtos();
  /** Open sessions, each by the function that half-closes it. */
  const sessions = new Set<() => void>();
  /** Open streams (Generate, Watch, Session), each by the function that ends it with an error. */
  const open = new Set<(error: DiffmeshError) => void>();
  return {
    endSessions() {
      for (const end of [...sessions]) end();
    },
    endStreams(error) {
      for (const end of [...open]) end(error);
    },
    openSessions: () => sessions.size,
    name: 'diffmesh.scheduler.v1.SchedulerService',
    definition: proto.diffmesh.scheduler.v1.SchedulerService.service,
    implementation: {
      Submit: unary<SubmitRequest__Output, SubmitResponse>(async (req, call) => {
        const tenant = tenantOf(call);
        const existing = req.requestId !== '' && (await hasRequest(scheduler, req.requestId, tenant));
        const state = await submit(scheduler, req, traceContextFromMetadata(call.metadata), tenant);
        return { reqId: state.context.reqId, status: requestStatusToWire(state.context.status), existing };
      }),
      Get: unary<SchedulerGetRequest__Output, SchedulerGetResponse>(async (req, call) =>
        getResponse(await scheduler.get(requireId(req.reqId), tenantOf(call))),
      ),
      Cancel: unary<CancelRequest__Output, CancelResponse>(async (req, call) => ({
        status: requestStatusToWire((await scheduler.cancel(requireId(req.reqId), tenantOf(call))).context.status),
      })),
      ListModels: unary<unknown, ListModelsResponse>((_req, call) => {
        tenantOf(call);
        return listModelsResponse(scheduler, registry);
      }),
      GetStatus: unary<unknown, GetStatusResponse>((_req, call) => statusResponse(scheduler, identity, tenantOf(call))),
      GetResult: (call: grpc.ServerWritableStream<GetResultRequest__Output, GetResultResponse>) =>
        asTenant(call, (tenant) => {
          if (!streams.results) throw new DiffmeshError(Code.UNIMPLEMENTED, 'INTERNAL', 'this scheduler serves no results');
          getResultHandler({ ...streams.results, get: (reqId) => scheduler.get(reqId, tenant) })(call);
        }),
      Generate: async (call: grpc.ServerWritableStream<GenerateRequest__Output, GenerateResponse>) => {
        let reqId: string;
        try {
          reqId = (await submit(scheduler, call.request, traceContextFromMetadata(call.metadata), tenantOf(call))).context.reqId;
        } catch (err) {
          call.emit('error', toWire(err));
          return;
        }
        // A client that goes away cancels its request (not a scheduler that is shutting down:
        // with a shared store the request goes on elsewhere).
        const cancel = (): void => cancelQuietly(scheduler, reqId);
        // A client that went away while its input image was being stored takes its request along.
        if (call.cancelled) {
          cancel();
          return;
        }
        // A client that goes away before the end cancels its request.
        stream(scheduler, reqId, 0, call, interval, open, undefined, cancel);
      },
      Session: (call: grpc.ServerDuplexStream<SessionRequest__Output, SessionResponse>) =>
        asTenant(call, (tenant) => session(scheduler, call, interval, sessions, open, tenant)),
      Watch: (call: grpc.ServerWritableStream<WatchRequest__Output, WatchResponse>) =>
        asTenant(call, (tenant) => stream(scheduler, call.request.reqId, call.request.afterSequence ?? 0, call, interval, open, tenant)),
    },
  };
}

async function hasRequest(scheduler: Scheduler, id: string, scope: Tenant): Promise<boolean> {
  try {
    await scheduler.get(id, scope);
    return true;
  } catch {
    return false;
  }
}

/** The parts of a call that carry the caller's credentials. */
type CallWithCredentials = Pick<grpc.ServerUnaryCall<unknown, unknown>, 'metadata' | 'getAuthContext'>;

function unary<Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Res | Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, cb) => {
    try {
      const res = fn(call.request, call);
      if (res instanceof Promise)
        res.then(
          (r) => cb(null, r),
          (err: unknown) => cb(toWire(err)),
        );
      else cb(null, res);
    } catch (err) {
      cb(toWire(err));
    }
  };
}
