import { credentials } from '@grpc/grpc-js';
import type * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDiffmeshProtos, type DescribeResponse__Output, type WorkRequest__Output } from '@diffmesh/protos';
import { Code, DiffmeshError, type AdapterReport, type ServiceBinding, type StageHandler } from '@diffmesh/core';
import { Fixtures, end, gate, handler, newScheduler, outcome, recordingLogger } from './fixtures/stages.js';

const fx = new Fixtures();
afterEach(() => fx.close());

/**
 * A stage service that answers every assignment at once with a result whose outputs
 * `outputs(model)` gives, as raw wire objects (so they can be ones a scheduler cannot read).
 */
function answeringStage(outputs: (model: string) => Record<string, unknown>): ServiceBinding {
  const proto = loadDiffmeshProtos();
  return {
    name: 'diffmesh.stage.v1.StageService',
    definition: proto.diffmesh.stage.v1.StageService.service,
    implementation: {
      Execute: (call: grpc.ServerWritableStream<unknown, unknown>) => call.end(),
      Describe: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, {}),
      Work: (call: grpc.ServerDuplexStream<WorkRequest__Output, unknown>) => {
        call.on('data', (msg: WorkRequest__Output) => {
          const t = msg.assignment?.task;
          if (!t) return;
          call.write({ result: { reqId: t.reqId, stageIndex: t.stageIndex, attempt: t.attempt, outputs: outputs(t.model) } });
        });
        call.on('end', () => call.end());
      },
    },
  };
}

