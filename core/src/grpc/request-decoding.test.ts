import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, messageCodec } from '@diffmesh/protos';
import { silentLogger } from '../logging/index.js';
import { fromWire } from '../wire/errors.js';
import type { DiffmeshError } from '../errors/index.js';
import { GrpcServer } from './server.js';
import { checkWire, MAX_REPEATED_ELEMENTS, MAX_WIRE_DEPTH } from './wire-check.js';
import { defaultDescriptorRegistry } from './reflection.js';

// Servers built by GrpcServer answer malformed request messages with INVALID_ARGUMENT naming
// the message type and the field, on every kind of method, and keep serving.

const protos = loadDiffmeshProtos();
const identity = (b: Buffer) => b;
let server: GrpcServer;
let client: grpc.Client;
/** Messages each handler got, by method. */
const received: Record<string, unknown[]> = { Submit: [], Generate: [], Put: [], Work: [] };

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}
const tag = (field: number, wt: number) => varint(field * 8 + wt);
const len = (field: number, body: number[]) => [...tag(field, 2), ...varint(body.length), ...body];

beforeAll(async () => {
  const unimplemented = { code: grpc.status.UNIMPLEMENTED, details: 'test' };
  server = await GrpcServer.start({
    address: '127.0.0.1:0',
    log: silentLogger(),
    services: [
      {
        name: 'diffmesh.scheduler.v1.SchedulerService',
        definition: protos.diffmesh.scheduler.v1.SchedulerService.service,
        implementation: {
          Submit: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
            received.Submit.push(call.request);
            cb(null, { reqId: 'r1' });
          },
          Generate: (call: grpc.ServerWritableStream<unknown, unknown>) => {
            received.Generate.push(call.request);
            call.end();
          },
          Get: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(unimplemented),
        },
      },
      {
        name: 'diffmesh.tensor.v1.TensorService',
        definition: protos.diffmesh.tensor.v1.TensorService.service,
        implementation: {
          Put: (call: grpc.ServerReadableStream<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
            call.on('data', (m) => received.Put.push(m));
            call.on('end', () => cb(null, {}));
            call.on('error', () => undefined);
          },
        },
      },
      {
        name: 'diffmesh.stage.v1.StageService',
        definition: protos.diffmesh.stage.v1.StageService.service,
        implementation: {
          Work: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
            call.on('data', (m) => received.Work.push(m));
            call.on('end', () => call.end());
            call.on('error', () => undefined);
          },
        },
      },
    ],
  });
  client = new grpc.Client(server.address, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  server?.forceStop();
});

function unary(path: string, bytes: Buffer): Promise<DiffmeshError | Buffer> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, identity, identity, bytes, (err, res) => resolve(err ? fromWire(err) : res!));
  });
}

function streamEnd(call: grpc.ClientReadableStream<Buffer> | grpc.ClientDuplexStream<Buffer, Buffer>): Promise<DiffmeshError | 'ok'> {
  return new Promise((resolve) => {
    call.on('data', () => undefined);
    call.on('error', (err) => resolve(fromWire(err)));
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code === grpc.status.OK) resolve('ok');
    });
  });
}

function expectInvalid(res: DiffmeshError | Buffer | 'ok', type: string, field?: string): DiffmeshError {
  expect(res).not.toBeInstanceOf(Buffer);
  expect(res).not.toBe('ok');
  const err = res as DiffmeshError;
  expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
  expect(err.reason).toBe('INVALID_PARAMETER');
  expect(err.message).toContain(`request message ${type}`);
  expect(err.metadata.message_type).toBe(type);
  if (field) {
    expect(err.field).toBe(field);
    expect(err.message).toContain(field);
  }
  return err;
}

