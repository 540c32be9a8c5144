#!/usr/bin/env node
/**
 * The transport floor of (a): the same five processes and the same hops as a no-op request
 * (client → scheduler → three stages one after the other → client, each hop a message on a
 * long-lived grpc-js bidirectional stream), with nothing but grpc-js in them. A relay
 * forwards each client message through three echo processes and answers the client. What
 * diffmesh adds on top of this is its own overhead; on a given machine this is the best a
 * grpc-js mesh of this shape can do.
 *
 * Process entry: `node transport-floor.js echo` or `node transport-floor.js relay ADDR ADDR ADDR`;
 * each prints `transport-floor listening on HOST:PORT`.
 */
import { isMainThread } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';

const same = (b: Buffer): Buffer => b;
const method = (path: string): grpc.MethodDefinition<Buffer, Buffer> => ({
  path,
  requestStream: true,
  responseStream: true,
  requestSerialize: same,
  requestDeserialize: same,
  responseSerialize: same,
  responseDeserialize: same,
});
const PATH = '/diffmesh.bench.Floor/Hop';
const service: grpc.ServiceDefinition = { Hop: method(PATH) };

async function listen(handler: grpc.handleBidiStreamingCall<Buffer, Buffer>): Promise<void> {
  const server = new grpc.Server();
  server.addService(service, { Hop: handler });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  process.stdout.write(`transport-floor listening on 127.0.0.1:${port}\n`);
  process.on('SIGTERM', () => server.forceShutdown());
}

/** A bidi stream that sends Buffers tagged with a 4-byte id and routes replies by id. */
export class HopClient {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Buffer, Buffer>;
  private readonly waiting = new Map<number, (b: Buffer) => void>();

  constructor(address: string) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    this.call = this.client.makeBidiStreamRequest(PATH, same, same);
    this.call.on('data', (b: Buffer) => {
      const id = b.readUInt32LE(0);
      const done = this.waiting.get(id);
      this.waiting.delete(id);
      done?.(b);
    });
    this.call.on('error', () => undefined);
  }

  send(message: Buffer, reply: (b: Buffer) => void): void {
    this.waiting.set(message.readUInt32LE(0), reply);
    this.call.write(message);
  }

  close(): void {
    this.call.end();
    this.client.close();
  }
}

async function main(): Promise<void> {
  const [role, ...stages] = process.argv.slice(2);
  if (role === 'echo') {
    await listen((call) => call.on('data', (b: Buffer) => call.write(b)));
    return;
  }
  if (role === 'relay' && stages.length > 0) {
    const hops = stages.map((a) => new HopClient(a));
    await listen((call) =>
      call.on('data', (b: Buffer) => {
        const next = (i: number, msg: Buffer): void => {
          if (i === hops.length) call.write(msg);
          else hops[i].send(msg, (r) => next(i + 1, r));
        };
        next(0, b);
      }),
    );
    return;
  }
  process.stderr.write('usage: transport-floor.js echo | relay ADDR...\n');
  process.exit(2);
}

if (isMainThread && process.argv[1] === fileURLToPath(import.meta.url)) await main();
