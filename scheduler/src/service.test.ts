import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  loadDiffmeshProtos,
  messageCodec,
  type GenerateResponse__Output,
  type RequestEvent__Output,
  type SessionResponse__Output,
} from '@diffmesh/protos';
import { Code, DiffmeshError, GrpcServer, silentLogger, type StageHandler, type StageName } from '@diffmesh/core';
import { PlanRegistry } from './plans/registry.js';
import { SchedulerSession } from '@diffmesh/client';
import { createTensorStore } from '@diffmesh/tensor-client';
import { Fixtures, gate, handler, newScheduler, twoModels } from './fixtures/stages.js';
import { LocalInstance } from './local-instance.js';
import { SchedulerMetrics } from './metrics.js';
import { Scheduler } from './scheduler.js';
import { schedulerServiceBinding } from './service.js';

const registry = PlanRegistry.fromEntries([
  {
    model: 'test/model',
    modalities: ['text-to-image'],
    stages: [
      { name: 'text_encoding', pool: 'enc' },
      { name: 'denoising', pool: 'dit' },
      { name: 'vae_decoding', pool: 'vae' },
    ],
    defaults: { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 },
    constraints: { sizeMultiple: 8, maxWidth: 64, maxHeight: 64, maxFrames: 1 },
  },
]);

/** A stage that takes `ms` and reports one step. */
const slowStage = (stage: StageName, ms: number): StageHandler => ({
  stage,
  models: () => [],
  async execute(_task, ctx) {
    await new Promise((r) => setTimeout(r, ms));
    ctx.onProgress({ step: 1, totalSteps: 1 });
    return { outputs: {} };
  },
});

const servers: GrpcServer[] = [];
const fx = new Fixtures();
afterEach(async () => {
  for (const s of servers.splice(0)) await s.drain(0);
  await fx.close();
});

async function serve(eventIntervalMs: number, stageMs: number) {
  return (await serveAll(eventIntervalMs, stageMs)).client;
}

async function serveAll(eventIntervalMs: number, stageMs: number) {
  const log = silentLogger();
  const scheduler = new Scheduler({
    registry,
    store: createTensorStore({ backend: 'memory' }),
    log,
    limits: {
      maxQueueLength: 10,
      maxInFlight: 10,
      maxAttempts: 1,
      retryBackoffMs: 1,
      defaultTimeoutMs: 0,
      stageTimeoutMs: 0,
      retentionMs: 60_000,
    },
  });
  for (const [pool, stage] of [
    ['enc', 'text_encoding'],
    ['dit', 'denoising'],
    ['vae', 'vae_decoding'],
  ] as const) {
    scheduler.addInstance(new LocalInstance(`${pool}-1`, pool, slowStage(stage, stageMs), 1, log));
  }
  const binding = schedulerServiceBinding(scheduler, registry, undefined, { eventIntervalMs });
  const server = await GrpcServer.start({ address: '127.0.0.1:0', services: [binding], log });
  servers.push(server);
  const Client = loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService;
  return { client: new Client(server.address, grpc.credentials.createInsecure()), scheduler, binding, server };
}

/** The messages of one Generate call, each as the event kinds it carried. */
async function generate(client: Awaited<ReturnType<typeof serve>>): Promise<Array<{ kinds: string[]; sequences: number[] }>> {
  const call = client.Generate({ model: 'test/model', params: { prompt: 'x' } });
  const messages: Array<{ kinds: string[]; sequences: number[] }> = [];
  for await (const msg of call as AsyncIterable<GenerateResponse__Output>) {
    messages.push({ kinds: msg.events.map((e) => e.kind ?? ''), sequences: msg.events.map((e) => e.sequence) });
  }
  client.close();
  return messages;
}

