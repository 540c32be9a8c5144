import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSdDir } from '@diffmesh/models';
import { Code, DiffmeshError, silentLogger, type Logger } from '@diffmesh/core';
import { availableExecutionProviders, ort, SessionCache } from '@diffmesh/stage-host';

// Model runs and the thread that called them, with a UNet whose call takes about a second
// (sd1-slow's extra matrix products): the caller's event loop keeps turning while it runs.
let root: string;
let unet: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-runner-'));
  await buildSdDir(path.join(root, 'slow'), { scalingFactor: 0.5, extraWork: { size: 2048, products: 6 } });
  unet = path.join(root, 'slow', 'unet', 'model.onnx');
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function feeds(): Record<string, ort.Tensor> {
  return {
    sample: new ort.Tensor('float32', new Float32Array(2 * 4 * 8 * 8).fill(0.1), [2, 4, 8, 8]),
    timestep: new ort.Tensor('int64', BigInt64Array.of(500n), []),
    encoder_hidden_states: new ort.Tensor('float32', new Float32Array(2 * 77 * 32), [2, 77, 32]),
  };
}

/** Runs one model call and says whether a 20 ms timer set at its start fired before it ended. */
async function timerDuringRun(sessions: SessionCache): Promise<{ timerFirst: boolean; out: Float32Array }> {
  const session = await sessions.get(unet);
  await session.run(feeds()); // the first run allocates; not the one looked at
  let runDone = false;
  let timerFirst: boolean | undefined;
  const timer = new Promise<void>((resolve) =>
    setTimeout(() => {
      timerFirst = !runDone;
      resolve();
    }, 20),
  );
  const out = (await session.run(feeds())).out_sample.data as Float32Array;
  runDone = true;
  await timer;
  return { timerFirst: timerFirst === true, out };
}

describe('runner threads', () => {
  it('keep the calling thread free while a model runs; runs on the calling thread block it', async () => {
    const threaded = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
    const inline = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, runnerThreads: 0 });
    try {
      const a = await timerDuringRun(threaded);
      const b = await timerDuringRun(inline);
      expect(a.timerFirst).toBe(true);
      expect(b.timerFirst).toBe(false);
      // Same model, same inputs: the same numbers either way.
      expect(Array.from(a.out)).toEqual(Array.from(b.out));
      expect(threaded.runnerCount).toBe(1);
      expect(inline.runnerCount).toBe(0);
    } finally {
      await threaded.close();
      await inline.close();
    }
  });

  it('answer a run cancelled while it runs at once, drop one cancelled before its turn, and go on', async () => {
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
    try {
      const session = await sessions.get(unet);
      const first = new AbortController();
      const second = new AbortController();
      const running = session.run(feeds(), { signal: first.signal });
      const queued = session.run(feeds(), { signal: second.signal });
      const why = new DiffmeshError(1, 'CANCELLED', 'cancelled by the test');
      first.abort(why);
      second.abort(why);
      await expect(running).rejects.toBe(why);
      await expect(queued).rejects.toBe(why);
      // The thread finishes the abandoned run and takes the next.
      const out = await session.run(feeds());
      expect(out.out_sample.dims).toEqual([2, 4, 8, 8]);
    } finally {
      await sessions.close();
    }
  });

  it('fail the runs waiting on a thread that is closed, with UNAVAILABLE', async () => {
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
    const session = await sessions.get(unet);
    const pending = session.run(feeds()).catch((e: unknown) => e);
    await sessions.close();
    const err = await pending;
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).code).toBe(Code.UNAVAILABLE);
  });

  it('give a model file several threads when asked, and load it on each', async () => {
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, runnerThreads: 2 });
    try {
      const session = await sessions.get(unet);
      const outs = await Promise.all([session.run(feeds()), session.run(feeds())]);
      expect(sessions.runnerCount).toBe(2);
      expect(Array.from(outs[0].out_sample.data as Float32Array)).toEqual(Array.from(outs[1].out_sample.data as Float32Array));
    } finally {
      await sessions.close();
    }
  });

  it('try the providers in the order given and say which one each session got', async () => {
    const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
    const record = (level: string) => (fields: Record<string, unknown>, msg: string) => lines.push({ level, msg, fields });
    const log = { ...silentLogger(), info: record('info'), warn: record('warn') } as unknown as Logger;
    // CUDA is not installed on these machines: the sessions fall back to the CPU, and say so.
    const cudaHere = availableExecutionProviders().includes('cuda');
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, executionProviders: ['cuda', 'cpu'], log });
    try {
      const session = await sessions.get(unet);
      expect(session.provider).toBe(cudaHere ? 'cuda' : 'cpu');
      expect(lines).toContainEqual(expect.objectContaining({ level: 'info', msg: `model session on ${session.provider}` }));
      if (!cudaHere) {
        expect(lines).toContainEqual(
          expect.objectContaining({
            level: 'warn',
            msg: 'execution provider cuda could not load the model',
            fields: expect.objectContaining({ error: 'not installed here' }),
          }),
        );
      }
    } finally {
      await sessions.close();
    }
  });
});
