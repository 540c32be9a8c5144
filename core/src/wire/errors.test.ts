import * as grpc from '@grpc/grpc-js';
import {
  loadDiffmeshProtos,
  messageCodec,
  type ErrorDetail,
  type ErrorDetail__Output,
  type ErrorInfo__Output,
  type RpcStatus__Output,
  type SchedulerGetRequest__Output,
  type SchedulerGetResponse,
  type SchedulerServiceClient,
  type WatchRequest__Output,
  type WatchResponse,
} from '@diffmesh/protos';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Code, DiffmeshError, invalidParameter, unknownModel } from '../errors/index.js';
import {
  ERROR_DOMAIN,
  ERROR_HEADERS,
  STATUS_DETAILS_KEY,
  TRANSPORT_REASON,
  errorDetailFromWire,
  errorDetailToWire,
  fromHeaders,
  fromWire,
  toHeaders,
  toWire,
} from './errors.js';

/** What the test service's handlers throw, keyed by req_id. */
const FAILURES: Record<string, () => unknown> = {
  invalid: () => invalidParameter('width', 'must be a multiple of 16'),
  busy: () => new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'QUEUE_FULL', 'queue for pool wan-dit is full', { retryAfterMs: 1500 }),
  boom: () => new Error('ECONNREFUSED 10.1.2.3:6379 (password=hunter2)'),
  model: () => unknownModel('sdxl', ['wan2.1-t2v-1.3b']),
};

function fail(reqId: string): unknown {
  const make = FAILURES[reqId];
  return make ? make() : new Error(`no failure named ${reqId}`);
}

