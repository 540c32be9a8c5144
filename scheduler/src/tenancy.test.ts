import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, type GetStatusResponse__Output } from '@diffmesh/protos';
import { GrpcServer, silentLogger, TenantDirectory, type StageHandler, type StageName } from '@diffmesh/core';
import { createTensorStore } from '@diffmesh/tensor-client';
import { PlanRegistry } from './plans/registry.js';
import { LocalInstance } from './local-instance.js';
import { newScheduler, outcome } from './fixtures/stages.js';
import { schedulerServiceBinding } from './service.js';

const registry = PlanRegistry.fromEntries([
  {
    model: 'test/model',
    modalities: ['text-to-image'],
    stages: [{ name: 'denoising', pool: 'dit' }],
    defaults: { width: 64, height: 64, numFrames: 1, steps: 1, guidanceScale: 1, fps: 8 },
    constraints: { sizeMultiple: 8, maxWidth: 64, maxHeight: 64, maxFrames: 1 },
  },
]);

const KEYS = { acme: 'acme-key-0123456789abcdef', globex: 'globex-key-0123456789abcdef', ops: 'ops-key-0123456789abcdef' };

const tenants = TenantDirectory.fromConfig({
  tenants: [
    { name: 'acme', apiKeys: [KEYS.acme] },
    { name: 'globex', apiKeys: [KEYS.globex] },
    { name: 'ops', apiKeys: [KEYS.ops], admin: true },
  ],
});

/** A stage that finishes when `release` is called (or at once once released). */
function heldStage(stage: StageName): StageHandler & { release(): void } {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  return {
    stage,
    models: () => [],
    release: () => release(),
    async execute(_task, ctx) {
      await released;
      ctx.onProgress({ step: 1, totalSteps: 1 });
      return { outputs: {} };
    },
  };
}

const servers: GrpcServer[] = [];
const clients: grpc.Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) await s.drain(0);
});

async function serve() {
  const log = silentLogger();
  const store = createTensorStore({ backend: 'memory' });
  const scheduler = newScheduler({ maxAttempts: 1 }, { registry });
  const stage = heldStage('denoising');
  scheduler.addInstance(new LocalInstance('dit-1', 'dit', stage, 4, log));
  const binding = schedulerServiceBinding(scheduler, registry, undefined, { eventIntervalMs: 0, results: { store, log }, tenants });
  const server = await GrpcServer.start({ address: '127.0.0.1:0', services: [binding], log });
  servers.push(server);
  const Client = loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService;
  const client = new Client(server.address, grpc.credentials.createInsecure());
  clients.push(client);
  return { client, stage, scheduler };
}

type Client = Awaited<ReturnType<typeof serve>>['client'];

function as(key: string | undefined): grpc.Metadata {
  const md = new grpc.Metadata();
  if (key !== undefined) md.set('authorization', `Bearer ${key}`);
  return md;
}

function call<Res>(client: Client, method: string, req: object, key: string | undefined): Promise<Res> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, (r: object, md: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: Res) => void) => void>)[
      method
    ](req, as(key), (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/** The status code a call ends with (0 = OK). */
async function codeOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return grpc.status.OK;
  } catch (err) {
    return (err as grpc.ServiceError).code;
  }
}

/** The status and message a server-streaming call ends with. */
function streamEnd(stream: grpc.ClientReadableStream<unknown>): Promise<{ code: number; details: string; messages: number }> {
  return new Promise((resolve) => {
    let messages = 0;
    stream.on('data', () => (messages += 1));
    stream.on('error', (err: grpc.ServiceError) => resolve({ code: err.code, details: err.details, messages }));
    stream.on('end', () => resolve({ code: grpc.status.OK, details: '', messages }));
  });
}

async function submit(client: Client, key: string, prompt: string, requestId = ''): Promise<string> {
  const res = await call<{ reqId: string }>(client, 'Submit', { model: 'test/model', params: { prompt }, requestId }, key);
  return res.reqId;
}

