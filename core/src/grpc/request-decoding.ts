/**
 * Malformed request messages answer INVALID_ARGUMENT naming what is wrong, on every method of
 * every server built by {@link GrpcServer}. grpc-js answers a deserializer that throws with
 * INTERNAL "Error deserializing request" (server-interceptors.js, `decompressAndMaybePush`),
 * which reads as a server fault and counts against breakers. So each method's deserializer is
 * guarded: it checks the bytes against the method's input type in the descriptor set
 * ({@link checkWire}), decodes them, and instead of throwing returns a
 * {@link MalformedRequest}; a server interceptor ({@link rejectMalformedRequests}) ends the
 * call with that error before the handler sees the message. The same path serves unary,
 * server-streaming, client-streaming and bidi methods: on a stream, the first malformed
 * message ends the call, and the handler sees a cancellation, as when a client goes away.
 */
import * as grpc from '@grpc/grpc-js';
import type { DescMessage, Registry } from '@bufbuild/protobuf';
import { Code, DiffmeshError } from '../errors/index.js';
import { toWire } from '../wire/errors.js';
import { checkWire, type WireProblem } from './wire-check.js';

/** What a guarded deserializer returns for bytes that are not a valid request message. */
export class MalformedRequest {
  constructor(readonly error: DiffmeshError) {}
}

/**
 * The INVALID_ARGUMENT for a request message of type `typeName` that could not be read.
 * Reason `INVALID_PARAMETER`; `field` names the field at fault (proto names through nested
 * messages) when there is one, and `message_type` the message.
 */
export function malformedRequestError(typeName: string, problem: WireProblem | string): DiffmeshError {
  if (typeof problem === 'string') {
    return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `request message ${typeName}: ${problem}`, {
      metadata: { message_type: typeName },
    });
  }
  const where = problem.path ? `field ${problem.numbers} (${problem.path}): ` : '';
  return new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `request message ${typeName}: ${where}${problem.problem}`, {
    metadata: { message_type: typeName, ...(problem.path ? { field: problem.path } : {}) },
  });
}

/** `diffmesh.tensor.v1.TensorService` and `Put` from `/diffmesh.tensor.v1.TensorService/Put`. */
function splitPath(path: string): { service: string; method: string } {
  const slash = path.lastIndexOf('/');
  return { service: path.slice(1, slash), method: path.slice(slash + 1) };
}

/** The input type of the method at `path`, when the registry has its service. */
function inputTypeOf(registry: Registry, path: string): DescMessage | undefined {
  const { service, method } = splitPath(path);
  const desc = registry.getService(service);
  return desc?.methods.find((m) => m.name === method)?.input;
}

/** A deserializer that never throws: malformed bytes become a {@link MalformedRequest}. */
export function guardDeserialize(
  path: string,
  deserialize: (bytes: Buffer) => unknown,
  input: DescMessage | undefined,
): (bytes: Buffer) => unknown {
  const typeName = input?.typeName ?? `of ${path}`;
  return (bytes: Buffer) => {
    if (input) {
      const problem = checkWire(input, bytes);
      if (problem) return new MalformedRequest(malformedRequestError(typeName, problem));
    }
    try {
      return deserialize(bytes);
    } catch (err) {
      // protobufjs' message says what it could not read ("index out of range", "invalid wire type").
      const reason = err instanceof Error ? err.message : 'cannot be decoded';
      return new MalformedRequest(malformedRequestError(typeName, reason));
    }
  };
}

/** `definition` with every method's request deserializer guarded (the definition itself is not changed). */
export function guardServiceDefinition(definition: grpc.ServiceDefinition, registry: Registry): grpc.ServiceDefinition {
  const guarded: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition)) {
    const m = method as grpc.MethodDefinition<unknown, unknown>;
    guarded[name] = { ...m, requestDeserialize: guardDeserialize(m.path, m.requestDeserialize, inputTypeOf(registry, m.path)) };
  }
  return guarded;
}

/**
 * The server interceptor that ends a call with the error of a {@link MalformedRequest}
 * instead of handing it to the method's handler.
 */
export const rejectMalformedRequests: grpc.ServerInterceptor = (_method, call) =>
  new grpc.ServerInterceptingCall(call, {
    start: (next) =>
      next(
        new grpc.ServerListenerBuilder()
          .withOnReceiveMessage((message, nextMessage) => {
            if (!(message instanceof MalformedRequest)) {
              nextMessage(message);
              return;
            }
            const status = toWire(message.error);
            call.sendStatus({ code: status.code, details: status.details, metadata: status.metadata ?? null });
          })
          .build(),
      ),
  });