describe('gRPC round trip through a real server', () => {
  let server: grpc.Server;
  let client: SchedulerServiceClient;
  let port: number;

  beforeAll(async () => {
    const { SchedulerService } = loadDiffmeshProtos().diffmesh.scheduler.v1;
    server = new grpc.Server();
    server.addService(SchedulerService.service, {
      Get: (
        call: grpc.ServerUnaryCall<SchedulerGetRequest__Output, SchedulerGetResponse>,
        callback: grpc.sendUnaryData<SchedulerGetResponse>,
      ) => {
        // The pattern every service uses: run the handler, send failures through toWire.
        Promise.resolve()
          .then(() => {
            throw fail(call.request.reqId);
          })
          .catch((err: unknown) => callback(toWire(err)));
      },
      Watch: (call: grpc.ServerWritableStream<WatchRequest__Output, WatchResponse>) => {
        call.write({ events: [{ reqId: call.request.reqId, sequence: 1, queued: { pool: 'p', position: 0 } }] });
        call.emit('error', toWire(fail(call.request.reqId)));
      },
    });
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('localhost:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    client = new SchedulerService(`localhost:${port}`, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await new Promise<void>((resolve) => (server ? server.tryShutdown(() => resolve()) : resolve()));
  });

  function callGet(reqId: string): Promise<grpc.ServiceError> {
    return new Promise((resolve, reject) => {
      client.Get({ reqId }, { deadline: Date.now() + 10_000 }, (err) => (err ? resolve(err) : reject(new Error('expected an error'))));
    });
  }

  it('recovers code, reason and field of an invalid parameter', async () => {
    const serviceError = await callGet('invalid');
    expect(serviceError.code).toBe(grpc.status.INVALID_ARGUMENT);
    const err = fromWire(serviceError);
    expect(err).toBeInstanceOf(DiffmeshError);
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.reason).toBe('INVALID_PARAMETER');
    expect(err.field).toBe('width');
    expect(err.message).toBe('width: must be a multiple of 16');
    expect(err.retryAfterMs).toBeUndefined();
  });

  it('sends a google.rpc.Status any client can read', async () => {
    const serviceError = await callGet('model');
    const raw = serviceError.metadata.get(STATUS_DETAILS_KEY)[0] as Buffer;
    const st = messageCodec<object, RpcStatus__Output>('google.rpc.Status').decode(raw);
    expect(st.code).toBe(grpc.status.NOT_FOUND);
    expect(st.message).toContain('sdxl');
    const info = st.details.find((d) => d.type_url === 'type.googleapis.com/google.rpc.ErrorInfo');
    expect(info).toBeDefined();
    const decoded = messageCodec<object, ErrorInfo__Output>('google.rpc.ErrorInfo').decode(info!.value);
    expect(decoded).toMatchObject({ reason: 'UNKNOWN_MODEL', domain: ERROR_DOMAIN, metadata: { field: 'model', model: 'sdxl' } });
  });

  it('recovers RESOURCE_EXHAUSTED with its retry delay', async () => {
    const err = fromWire(await callGet('busy'));
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.reason).toBe('QUEUE_FULL');
    expect(err.retryAfterMs).toBe(1500);
  });

  it('turns an unknown error into INTERNAL "internal error", leaking nothing', async () => {
    const serviceError = await callGet('boom');
    expect(serviceError.code).toBe(grpc.status.INTERNAL);
    expect(serviceError.details).toBe('internal error');
    const everything = JSON.stringify({
      details: serviceError.details,
      message: serviceError.message,
      trailers: serviceError.metadata.toJSON(),
      status: serviceError.metadata.get(STATUS_DETAILS_KEY).map((b) => Buffer.from(b as Buffer).toString('latin1')),
    });
    expect(everything).not.toContain('hunter2');
    expect(everything).not.toContain('ECONNREFUSED');
    expect(everything).not.toContain('errors.test');
    const err = fromWire(serviceError);
    expect(err).toMatchObject({ code: Code.INTERNAL, reason: 'INTERNAL', message: 'internal error' });
  });

  it('works the same on a server stream', async () => {
    const events: unknown[] = [];
    const serviceError = await new Promise<grpc.ServiceError>((resolve, reject) => {
      const stream = client.Watch({ reqId: 'busy' });
      stream.on('data', (d) => events.push(d));
      stream.on('error', resolve);
      stream.on('end', () => reject(new Error('expected an error')));
    });
    expect(events).toHaveLength(1);
    const err = fromWire(serviceError);
    expect(err).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'QUEUE_FULL', retryAfterMs: 1500 });
  });

  it('keeps the code of a bare gRPC error and calls it a transport error', async () => {
    // A method the server does not implement: grpc-js answers UNIMPLEMENTED, no details.
    const serviceError = await new Promise<grpc.ServiceError>((resolve, reject) => {
      client.ListModels({}, (err) => (err ? resolve(err) : reject(new Error('expected an error'))));
    });
    const err = fromWire(serviceError);
    expect(err.code).toBe(Code.UNIMPLEMENTED);
    expect(err.reason).toBe(TRANSPORT_REASON);
    expect(err.reason).toBe('TRANSPORT');
  });

  it('maps a refused connection to UNAVAILABLE / TRANSPORT, not to a pool error', async () => {
    // Bind and release a port so nothing listens on it.
    const probe = new grpc.Server();
    const freePort = await new Promise<number>((resolve, reject) =>
      probe.bindAsync('localhost:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    probe.forceShutdown();
    const { SchedulerService } = loadDiffmeshProtos().diffmesh.scheduler.v1;
    const dead = new SchedulerService(`localhost:${freePort}`, grpc.credentials.createInsecure());
    try {
      const serviceError = await new Promise<grpc.ServiceError>((resolve, reject) => {
        dead.Get({ reqId: 'x' }, { deadline: Date.now() + 5_000 }, (err) => (err ? resolve(err) : reject(new Error('expected an error'))));
      });
      const err = fromWire(serviceError);
      expect(err.code).toBe(Code.UNAVAILABLE);
      expect(err.reason).toBe('TRANSPORT');
    } finally {
      dead.close();
    }
  });
});

