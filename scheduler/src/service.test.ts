import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, type GenerateResponse__Output } from '@diffmesh/protos';
import { GrpcServer, PlanRegistry, createTaskQueue, createTensorStore, silentLogger, type StageHandler, type StageName } from '@diffmesh/runtime';
import { LocalInstance } from './local-instance.js';
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
afterEach(async () => {
  for (const s of servers.splice(0)) await s.drain(0);
});

async function serve(eventIntervalMs: number, stageMs: number) {
  const log = silentLogger();
  const scheduler = new Scheduler({
    registry,
    store: createTensorStore({ backend: 'memory' }),
    log,
    limits: { maxQueueLength: 10, maxInFlight: 10, maxAttempts: 1, retryBackoffMs: 1, defaultTimeoutMs: 0, stageTimeoutMs: 0, retentionMs: 60_000 },
    createQueue: (_pool, maxLength) => createTaskQueue({ backend: 'memory', maxLength }),
  });
  for (const [pool, stage] of [['enc', 'text_encoding'], ['dit', 'denoising'], ['vae', 'vae_decoding']] as const) {
    scheduler.addInstance(new LocalInstance(`${pool}-1`, pool, slowStage(stage, stageMs), 1, log));
  }
  const server = await GrpcServer.start({
    address: '127.0.0.1:0',
    services: [schedulerServiceBinding(scheduler, registry, undefined, { eventIntervalMs })],
    log,
  });
  servers.push(server);
  const Client = loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService;
  return new Client(server.address, grpc.credentials.createInsecure());
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

describe('Generate event stream', () => {
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