describe('RemoteInstance', async () => {
  it('fails a task whose answer it cannot read with INTERNAL (retried, logged); other requests carry on', async () => {
    // A newer worker answers m2's tasks with a ref whose dtype this scheduler does not know.
    const address = await fx.server(
      answeringStage((model) => (model === 'm2' ? { x: { objectId: 'r:x:1', name: 'x', dtype: 'DTYPE_UNSPECIFIED' } } : {})),
    );
    const { log, lines } = recordingLogger();
    const s = newScheduler({ maxAttempts: 2 });
    // (A breaker that counts the two failures would take the instance out: not what this is about.)
    s.addInstance(fx.remote(address, { capacity: 2, log, breaker: { volumeThreshold: 100 } }));
    const bad = (await s.submit({ model: 'm2', params: { prompt: 'x' } })).context.reqId;
    const good = (await s.submit({ model: 'm1', params: { prompt: 'y' } })).context.reqId;

    expect(await end(s, bad)).toMatchObject({ type: 'failed', error: { code: Code.INTERNAL, reason: 'INTERNAL' } });
    expect((await s.get(bad)).timings[0].attempts).toBe(2);
    expect(await outcome(s, good)).toBe('completed');
    expect(lines.filter((l) => l.msg === 'unreadable answer from a stage instance').map((l) => l.reqId)).toEqual([bad, bad]);
    // The instance still serves.
    expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'z' } })).context.reqId)).toBe('completed');
  });

  it('dispatches a task that waited out an open breaker as soon as the breaker goes half-open', async () => {
    let calls = 0;
    const address = await fx.stageServer(
      handler(async () => {
        calls += 1;
        if (calls === 1) throw new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'flaky');
        return { outputs: {} };
      }),
    );
    const s = newScheduler({ maxAttempts: 3, retryBackoffMs: 1 });
    const r = fx.remote(address, { breaker: { volumeThreshold: 1, resetTimeoutMs: 300 } });
    s.addInstance(r);
    const id = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    // The first try fails and opens the breaker; the retry waits in the queue, and nothing
    // else happens on the scheduler.
    await expect.poll(() => r.breakerState(), { timeout: 10_000 }).toBe('open');
    await expect.poll(async () => (await s.get(id)).context.status, { timeout: 15_000 }).toBe('completed');
    expect((await s.get(id)).timings[0].attempts).toBe(2);
  });

  it('sends one probe through a half-open breaker; the other tasks wait for it, and none loses a try', async () => {
    let calls = 0;
    const probe = gate();
    const address = await fx.stageServer(
      handler(async () => {
        calls += 1;
        if (calls === 1) throw new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'flaky');
        await probe.wait;
        return { outputs: {} };
      }),
      { capacity: 3 },
    );
    const s = newScheduler({ maxAttempts: 2, retryBackoffMs: 1 });
    const r = fx.remote(address, { capacity: 3, breaker: { volumeThreshold: 1, resetTimeoutMs: 300 } });
    s.addInstance(r);
    const first = (await s.submit({ model: 'm1', params: { prompt: 'x' } })).context.reqId;
    // Its first try fails and opens the breaker; its second is the half-open probe.
    await expect.poll(() => calls, { timeout: 15_000 }).toBe(2);
    expect(r.breakerState()).toBe('half-open');
    const others: string[] = [];
    for (const i of [1, 2]) others.push((await s.submit({ model: 'm1', params: { prompt: `p${i}` } })).context.reqId);
    // Slots are free, but the breaker would refuse them: they wait.
    expect((await s.queueSizes()).enc).toBe(2);
    expect(calls).toBe(2);
    probe.release();
    for (const id of [first, ...others]) expect(await outcome(s, id)).toBe('completed');
    expect(await Promise.all(others.map(async (id) => (await s.get(id)).timings[0].attempts))).toEqual([1, 1]);
    expect(r.breakerState()).toBe('closed');
    expect(calls).toBe(4);
  });

  it('keeps a breaker open when its half-open probe is cancelled by its request, and probes again later', async () => {
    let calls = 0;
    const address = await fx.stageServer(
      handler((_task, ctx) => {
        calls += 1;
        if (calls === 1) return Promise.reject(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'flaky'));
        if (calls === 2) return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
        return Promise.resolve({ outputs: {} });
      }),
    );
    const s = newScheduler({ maxAttempts: 1 });
    const r = fx.remote(address, { breaker: { volumeThreshold: 1, resetTimeoutMs: 1500 } });
    s.addInstance(r);
    expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'fails' } })).context.reqId)).toBe('TRANSPORT');
    await expect.poll(() => r.breakerState(), { timeout: 10_000 }).toBe('half-open');
    const probe = (await s.submit({ model: 'm1', params: { prompt: 'probe' } })).context.reqId;
    await expect.poll(() => calls, { timeout: 10_000 }).toBe(2);
    await s.cancel(probe);
    expect(await outcome(s, probe)).toBe('cancelled');
    // The instance confirms the cancel; nothing was learned about it: the breaker is not
    // closed, and the next probe decides.
    await expect.poll(() => r.breakerState(), { timeout: 10_000, interval: 5 }).not.toBe('half-open');
    expect(r.breakerState()).toBe('open');
    await expect.poll(() => r.breakerState(), { timeout: 10_000 }).toBe('half-open');
    expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'next probe' } })).context.reqId)).toBe('completed');
    expect(r.breakerState()).toBe('closed');
  });

  it("counts a task its stage deadline stopped as a failure: a hung instance's breaker opens, and a hung probe reopens it", async () => {
    // Hangs until cancelled, then confirms with CANCELLED, as a stage service does.
    const address = await fx.stageServer(
      handler((_task, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)))),
    );
    const s = newScheduler({ stageTimeoutMs: 100, maxAttempts: 1 });
    const r = fx.remote(address, { breaker: { volumeThreshold: 2, resetTimeoutMs: 300 } });
    s.addInstance(r);
    for (let i = 0; i < 2; i += 1) {
      expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: `p${i}` } })).context.reqId)).toBe('TIMEOUT');
    }
    await expect.poll(() => r.breakerState(), { timeout: 10_000 }).toBe('open');
    await expect(s.submit({ model: 'm1', params: { prompt: 'x' } })).rejects.toThrow(/no healthy instance/);

    await expect.poll(() => r.breakerState(), { timeout: 10_000 }).toBe('half-open');
    expect(await outcome(s, (await s.submit({ model: 'm1', params: { prompt: 'probe' } })).context.reqId)).toBe('TIMEOUT');
    await expect.poll(() => r.breakerState(), { timeout: 10_000 }).toBe('open');
  });

  it('follows the adapters a stage reports over its Work stream (again when they change), and Describe tells them', async () => {
    const report: AdapterReport = { held: [], available: ['ink', 'pencil'] };
    const listeners = new Set<() => void>();
    const stage: StageHandler = {
      ...handler(() => Promise.resolve({ outputs: {} })),
      adapters: () => ({ held: [...report.held], available: [...report.available] }),
      onAdaptersChange: (l) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    };
    const address = await fx.stageServer(stage);
    const r = fx.remote(address);
    expect(await r.attached).toBe('ready');
    expect(r.adapters()).toEqual({ held: [], available: ['ink', 'pencil'] });
    // The stage loads ink (and its folder gains chalk): a new status says so.
    report.held.push('ink');
    report.available.push('chalk');
    for (const l of listeners) l();
    await expect.poll(() => r.adapters(), { timeout: 10_000 }).toEqual({ held: ['ink'], available: ['ink', 'pencil', 'chalk'] });
    const client = new (loadDiffmeshProtos().diffmesh.stage.v1.StageService)(address, credentials.createInsecure());
    try {
      const described = await new Promise<DescribeResponse__Output>((resolve, reject) =>
        client.Describe({}, (err: Error | null, res?: DescribeResponse__Output) =>
          err ? reject(err) : resolve(res as DescribeResponse__Output),
        ),
      );
      expect(described.adapters).toEqual({ held: ['ink'], available: ['ink', 'pencil', 'chalk'] });
    } finally {
      client.close();
    }
  });

  it('knows no adapters of a stage that does not report them', async () => {
    const r = fx.remote(await fx.stageServer(handler(() => Promise.resolve({ outputs: {} }))));
    expect(await r.attached).toBe('ready');
    expect(r.adapters()).toBeUndefined();
  });
});
