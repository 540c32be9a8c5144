// Surface: tensor-svc Put streams (a header, then chunks) gone wrong: bad or malformed
// checksums, chunks out of order, overlapping or past the declared size, short streams,
// chunks before the header, two headers, headers whose shape, dtype and size disagree, and
// clients that stop mid-stream. Every refused or abandoned put must give back what it
// reserved: tensor-svc's bytes are compared with their baseline at the end of the run.
import type { StoredObject } from './grpc-methods.js';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import type { Dtype__Output as Dtype, PutRequest, PutResponse__Output } from '@diffmesh/protos';
import { fromWire, type DiffmeshError } from '@diffmesh/core';
import { checksumOf } from '@diffmesh/tensor-client';
import { CALL_DEADLINE_MS, serving, wrongGrpcAnswer } from './checks.js';
import { forEachInput } from './generators.js';
import type { FuzzMesh } from './mesh.js';
import type { FuzzReport } from './report.js';

const KINDS = [
  'valid',
  'bad-checksum',
  'malformed-checksum',
  'out-of-order',
  'past-declared-size',
  'short',
  'overlapping',
  'chunk-before-header',
  'two-headers',
  'no-header',
  'hostile-header',
  'client-cancels',
  'client-stalls',
] as const;
type Kind = (typeof KINDS)[number];

interface PutInput {
  kind: Kind;
  messages: PutRequest[];
  /** Cancel the call after writing this many messages (client-cancels). */
  cancelAfter?: number;
  /** Write the messages, then neither end nor cancel: the call's own short deadline ends it (client-stalls). */
  stall?: boolean;
}

const DTYPES: Dtype[] = ['DTYPE_UINT8', 'DTYPE_FLOAT32', 'DTYPE_FLOAT16', 'DTYPE_INT64', 'DTYPE_INT32'];

function split(data: Buffer, parts: number): Array<{ offset: string; data: Buffer }> {
  const size = Math.max(1, Math.ceil(data.length / parts));
  const chunks: Array<{ offset: string; data: Buffer }> = [];
  for (let at = 0; at < data.length; at += size) chunks.push({ offset: String(at), data: data.subarray(at, at + size) });
  return chunks;
}

const putInput: fc.Arbitrary<PutInput> = fc
  .record({
    kind: fc.constantFrom(...KINDS),
    data: fc.integer({ min: 1, max: 80_000 }).chain((n) => fc.uint8Array({ minLength: n, maxLength: n })),
    parts: fc.integer({ min: 1, max: 6 }),
    pick: fc.nat(),
    hostile: fc.record({
      objectId: fc.oneof(
        fc.constant(''),
        fc.string({ maxLength: 300 }),
        fc.constantFrom('../../etc/passwd', 'a/b', 'a:b:c', '\u0000', '.', '..'),
      ),
      name: fc.oneof(fc.constant(''), fc.string({ maxLength: 300 })),
      shape: fc.array(fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.bigInt({ min: 0n, max: 4n })), { maxLength: 9 }),
      dtype: fc.constantFrom<Dtype>(...DTYPES, 'DTYPE_UNSPECIFIED'),
      sizeBytes: fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.bigInt({ min: 0n, max: 100_000n })),
      ttlMs: fc.oneof(fc.constant(0), fc.nat(), fc.constant(4294967295)),
    }),
  })
  .map(({ kind, data: raw, parts, pick, hostile }): PutInput => {
    const data = Buffer.from(raw);
    const header = {
      name: 'fuzz',
      shape: [String(data.length)],
      dtype: 'DTYPE_UINT8' as Dtype,
      sizeBytes: String(data.length),
      checksum: checksumOf(data),
      ttlMs: 60_000,
    };
    const chunks = split(data, parts);
    const msgs = (h: object, cs: Array<{ offset: string; data: Buffer }>): PutRequest[] => [
      { header: h },
      ...cs.map((c) => ({ chunk: c })),
    ];
    switch (kind) {
      case 'valid':
        return { kind, messages: msgs(header, chunks) };
      case 'bad-checksum': {
        const other = Buffer.from(data);
        other[pick % other.length] ^= 0xff;
        return { kind, messages: msgs({ ...header, checksum: checksumOf(other) }, chunks) };
      }
      case 'malformed-checksum':
        return {
          kind,
          messages: msgs({ ...header, checksum: ['md5:00', 'crc32c:', 'crc32c:zzzzzzzz', 'crc32c:123456789', '\u0000'][pick % 5] }, chunks),
        };
      case 'out-of-order': {
        // The first chunk last (a second chunk at its offset when there is only one).
        if (chunks.length < 2) chunks.push({ offset: '0', data: chunks[0].data });
        return { kind, messages: msgs(header, [...chunks.slice(1), chunks[0]]) };
      }
      case 'past-declared-size':
        return { kind, messages: msgs(header, [...chunks, { offset: String(data.length), data: Buffer.from([1, 2, 3]) }]) };
      case 'short':
        return {
          kind,
          messages: msgs(
            header,
            chunks.slice(0, -1).length > 0 ? chunks.slice(0, -1) : [{ offset: '0', data: data.subarray(0, data.length - 1) }],
          ),
        };
      case 'overlapping':
        return { kind, messages: msgs(header, [chunks[0], ...chunks]) };
      case 'chunk-before-header':
        return { kind, messages: [{ chunk: chunks[0] }, { header }, ...chunks.map((c) => ({ chunk: c }))] };
      case 'two-headers':
        return { kind, messages: [{ header }, ...msgs(header, chunks)] };
      case 'no-header':
        return { kind, messages: chunks.map((c) => ({ chunk: c })) };
      case 'hostile-header':
        return {
          kind,
          messages: msgs({ ...hostile, shape: hostile.shape.map(String), sizeBytes: String(hostile.sizeBytes), checksum: '' }, chunks),
        };
      case 'client-cancels':
        return { kind, messages: msgs(header, chunks), cancelAfter: pick % (chunks.length + 1) };
      case 'client-stalls':
        // Half of the chunks, then silence.
        return { kind, messages: msgs(header, chunks.slice(0, Math.ceil(chunks.length / 2))), stall: true };
    }
  });