describe('Generate event stream', async () => {
  it('sends the first events at once, then holds the rest for eventIntervalMs, and the end at once', async () => {
    const messages = await generate(await serve(60_000, 5));
    // The first message: the request was queued and its first stage started.
    expect(messages[0].kinds).toEqual(['queued', 'stageStarted']);
    // Everything else came together with the end, not one message per event.
    expect(messages).toHaveLength(2);
    expect(messages[1].kinds.at(-1)).toBe('completed');
    const sequences = messages.flatMap((m) => m.sequences);
    expect(sequences).toEqual(sequences.map((_, i) => i + 1));
  });

  it('with an interval of 0, sends what happened in each turn of the event loop as it happens', async () => {
    const messages = await generate(await serve(0, 5));
    // queued+started, then one message per stage end (its progress, its end and the next
    // stage queued and started, which all happen in one turn), the last with completed.
    expect(messages.length).toBeGreaterThanOrEqual(4);
    expect(messages[0].kinds).toEqual(['queued', 'stageStarted']);
    const finishes = messages.map((m) => m.kinds.filter((k) => k === 'stageFinished').length);
    expect(finishes.filter((n) => n === 1)).toHaveLength(3);
    expect(messages.at(-1)!.kinds.slice(-2)).toEqual(['stageFinished', 'completed']);
  });
});

/** Runs a request on a session: its id and its events, or its error. */
function run(
  session: SchedulerSession,
  prompt: string,
  opts: { signal?: AbortSignal; onEvent?: (e: RequestEvent__Output) => void } = {},
): Promise<{ reqId: string; events: RequestEvent__Output[] }> {
  return new Promise((resolve, reject) => {
    let reqId = '';
    const events: RequestEvent__Output[] = [];
    session.start(
      { model: 'test/model', params: { prompt } },
      {
        accepted: (id) => (reqId = id),
        event: (e) => {
          events.push(e);
          opts.onEvent?.(e);
          if (e.completed || e.failed || e.cancelled) resolve({ reqId, events });
        },
        error: reject,
      },
      opts.signal ? { signal: opts.signal } : {},
    );
  });
}