describe('malformed request messages', () => {
  it('unary: a wrong wire type answers INVALID_ARGUMENT naming the field, and the handler never runs', async () => {
    const before = received.Submit.length;
    // GenerateRequest.params (2) is a message: sent as a varint.
    const err = expectInvalid(
      await unary('/diffmesh.scheduler.v1.SchedulerService/Submit', Buffer.from([...tag(2, 0), 1])),
      'diffmesh.scheduler.v1.SubmitRequest',
    );
    expect(err.message).toMatch(/field 2 \(params\): invalid wire type 0 \(varint\), expected 2 \(length-delimited\)/);
    expect(err.field).toBe('params');
    expect(received.Submit.length).toBe(before);
    // The server still answers well-formed calls.
    const ok = messageCodec('diffmesh.scheduler.v1.SubmitRequest').encode({ model: 'm' });
    expect(await unary('/diffmesh.scheduler.v1.SchedulerService/Submit', Buffer.from(ok))).toBeInstanceOf(Buffer);
  });

  it('names nested fields and lengths past the end', async () => {
    // params (2) → prompt (1) declares 50 bytes and has 2.
    const bytes = Buffer.from(len(2, [...tag(1, 2), 50, 0x61, 0x62]));
    const err = expectInvalid(
      await unary('/diffmesh.scheduler.v1.SchedulerService/Submit', bytes),
      'diffmesh.scheduler.v1.SubmitRequest',
      'params.prompt',
    );
    expect(err.message).toContain('field 2.1 (params.prompt): length past the end of the message');
  });

  it('refuses invalid UTF-8 in a string field instead of decoding it lossily', async () => {
    const err = expectInvalid(
      await unary('/diffmesh.scheduler.v1.SchedulerService/Submit', Buffer.from(len(1, [0x61, 0xff, 0xfe]))),
      'diffmesh.scheduler.v1.SubmitRequest',
      'model',
    );
    expect(err.message).toContain('invalid UTF-8');
  });

  it('server streaming: garbage answers INVALID_ARGUMENT', async () => {
    const call = client.makeServerStreamRequest(
      '/diffmesh.scheduler.v1.SchedulerService/Generate',
      identity,
      identity,
      Buffer.from([0xff, 0xff, 0xff]),
    );
    expectInvalid(await streamEnd(call), 'diffmesh.scheduler.v1.GenerateRequest');
    expect(received.Generate).toEqual([]);
  });

  it('client streaming: a malformed message after good ones ends the call with INVALID_ARGUMENT', async () => {
    const done = new Promise<DiffmeshError | Buffer>((resolve) => {
      const call = client.makeClientStreamRequest('/diffmesh.tensor.v1.TensorService/Put', identity, identity, (err, res) =>
        resolve(err ? fromWire(err) : res!),
      );
      call.write(Buffer.from(messageCodec('diffmesh.tensor.v1.PutRequest').encode({ header: { name: 'x', sizeBytes: '1' } })));
      // chunk (2) → data (2) as a 32-bit value.
      call.write(Buffer.from(len(2, [...tag(2, 5), 1, 2, 3, 4])));
      call.end();
    });
    expectInvalid(await done, 'diffmesh.tensor.v1.PutRequest', 'chunk.data');
    expect(received.Put).toHaveLength(1);
  });

  it('bidi: deep nesting answers INVALID_ARGUMENT instead of overflowing the stack', async () => {
    // An unknown group field nested far beyond the limit.
    const depth = MAX_WIRE_DEPTH * 50;
    const bytes = Buffer.from([
      ...Array.from({ length: depth }, () => tag(9, 3)).flat(),
      ...Array.from({ length: depth }, () => tag(9, 4)).flat(),
    ]);
    const call = client.makeBidiStreamRequest('/diffmesh.stage.v1.StageService/Work', identity, identity);
    const end = streamEnd(call);
    call.write(bytes);
    const err = expectInvalid(await end, 'diffmesh.stage.v1.WorkRequest');
    expect(err.message).toContain(`nested more than ${MAX_WIRE_DEPTH} messages deep`);
    expect(received.Work).toEqual([]);
  });

  it('health and reflection are guarded too', async () => {
    const err = expectInvalid(await unary('/grpc.health.v1.Health/Check', Buffer.from([0x0f])), 'grpc.health.v1.HealthCheckRequest');
    expect(err.message).toContain('invalid wire type 7');
  });
});

describe('checkWire', () => {
  const registry = defaultDescriptorRegistry();
  const type = (name: string) => registry.getMessage(name)!;

  it('accepts what protobufjs encodes, packed or not', () => {
    const codec = messageCodec('diffmesh.tensor.v1.PutRequest');
    const bytes = codec.encode({ header: { name: 'x', shape: ['2', '3'], sizeBytes: '6', dtype: 'DTYPE_UINT8' } });
    expect(checkWire(type('diffmesh.tensor.v1.PutRequest'), bytes)).toBeUndefined();
    // header (1) → shape (3) unpacked: two varints.
    expect(checkWire(type('diffmesh.tensor.v1.PutRequest'), Uint8Array.from(len(1, [...tag(3, 0), 2, ...tag(3, 0), 3])))).toBeUndefined();
    // Unknown fields of every wire type are skipped.
    const unknown = [
      ...tag(100, 0),
      1,
      ...tag(101, 1),
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      ...len(102, [1]),
      ...tag(103, 5),
      0,
      0,
      0,
      0,
      ...tag(104, 3),
      ...tag(104, 4),
    ];
    expect(checkWire(type('diffmesh.tensor.v1.PutRequest'), Uint8Array.from(unknown))).toBeUndefined();
  });

  it('refuses huge repeated fields, map entries with wrong wire types and bad tags', () => {
    const shape = Array.from({ length: MAX_REPEATED_ELEMENTS + 1 }, () => 1);
    const huge = checkWire(type('diffmesh.tensor.v1.PutRequest'), Uint8Array.from(len(1, len(3, shape))));
    expect(huge).toEqual({ path: 'header.shape', numbers: '1.3', problem: `more than ${MAX_REPEATED_ELEMENTS} elements` });
    // PutObjectsRequest.trace_context (4) is a map<string,string>: value (2) as a varint.
    const map = checkWire(type('diffmesh.tensor.v1.PutObjectsRequest'), Uint8Array.from(len(4, [...tag(2, 0), 1])));
    expect(map?.path).toBe('trace_context.value');
    expect(checkWire(type('diffmesh.tensor.v1.PutRequest'), Uint8Array.from([0]))?.problem).toContain('invalid field number 0');
    expect(checkWire(type('diffmesh.tensor.v1.PutRequest'), Uint8Array.from([0x80]))?.problem).toContain('truncated varint');
  });
});