describe('tenancy on the scheduler API', () => {
  it('answers another tenant’s request exactly as an unknown one, on Get, Cancel, Watch and GetResult', async () => {
    const { client, stage } = await serve();
    const mine = await submit(client, KEYS.acme, 'acme prompt');
    const unknown = 'no-such-request';
    for (const id of [mine, unknown]) {
      const get = await call(client, 'Get', { reqId: id }, KEYS.globex).catch((e: grpc.ServiceError) => e);
      expect((get as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
      expect((get as grpc.ServiceError).details).toBe(`request "${id}" not found`);
      expect(await codeOf(call(client, 'Cancel', { reqId: id }, KEYS.globex))).toBe(grpc.status.NOT_FOUND);
      const watch = await streamEnd(client.Watch({ reqId: id }, as(KEYS.globex)));
      expect(watch).toEqual({ code: grpc.status.NOT_FOUND, details: `request "${id}" not found`, messages: 0 });
      const result = await streamEnd(client.GetResult({ reqId: id }, as(KEYS.globex)));
      expect(result.code).toBe(grpc.status.NOT_FOUND);
    }
    // The owner and an admin see it; the other tenant's cancel did not touch it.
    expect((await call<{ status: string }>(client, 'Get', { reqId: mine }, KEYS.acme)).status).toBe('REQUEST_STATUS_RUNNING');
    expect((await call<{ reqId: string }>(client, 'Get', { reqId: mine }, KEYS.ops)).reqId).toBe(mine);
    stage.release();
    const watched = await streamEnd(client.Watch({ reqId: mine }, as(KEYS.acme)));
    expect(watched.code).toBe(grpc.status.OK);
    expect(watched.messages).toBeGreaterThan(0);
  });

  it('lets a tenant cancel its own request, and an admin anyone’s', async () => {
    const { client } = await serve();
    const a = await submit(client, KEYS.acme, 'a');
    const b = await submit(client, KEYS.globex, 'b');
    expect((await call<{ status: string }>(client, 'Cancel', { reqId: a }, KEYS.acme)).status).toBe('REQUEST_STATUS_CANCELLED');
    expect((await call<{ status: string }>(client, 'Cancel', { reqId: b }, KEYS.ops)).status).toBe('REQUEST_STATUS_CANCELLED');
  });

  it('shows each tenant only its own recent requests on GetStatus; an admin sees all', async () => {
    const { client } = await serve();
    await submit(client, KEYS.acme, 'secret plans of acme');
    await submit(client, KEYS.globex, 'secret plans of globex');
    const prompts = async (key: string) =>
      (await call<GetStatusResponse__Output>(client, 'GetStatus', {}, key)).recentRequests.map((r) => r.prompt).sort();
    expect(await prompts(KEYS.acme)).toEqual(['secret plans of acme']);
    expect(await prompts(KEYS.globex)).toEqual(['secret plans of globex']);
    expect(await prompts(KEYS.ops)).toEqual(['secret plans of acme', 'secret plans of globex']);
  });

  it('refuses a caller without credentials, or with a wrong key, on every method, without repeating the key', async () => {
    const { client } = await serve();
    const id = await submit(client, KEYS.acme, 'x');
    for (const key of [undefined, 'wrong-key-0123456789abcdef']) {
      for (const [method, req] of [
        ['Submit', { model: 'test/model', params: { prompt: 'x' } }],
        ['Get', { reqId: id }],
        ['Cancel', { reqId: id }],
        ['ListModels', {}],
        ['GetStatus', {}],
      ] as const) {
        const err = (await call(client, method, req, key).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError;
        expect(err.code, method).toBe(grpc.status.UNAUTHENTICATED);
        if (key) expect(err.details).not.toContain(key);
      }
      expect((await streamEnd(client.Watch({ reqId: id }, as(key)))).code).toBe(grpc.status.UNAUTHENTICATED);
      expect((await streamEnd(client.Generate({ model: 'test/model', params: { prompt: 'x' } }, as(key)))).code).toBe(
        grpc.status.UNAUTHENTICATED,
      );
    }
  });

  it('does not hand a tenant another tenant’s request through a repeated client request id', async () => {
    const { client } = await serve();
    await submit(client, KEYS.acme, 'acme', 'shared-id');
    const err = (await submit(client, KEYS.globex, 'globex', 'shared-id').catch((e: grpc.ServiceError) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.ALREADY_EXISTS);
    expect(err.details).toMatch(/request_id/);
    // The owner's repeat is the idempotent submit it always was.
    const again = await call<{ reqId: string; existing: boolean }>(
      client,
      'Submit',
      { model: 'test/model', params: { prompt: 'acme' }, requestId: 'shared-id' },
      KEYS.acme,
    );
    expect(again).toMatchObject({ reqId: 'shared-id', existing: true });
  });

  it('carries the tenant to the stages with the task', async () => {
    const log = silentLogger();
    const seen: Array<string | undefined> = [];
    const scheduler = newScheduler({ maxAttempts: 1 }, { registry });
    scheduler.addInstance(
      new LocalInstance(
        'dit-1',
        'dit',
        {
          stage: 'denoising',
          models: () => [],
          async execute(task) {
            seen.push(task.tenant);
            return { outputs: {} };
          },
        },
        1,
        log,
      ),
    );
    const state = await scheduler.submit({ model: 'test/model', params: { prompt: 'x' }, tenant: 'acme' });
    expect(await outcome(scheduler, state.context.reqId)).toBe('completed');
    expect(seen).toEqual(['acme']);
    expect((await scheduler.get(state.context.reqId)).context.tenant).toBe('acme');
    await scheduler.stop();
  });
});
