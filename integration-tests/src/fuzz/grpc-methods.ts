// Surface: raw gRPC request messages to every method of every service of the mesh, as listed
// by the descriptor set (a method added to a .proto is fuzzed without a change here). Each
// input is a hostile message of the method's input type (random bytes, a valid message with
// bytes changed or cut, wrong wire types, lengths past the end, huge repeated fields, deep
// nesting, invalid UTF-8), sent without serialization.
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import type { DescMethod } from '@bufbuild/protobuf';
import { defaultDescriptorRegistry } from '@diffmesh/core';
import { messageCodec } from '@diffmesh/protos';
import { rawCall, serving, wrongGrpcAnswer, type RawOutcome } from './checks.js';
import { forEachInput, hostileMessage, type Mutation } from './generators.js';
import type { FuzzMesh } from './mesh.js';
import type { FuzzReport } from './report.js';

/** FUZZ_TRACE=1 prints each input as it is sent (to find one that hangs). */
const TRACE = process.env.FUZZ_TRACE === '1';

/** Mutations that the wire check must refuse whatever the method: INVALID_ARGUMENT naming the field. */
const ALWAYS_REFUSED = new Set<Mutation>(['wrong-wire-type', 'length-past-end', 'deep-nesting', 'invalid-utf8']);

interface Target {
  address: string;
  client: grpc.Client;
  method: DescMethod;
  path: string;
}

/** Every method of every service each server of the mesh hosts. */
export function grpcTargets(mesh: FuzzMesh): Target[] {
  const registry = defaultDescriptorRegistry();
  const targets: Target[] = [];
  for (const server of mesh.grpcServers) {
    const client = new grpc.Client(server.address, grpc.credentials.createInsecure());
    for (const name of server.services) {
      const service = registry.getService(name);
      if (!service) throw new Error(`${name} is not in the descriptor set`);
      for (const method of service.methods) targets.push({ address: server.address, client, method, path: `/${name}/${method.name}` });
    }
  }
  return targets;
}

const putResponse = () =>
  messageCodec<object, { ref?: { objectId: string; capability?: string } | null }>('diffmesh.tensor.v1.PutResponse');
const putObjectsResponse = () =>
  messageCodec<
    object,
    { ref?: { objectId: string; capability?: string } | null; error?: { code: number; message: string; field: string } | null }
  >('diffmesh.tensor.v1.PutObjectsResponse');

/**
 * Objects an input managed to store (a mutated Put that is still a valid put): they are the
 * client's, not a leak, and are deleted so that tensor-svc's bytes can be compared.
 */
/** An object a fuzz input stored, and the capability to delete it. */
export interface StoredObject {
  objectId: string;
  capability: string;
}

function storedObjects(target: Target, outcome: RawOutcome): { ids: StoredObject[]; innerError?: string } {
  const ids: StoredObject[] = [];
  let innerError: string | undefined;
  if (target.path === '/diffmesh.tensor.v1.TensorService/Put') {
    for (const r of outcome.responses) {
      const ref = putResponse().decode(r).ref;
      if (ref?.objectId) ids.push({ objectId: ref.objectId, capability: ref.capability ?? '' });
    }
  }
  if (target.path === '/diffmesh.tensor.v1.TensorService/PutObjects') {
    for (const r of outcome.responses) {
      const res = putObjectsResponse().decode(r);
      if (res.ref?.objectId) ids.push({ objectId: res.ref.objectId, capability: res.ref.capability ?? '' });
      // An object's own error travels in the stream: it must be as correct as a call's.
      if (res.error && (res.error.code === grpc.status.INTERNAL || res.error.code === grpc.status.UNKNOWN)) {
        innerError = `PutObjects answered an object with ${grpc.status[res.error.code]}: ${res.error.message}`;
      }
    }
  }
  return { ids, ...(innerError ? { innerError } : {}) };
}

/** An input as a failure report shows it: the method, the mutation and the first bytes. */
function describeInput(path: string, h: { mutation: Mutation; bytes: Buffer }): string {
  return `${path} (${h.mutation}, ${h.bytes.length} bytes: ${h.bytes.subarray(0, 48).toString('hex')}${h.bytes.length > 48 ? '…' : ''})`;
}

export async function fuzzGrpcMethods(mesh: FuzzMesh, report: FuzzReport): Promise<void> {
  const surface = 'grpc';
  const targets = grpcTargets(mesh);
  const stored: StoredObject[] = [];
  // Inputs name their target by index and path: a failure report prints them, not the client.
  const input = fc.integer({ min: 0, max: targets.length - 1 }).chain((i) =>
    hostileMessage(targets[i].method.input).map((h) => ({
      target: i,
      path: targets[i].path,
      ...h,
      [fc.toStringMethod]: () => describeInput(targets[i].path, h),
    })),
  );
  try {
    await forEachInput(surface, input, async ({ target: index, mutation, bytes }) => {
      const target = targets[index];
      if (TRACE) process.stderr.write(`fuzz grpc ${target.path} ${mutation} ${bytes.length}\n`);
      const outcome = await rawCall(
        target.client,
        target.path,
        {
          requestStream: target.method.methodKind === 'client_streaming' || target.method.methodKind === 'bidi_streaming',
          responseStream: target.method.methodKind === 'server_streaming' || target.method.methodKind === 'bidi_streaming',
        },
        [bytes],
      );
      const answer = outcome.error ? grpc.status[outcome.error.code] : 'OK';
      report.record(surface, { made: mutation, target: target.path }, answer);
      const { ids, innerError } = storedObjects(target, outcome);
      stored.push(...ids);
      const where = describeInput(target.path, { mutation, bytes });
      const wrong =
        innerError ??
        wrongGrpcAnswer(outcome.error) ??
        (ALWAYS_REFUSED.has(mutation) && (outcome.error?.code !== grpc.status.INVALID_ARGUMENT || !outcome.error.metadata.field)
          ? `a ${mutation} message was not refused naming its field: ${outcome.error ? `${grpc.status[outcome.error.code]} ${outcome.error.message}` : 'OK'}`
          : undefined);
      if (wrong) {
        report.fail(surface, `${where}: ${wrong}`);
        throw new Error(`${where}: ${wrong}`);
      }
      if (!(await serving(target.client))) {
        report.fail(surface, `${where}: the server stopped serving afterwards`);
        throw new Error(`${where}: the server at ${target.address} stopped serving afterwards`);
      }
    });
  } finally {
    const tensor = mesh.tensorClient;
    for (const object of stored) {
      await new Promise<void>((resolve) => tensor.Delete(object, () => resolve()));
    }
    for (const t of targets) t.client.close();
  }
}