/** Deadline of a stalling client's call: when it passes, the server must give back what the put reserved. */
const STALL_DEADLINE_MS = 150;

/** Sends a Put stream; resolves with the object id (OK) or the error. */
function put(mesh: FuzzMesh, input: PutInput): Promise<{ object?: StoredObject; error?: DiffmeshError }> {
  return new Promise((resolve) => {
    const call = mesh.tensorClient.Put(
      { deadline: Date.now() + (input.stall ? STALL_DEADLINE_MS : CALL_DEADLINE_MS) },
      (err: grpc.ServiceError | null, res?: PutResponse__Output) =>
        resolve(
          err ? { error: fromWire(err) } : { object: { objectId: res?.ref?.objectId ?? '', capability: res?.ref?.capability ?? '' } },
        ),
    );
    for (const [i, m] of input.messages.entries()) {
      if (input.cancelAfter === i) {
        call.cancel();
        return;
      }
      call.write(m);
    }
    if (input.stall) return;
    if (input.cancelAfter !== undefined && input.cancelAfter >= input.messages.length) {
      call.cancel();
      return;
    }
    call.end();
  });
}

export async function fuzzTensorPut(mesh: FuzzMesh, report: FuzzReport): Promise<void> {
  const surface = 'tensor-put';
  const client = new grpc.Client(mesh.tensor.address, grpc.credentials.createInsecure());
  const stored: StoredObject[] = [];
  try {
    await forEachInput('tensorPut', putInput, async (input) => {
      const { object, error } = await put(mesh, input);
      report.record(surface, { made: input.kind, target: 'TensorService/Put' }, error ? grpc.status[error.code] : 'OK');
      if (object?.objectId) stored.push(object);
      const what = `Put ${input.kind} (${input.messages.length} messages)`;
      // A cancelled call is the client's own doing; anything else must be a correct refusal.
      const wrong =
        (input.kind === 'client-cancels' && error?.code === grpc.status.CANCELLED) ||
        (input.kind === 'client-stalls' && error?.code === grpc.status.DEADLINE_EXCEEDED)
          ? undefined
          : (wrongGrpcAnswer(error) ??
            (input.kind !== 'valid' && input.kind !== 'hostile-header' && input.kind !== 'client-cancels' && !error
              ? 'a broken put was stored'
              : input.kind === 'valid' && error
                ? `a valid put failed: ${error.message}`
                : undefined));
      const problem = wrong ?? (!(await serving(client)) ? 'tensor-svc stopped serving afterwards' : undefined);
      if (problem) {
        report.fail(surface, `${what}: ${problem}`);
        throw new Error(`${what}: ${problem}`);
      }
    });
  } finally {
    for (const { objectId, capability } of stored) {
      const deleted = await new Promise<string>((resolve) =>
        mesh.tensorClient.Delete({ objectId, capability }, (err, res) =>
          resolve(err ? `${grpc.status[err.code]} ${err.details}` : res?.deleted ? 'deleted' : 'not there'),
        ),
      );
      if (deleted !== 'deleted')
        report.fail(surface, `the object ${JSON.stringify(objectId)} a put stored could not be deleted: ${deleted}`);
    }
    client.close();
  }
}
