// SchedulerClient against a scheduler that is not there yet: a gRPC server on loopback that
// starts listening only after the client's first call was refused, as a restarted scheduler does.
import { createServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { Code, DiffmeshError, silentLogger, toWire } from '@diffmesh/core';
import { loadDiffmeshProtos } from '@diffmesh/protos';
import { SchedulerClient } from './scheduler-client.js';
import type { WaitNotice } from './wait-policy.js';

/** A loopback port nothing listens on (yet). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

type Handlers = Partial<Record<'Get' | 'Submit' | 'Watch' | 'Cancel', grpc.UntypedHandleCall>>;

let server: grpc.Server | undefined;
let client: SchedulerClient | undefined;
afterEach(async () => {
  await client?.close();
  server?.forceShutdown();
  server = client = undefined;
});

/** Starts a scheduler stand-in on `port` that serves `handlers` (other methods: UNIMPLEMENTED). */
async function startScheduler(port: number, handlers: Handlers): Promise<void> {
  server = new grpc.Server();
  server.addService(loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService.service, handlers as grpc.UntypedServiceImplementation);
  await new Promise<void>((resolve, reject) =>
    server!.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
}

/** A client of `port` whose waits are recorded; the scheduler starts after its first wait. */
function waitingClient(port: number, waitForRestartMs: number, onFirstWait: () => void = () => undefined): { notices: WaitNotice[] } {
  const notices: WaitNotice[] = [];
  client = new SchedulerClient({
    addresses: [`127.0.0.1:${port}`],
    log: silentLogger(),
    waitForRestartMs,
    onWait: (n) => {
      notices.push(n);
      if (notices.length === 1) onFirstWait();
    },
  });
  return { notices };
}

describe('SchedulerClient waiting for a restarting scheduler', () => {
  it('Get waits while the address refuses connections and answers once the scheduler listens', async () => {
    const port = await freePort();
    const { notices } = waitingClient(port, 30_000, () => {
      void startScheduler(port, {
        Get: (call: grpc.ServerUnaryCall<{ reqId: string }, unknown>, cb: grpc.sendUnaryData<unknown>) =>
          cb(null, { reqId: call.request.reqId, model: 'diffmesh/tiny-shapes', status: 'REQUEST_STATUS_RUNNING' }),
      });
    });
    const res = await client!.get('r1');
    expect(res).toMatchObject({ reqId: 'r1', model: 'diffmesh/tiny-shapes', status: 'REQUEST_STATUS_RUNNING' });
    expect(notices[0]).toMatchObject({ service: 'scheduler', addresses: [`127.0.0.1:${port}`], cause: 'connection refused', attempt: 1 });
  });

  it('a Submit that was not answered is sent again with the same request id', async () => {
    const port = await freePort();
    const ids: string[] = [];
    await startScheduler(port, {
      Submit: (call: grpc.ServerUnaryCall<{ requestId: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        ids.push(call.request.requestId);
        // The first reaches a scheduler that is going away (UNAVAILABLE, no answer about the request).
        if (ids.length === 1) cb({ code: grpc.status.UNAVAILABLE, details: 'the scheduler is shutting down' });
        else cb(null, { reqId: call.request.requestId, status: 'REQUEST_STATUS_PENDING', existing: true });
      },
    });
    const { notices } = waitingClient(port, 30_000);
    const res = await client!.submit({ model: 'diffmesh/tiny-shapes', params: { prompt: 'a red circle' } });
    expect(ids).toHaveLength(2);
    expect(ids[0]).not.toBe('');
    expect(ids[1]).toBe(ids[0]);
    expect(res.reqId).toBe(ids[0]);
    expect(notices).toHaveLength(1);
  });

  it('Watch waits before its first event, then yields the request’s events', async () => {
    const port = await freePort();
    waitingClient(port, 30_000, () => {
      void startScheduler(port, {
        Watch: (call: grpc.ServerWritableStream<{ reqId: string }, unknown>) => {
          call.write({ events: [{ reqId: call.request.reqId, sequence: 1, queued: { stage: 'STAGE_NAME_DENOISING' } }] });
          call.write({ events: [{ reqId: call.request.reqId, sequence: 2, completed: {} }] });
          call.end();
        },
      });
    });
    const seen: number[] = [];
    for await (const e of client!.watch('r2')) seen.push(e.sequence);
    expect(seen).toEqual([1, 2]);
  });

  it('an answer about the request is not waited on: an unknown id fails at once', async () => {
    const port = await freePort();
    await startScheduler(port, {
      Cancel: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) =>
        cb(toWire(new DiffmeshError(Code.NOT_FOUND, 'REQUEST_NOT_FOUND', 'no request r3'))),
    });
    const { notices } = waitingClient(port, 30_000);
    await expect(client!.cancel('r3')).rejects.toMatchObject({ code: Code.NOT_FOUND, reason: 'REQUEST_NOT_FOUND' });
    expect(notices).toEqual([]);
  });

  it('gives up after waitForRestartMs with the one-line error naming the address', async () => {
    const port = await freePort();
    const { notices } = waitingClient(port, 1_200);
    await expect(client!.status()).rejects.toThrow(`cannot reach the scheduler at 127.0.0.1:${port}: connection refused`);
    expect(notices.length).toBeGreaterThanOrEqual(2);
    expect(notices.at(-1)!.waitedMs + notices.at(-1)!.delayMs).toBeLessThanOrEqual(1_200);
  });
});