describe('Session', async () => {
  it('carries many requests on one stream, each answered with its id and followed by its events in order', async () => {
    const { client } = await serveAll(20, 5);
    const session = new SchedulerSession(client);
    const results = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((p) => run(session, p)));
    expect(new Set(results.map((r) => r.reqId)).size).toBe(5);
    for (const r of results) {
      expect(r.events.every((e) => e.reqId === r.reqId)).toBe(true);
      expect(r.events.map((e) => e.sequence)).toEqual(r.events.map((_, i) => i + 1));
      expect(r.events[0].kind).toBe('queued');
      expect(r.events.at(-1)!.kind).toBe('completed');
      expect(r.events.filter((e) => e.kind === 'stageFinished')).toHaveLength(3);
    }
    expect(session.active).toBe(0);
    await session.close();
    client.close();
  });

  it('answers a bad request with its error and keeps the stream for the next ones', async () => {
    const { client } = await serveAll(20, 1);
    const session = new SchedulerSession(client);
    const err = (await run(session, '').catch((e: unknown) => e)) as DiffmeshError;
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(err.field).toBe('prompt');
    const ok = await run(session, 'fine');
    expect(ok.events.at(-1)!.kind).toBe('completed');
    await session.close();
    client.close();
  });

  it('answers a message without an action naming the field, on the raw stream', async () => {
    const { client } = await serveAll(20, 1);
    const raw = rawSession(client);
    raw.send({ tag: 7 });
    const first = await raw.next();
    expect(first.answers).toHaveLength(1);
    expect(first.answers[0]).toMatchObject({ tag: 7, reqId: '', error: { code: 'INVALID_ARGUMENT', field: 'action' } });
    // Half-closing a session with nothing running ends it.
    raw.call.end();
    expect((await raw.status).code).toBe(grpc.status.OK);
    client.close();
  });

  it('counts open sessions for the metrics, until they end or their client goes away', async () => {
    const { client, binding, scheduler } = await serveAll(20, 1);
    const metrics = new SchedulerMetrics(scheduler);
    metrics.countSessions(() => binding.openSessions());
    const gauge = async (): Promise<string | undefined> =>
      (await metrics.registry.metrics()).match(/^diffmesh_scheduler_sessions (\d+)$/m)?.[1];
    expect(await gauge()).toBe('0');
    const a = rawSession(client);
    const b = rawSession(client);
    a.send({ tag: 1 });
    b.send({ tag: 1 });
    await Promise.all([a.next(), b.next()]);
    expect(await gauge()).toBe('2');
    a.call.end();
    await a.status;
    b.call.cancel();
    await expect.poll(() => binding.openSessions()).toBe(0);
    expect(await gauge()).toBe('0');
    client.close();
  });

  it('cancels a request when its signal aborts, and only that one', async () => {
    const { client, scheduler } = await serveAll(0, 200);
    const session = new SchedulerSession(client);
    const controller = new AbortController();
    const doomed = run(session, 'doomed', {
      signal: controller.signal,
      onEvent: (e) => {
        if (e.kind === 'stageStarted') controller.abort();
      },
    });
    const kept = run(session, 'kept');
    const cancelled = await doomed;
    expect(cancelled.events.at(-1)!.kind).toBe('cancelled');
    expect((await scheduler.get(cancelled.reqId)).context.status).toBe('cancelled');
    expect((await kept).events.at(-1)!.kind).toBe('completed');
    await session.close();
    client.close();
  });

  it('cancels the unfinished requests of a client that goes away', async () => {
    const { client, scheduler } = await serveAll(0, 500);
    const raw = rawSession(client);
    raw.send({ tag: 1, generate: { model: 'test/model', params: { prompt: 'x' } } });
    const first = await raw.next();
    const reqId = first.answers[0].reqId;
    expect(reqId).not.toBe('');
    raw.call.cancel(); // the client goes away mid-request
    await expect.poll(async () => (await scheduler.get(reqId)).context.status, { timeout: 5000 }).toBe('cancelled');
    client.close();
  });

  it('ends once its requests have ended when the client closes its side', async () => {
    const { client } = await serveAll(20, 30);
    const session = new SchedulerSession(client);
    const pending = run(session, 'x');
    await new Promise((r) => setTimeout(r, 10));
    await session.close();
    // close() resolved after the stream's end, which came after the request's.
    const done = await Promise.race([pending, Promise.resolve(undefined)]);
    expect(done?.events.at(-1)!.kind).toBe('completed');
    client.close();
  });

  it('fails the requests still on a session whose stream breaks with UNAVAILABLE', async () => {
    const first = await serveAll(0, 10_000);
    const session = new SchedulerSession(first.client);
    const pending = run(session, 'x').catch((e: unknown) => e as DiffmeshError);
    await expect.poll(() => first.scheduler.inFlightCount()).toBe(1);
    await first.server.drain(0); // the scheduler goes away mid-request
    const err = await pending;
    expect(err).toMatchObject({ code: Code.UNAVAILABLE });
    expect(session.active).toBe(0);
    first.client.close();
  });

  it('is ended by endSessions once its requests have ended (a draining scheduler)', async () => {
    const { client, binding } = await serveAll(20, 30);
    const raw = rawSession(client);
    raw.send({ tag: 1, generate: { model: 'test/model', params: { prompt: 'x' } } });
    await raw.next();
    // The client keeps its side open: only the server can end the stream.
    binding.endSessions();
    expect((await raw.status).code).toBe(grpc.status.OK);
    expect(raw.received.flatMap((m) => m.events).at(-1)!.kind).toBe('completed');
    client.close();
  });

  it('refuses new requests on a session endSessions is ending, instead of running them unanswered', async () => {
    const held = gate();
    const scheduler = newScheduler();
    scheduler.addInstance(
      new LocalInstance(
        'enc-1',
        'enc',
        handler(async () => (await held.wait, { outputs: {} })),
        2,
        silentLogger(),
      ),
    );
    const binding = schedulerServiceBinding(scheduler, twoModels);
    const client = new (loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService)(
      await fx.server(binding),
      grpc.credentials.createInsecure(),
    );
    const raw = rawSession(client);
    raw.send({ tag: 1, generate: { model: 'm1', params: { prompt: 'x' } } });
    await raw.next();
    binding.endSessions(); // the scheduler starts draining; tag 1 still runs
    raw.send({ tag: 2, generate: { model: 'm1', params: { prompt: 'y' } } });
    await expect.poll(() => raw.received.flatMap((m) => m.answers).some((a) => a.tag === 2), { timeout: 10_000 }).toBe(true);
    held.release();
    expect((await raw.status).code).toBe(grpc.status.OK);
    const answers = raw.received.flatMap((m) => m.answers);
    expect(answers.find((a) => a.tag === 2)).toMatchObject({ reqId: '', error: { code: 'UNAVAILABLE', reason: 'ERROR_REASON_DRAINING' } });
    expect(scheduler.recentRequests()).toHaveLength(1);
    client.close();
  });
});