describe('toWire / fromWire without a server', () => {
  it('passes a received diffmesh error through unchanged', () => {
    const received = fromWire({ ...toWire(invalidParameter('height', 'too large')) });
    const again = fromWire(toWire(received));
    expect(again).toMatchObject({ code: Code.INVALID_ARGUMENT, reason: 'INVALID_PARAMETER', field: 'height' });
  });

  it('treats a bare gRPC error as unknown when sending it on', () => {
    const bare = { code: grpc.status.UNAVAILABLE, details: 'connect ECONNREFUSED 10.0.0.9:7070', metadata: new grpc.Metadata() };
    const out = toWire(bare);
    expect(out).toMatchObject({ code: grpc.status.INTERNAL, details: 'internal error' });
  });

  it('maps an AbortError to CANCELLED', () => {
    const abort = new DOMException('The operation was aborted', 'AbortError');
    expect(fromWire(toWire(abort))).toMatchObject({ code: Code.CANCELLED, reason: 'CANCELLED' });
  });

  it('carries no stack', () => {
    expect('stack' in toWire(new Error('x'))).toBe(false);
  });

  it('ignores a corrupt status trailer but keeps the code', () => {
    const metadata = new grpc.Metadata();
    metadata.set(STATUS_DETAILS_KEY, Buffer.from([0xff, 0xff, 0xff]));
    const err = fromWire({ code: grpc.status.DEADLINE_EXCEEDED, details: 'deadline', metadata });
    expect(err).toMatchObject({ code: Code.DEADLINE_EXCEEDED, reason: 'TIMEOUT', message: 'deadline' });
  });
});

describe('NATS headers', () => {
  it('round-trip code, reason, message, field and metadata', () => {
    const headers = toHeaders(unknownModel('sdxl', ['a', 'b']));
    expect(headers[ERROR_HEADERS.code]).toBe('NOT_FOUND');
    expect(headers[ERROR_HEADERS.reason]).toBe('UNKNOWN_MODEL');
    expect(headers[ERROR_HEADERS.field]).toBe('model');
    const err = fromHeaders(headers);
    expect(err).toBeInstanceOf(DiffmeshError);
    expect(err).toMatchObject({
      code: Code.NOT_FOUND,
      reason: 'UNKNOWN_MODEL',
      message: 'model: unknown model "sdxl" (known: a, b)',
      metadata: { field: 'model', model: 'sdxl' },
    });
  });

  it('round-trip the retry delay, and read through a get() accessor in any case', () => {
    const headers = toHeaders(new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'QUEUE_FULL', 'full\r\nretry later', { retryAfterMs: 1500 }));
    expect(headers[ERROR_HEADERS.retryAfterMs]).toBe('1500');
    expect(headers[ERROR_HEADERS.message]).toBe('full retry later');
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    const accessor = { get: (name: string) => lower[name.toLowerCase()] ?? '' };
    expect(fromHeaders(accessor)).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'QUEUE_FULL', retryAfterMs: 1500 });
  });

  it('say nothing for a message without error headers, INTERNAL for unknown errors', () => {
    expect(fromHeaders({ 'Content-Type': 'application/json' })).toBeUndefined();
    expect(toHeaders(new TypeError('secret'))).toStrictEqual({
      [ERROR_HEADERS.code]: 'INTERNAL',
      [ERROR_HEADERS.reason]: 'INTERNAL',
      [ERROR_HEADERS.message]: 'internal error',
    });
  });
});

describe('ErrorDetail', () => {
  it('round-trips a DiffmeshError through protobuf bytes', () => {
    const codec = messageCodec<ErrorDetail, ErrorDetail__Output>('diffmesh.common.v1.ErrorDetail');
    const original = new DiffmeshError(Code.UNAVAILABLE, 'BREAKER_OPEN', 'instance dit-2 is failing', {
      metadata: { instance: 'dit-2', field: 'model' },
      retryAfterMs: 2500,
    });
    const decoded = codec.decode(codec.encode(errorDetailToWire(original)));
    expect(decoded).toMatchObject({ code: 'UNAVAILABLE', reason: 'ERROR_REASON_BREAKER_OPEN', field: 'model' });
    const back = errorDetailFromWire(decoded);
    expect(back).toMatchObject({
      code: Code.UNAVAILABLE,
      reason: 'BREAKER_OPEN',
      message: 'instance dit-2 is failing',
      metadata: { instance: 'dit-2', field: 'model' },
      retryAfterMs: 2500,
    });
  });
});
