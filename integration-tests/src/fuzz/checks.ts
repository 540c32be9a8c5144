// What the suite checks around the inputs: normal requests running beside them, the
// answer kinds that count as correct, raw gRPC calls, and the memory and tensor-svc bytes
// measured after garbage collection.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import * as grpc from '@grpc/grpc-js';
import { fromWire, type DiffmeshError } from '@diffmesh/core';
import { generate, last } from '../harness.js';
import type { FuzzMesh } from './mesh.js';
import type { FuzzReport } from './report.js';

/** Deadline of one fuzz call: an answer later than this is a hang. */
export const CALL_DEADLINE_MS = 5_000;

/**
 * gRPC answers that are a service doing its job with a bad input: the input is refused
 * (INVALID_ARGUMENT, OUT_OF_RANGE, FAILED_PRECONDITION), names something that does not
 * exist (NOT_FOUND), collides (ALREADY_EXISTS), is over a limit (RESOURCE_EXHAUSTED), lacks
 * an object's capability (PERMISSION_DENIED, tensor-svc's CAPABILITY_REQUIRED), or fails its
 * checksum (DATA_LOSS, tensor-svc's CHECKSUM_MISMATCH). INTERNAL, UNKNOWN,
 * UNAVAILABLE and DEADLINE_EXCEEDED are never right.
 */
const ACCEPTED_CODES = new Set<number>([
  grpc.status.OK,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.OUT_OF_RANGE,
  grpc.status.FAILED_PRECONDITION,
  grpc.status.NOT_FOUND,
  grpc.status.ALREADY_EXISTS,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.DATA_LOSS,
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
]);

/** What is wrong with a gRPC answer, or undefined when it is correct for a bad input. */
export function wrongGrpcAnswer(err: DiffmeshError | undefined): string | undefined {
  if (!err) return undefined;
  if (!ACCEPTED_CODES.has(err.code)) return `answered ${grpc.status[err.code]}: ${err.message}`;
  if (err.code === grpc.status.INVALID_ARGUMENT && !err.metadata.field && !err.metadata.message_type) {
    return `INVALID_ARGUMENT without a field: ${err.message}`;
  }
  return undefined;
}

/** How a raw call ended: its error (undefined for OK) and how many messages came back. */
export interface RawOutcome {
  error?: DiffmeshError;
  responses: Buffer[];
}

const identity = (b: Buffer): Buffer => b;

/**
 * Sends `messages` as they are (no serialization) on `path`, half-closes, and waits for the
 * status. On a server-streaming method a first response counts as the answer (the request
 * was taken) and the call is then cancelled: Health.Watch, for one, streams until the client
 * goes. A bidi method may greet before it reads (the Work stream's status), so only its
 * status counts.
 */
export function rawCall(
  client: grpc.Client,
  path: string,
  kind: { requestStream: boolean; responseStream: boolean },
  messages: Buffer[],
  deadlineMs = CALL_DEADLINE_MS,
): Promise<RawOutcome> {
  const deadline = Date.now() + deadlineMs;
  const responses: Buffer[] = [];
  return new Promise((resolve) => {
    const done = (err: grpc.ServiceError | null) => resolve(err ? { error: fromWire(err), responses } : { responses });
    if (!kind.requestStream && !kind.responseStream) {
      client.makeUnaryRequest(path, identity, identity, messages[0] ?? Buffer.alloc(0), { deadline }, (err, res) => {
        if (res) responses.push(res);
        done(err);
      });
      return;
    }
    if (!kind.responseStream) {
      const call = client.makeClientStreamRequest(path, identity, identity, { deadline }, (err, res) => {
        if (res) responses.push(res);
        done(err);
      });
      for (const m of messages) call.write(m);
      call.end();
      return;
    }
    const call = kind.requestStream
      ? client.makeBidiStreamRequest(path, identity, identity, new grpc.Metadata(), { deadline })
      : client.makeServerStreamRequest(path, identity, identity, messages[0] ?? Buffer.alloc(0), new grpc.Metadata(), { deadline });
    let settled = false;
    call.on('data', (m: Buffer) => {
      responses.push(m);
      if (settled || kind.requestStream) return;
      settled = true;
      resolve({ responses });
      call.cancel();
    });
    call.on('error', (err: grpc.ServiceError) => {
      if (!settled) {
        settled = true;
        done(err);
      }
    });
    call.on('status', (s: grpc.StatusObject) => {
      if (!settled && s.code === grpc.status.OK) {
        settled = true;
        done(null);
      }
    });
    if (kind.requestStream) {
      const duplex = call as grpc.ClientDuplexStream<Buffer, Buffer>;
      for (const m of messages) duplex.write(m);
      duplex.end();
    }
  });
}

/** The overall health of the server behind `client` (`/grpc.health.v1.Health/Check`, service ''): true when SERVING. */
export async function serving(client: grpc.Client): Promise<boolean> {
  const { error, responses } = await rawCall(
    client,
    '/grpc.health.v1.Health/Check',
    { requestStream: false, responseStream: false },
    [Buffer.alloc(0)],
    2000,
  );
  // HealthCheckResponse { status: SERVING (1) } is the two bytes 08 01.
  return !error && responses[0]?.equals(Buffer.from([0x08, 0x01])) === true;
}

/** Pause between two normal requests: they show the mesh still serves, without taking the CPU from the inputs. */
const NORMAL_PAUSE_MS = 150;

/**
 * Normal requests (a tiny-shapes generation, 64×64, 2 steps) one after another while the
 * inputs of a surface run; `stop()` waits for the last and returns how many completed.
 * Any that does not complete is a failure of the surface.
 */
export function normalTraffic(mesh: FuzzMesh, report: FuzzReport, surface: string): { stop(): Promise<number> } {
  let running = true;
  let completed = 0;
  const loop = (async () => {
    while (running) {
      try {
        const events = await generate(mesh.client, { params: { prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 2 } });
        const end = last(events);
        if (end.type === 'completed') completed += 1;
        else report.fail(surface, `a normal request beside the inputs ended ${end.type}: ${JSON.stringify(end)}`);
      } catch (err) {
        report.fail(surface, `a normal request beside the inputs failed: ${String(err)}`);
      }
      if (running) await new Promise((r) => setTimeout(r, NORMAL_PAUSE_MS));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      report.surface(surface).normalRequests += completed;
      return completed;
    },
  };
}

let gcFn: (() => void) | undefined;

/** Full garbage collection (V8's `gc`, exposed at run time) twice, so that what is left is what is held. */
export function collectGarbage(): void {
  if (!gcFn) {
    setFlagsFromString('--expose-gc');
    gcFn = runInNewContext('gc') as () => void;
  }
  gcFn();
  gcFn();
}

/** Heap and buffers of this process (every service of the mesh lives in it) after GC, in MiB. */
export function memoryAfterGc(): { heapUsed: number; arrayBuffers: number; rss: number } {
  collectGarbage();
  const m = process.memoryUsage();
  const mib = (n: number) => n / (1024 * 1024);
  return { heapUsed: mib(m.heapUsed), arrayBuffers: mib(m.arrayBuffers), rss: mib(m.rss) };
}

/** Bytes tensor-svc holds or has reserved, in memory and on disk. */
export function tensorBytes(mesh: FuzzMesh): number {
  const u = mesh.tensor.store.usage();
  return u.memory.bytes + u.memory.reservedBytes + u.disk.bytes + u.disk.reservedBytes;
}