describe('a scheduler that has drained', async () => {
  it('ends the Watch, Generate and Session streams of unfinished requests with UNAVAILABLE/DRAINING, after their events', async () => {
    const { client, scheduler, binding } = await serveAll(0, 10_000);
    const generated = client.Generate({ model: 'test/model', params: { prompt: 'x' } });
    const generateEnd = streamEnd(generated);
    await expect.poll(() => scheduler.inFlightCount()).toBe(1);
    const reqId = scheduler.recentRequests()[0].context.reqId;
    const watched = client.Watch({ reqId });
    const watchEnd = streamEnd(watched);
    const raw = rawSession(client);
    raw.send({ tag: 1, generate: { model: 'test/model', params: { prompt: 'y' } } });
    await raw.next();
    // What a draining scheduler on a shared store does once it has handed its work back.
    binding.endStreams(new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'follow the request on another scheduler'));
    for (const end of [await generateEnd, await watchEnd]) {
      expect(end.kinds.slice(0, 2)).toEqual(['queued', 'stageStarted']);
      expect([end.status.code, end.status.details]).toEqual([grpc.status.UNAVAILABLE, 'follow the request on another scheduler']);
    }
    expect((await raw.status).code).toBe(grpc.status.UNAVAILABLE);
    expect(raw.received.flatMap((m) => m.events).map((e) => e.kind)).toContain('queued');
    // The requests themselves go on (with a shared store, on another scheduler).
    expect(scheduler.inFlightCount()).toBe(2);
    client.close();
    await scheduler.stop();
  });
});

/** The event kinds a server stream carried and how it ended. */
function streamEnd(call: grpc.ClientReadableStream<GenerateResponse__Output>): Promise<{ kinds: string[]; status: grpc.StatusObject }> {
  const kinds: string[] = [];
  call.on('data', (m: GenerateResponse__Output) => kinds.push(...m.events.map((e) => e.kind ?? '')));
  call.on('error', () => {});
  return new Promise((resolve) => call.on('status', (status: grpc.StatusObject) => resolve({ kinds, status })));
}

/** A Session call driven message by message. */
function rawSession(client: grpc.Client) {
  const requests = messageCodec<object>('diffmesh.scheduler.v1.SessionRequest');
  const responses = messageCodec<object, SessionResponse__Output>('diffmesh.scheduler.v1.SessionResponse');
  const call = client.makeBidiStreamRequest<Buffer, Buffer>(
    '/diffmesh.scheduler.v1.SchedulerService/Session',
    (b) => b,
    (b) => b,
  );
  const received: SessionResponse__Output[] = [];
  const waiting: Array<(m: SessionResponse__Output) => void> = [];
  call.on('data', (b: Buffer) => {
    const m = responses.decode(b);
    received.push(m);
    waiting.shift()?.(m);
  });
  call.on('error', () => {});
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  return {
    call,
    received,
    status,
    send: (m: object) => call.write(Buffer.from(requests.encode(m))),
    next: () => new Promise<SessionResponse__Output>((resolve) => waiting.push(resolve)),
  };
}
