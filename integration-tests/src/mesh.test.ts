import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code, type RequestEvent } from '@diffmesh/core';
import { toBytes } from '@diffmesh/tensor-client';
import { cancel, embeddedPixels, generate, get, last, rejection, startTestMesh, submit, watch, type TestMesh } from './harness.js';

// One mesh — nats-server, tensor-svc, scheduler, encoder-svc, dit-svc, vae-svc, each its own
// process — shared by the tests of this file. Every object goes through tensor-svc here
// (no small objects passed by value), so the transfers and deletes are exercised, and every
// denoising step is reported.
let t: TestMesh;
beforeAll(async () => {
  t = await startTestMesh({
    stageArgs: ['--inline-max-bytes', '0', '--progress-interval-ms', '0'],
  });
}, 120_000);
afterAll(async () => {
  await t?.stop();
});

function outputsOf(events: RequestEvent[]) {
  const e = last(events);
  if (e.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(e)}`);
  return e.outputs;
}

describe('a mesh of separate processes', () => {
  it('generates an image end to end, identical to the embedded runtime for the same seed', async () => {
    const params = { prompt: 'a red circle on a blue background', seed: '42', width: 128, height: 128 };
    const events = await generate(t.client, { params });
    expect(events.map((e) => e.type)).toContain('stage_finished');
    const stages = events.flatMap((e) => (e.type === 'stage_started' ? [e.stage] : []));
    expect(stages).toEqual(['text_encoding', 'denoising', 'vae_decoding']);
    const steps = events.flatMap((e) => (e.type === 'progress' && e.stage === 'denoising' ? [e.step] : []));
    expect(steps).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const pixels = outputsOf(events).pixels;
    expect(pixels.shape).toEqual([1, 128, 128, 3]);
    expect(pixels.ownerAddress).toBe(t.mesh.tensorAddress);
    const meshBytes = (await t.store.get(pixels)).data;
    const [localBytes] = await embeddedPixels([params]);
    expect(Buffer.from(meshBytes).equals(localBytes)).toBe(true);
  });

  it('generates a video end to end', async () => {
    const events = await generate(t.client, {
      params: { prompt: 'a green square on a black background', width: 64, height: 64, numFrames: 8, numInferenceSteps: 8 },
    });
    expect(outputsOf(events).pixels.shape).toEqual([8, 64, 64, 3]);
  });

  it('reports a request with Get and replays its events with Watch', async () => {
    const { reqId } = await submit(t.client, { params: { prompt: 'a white triangle', width: 64, height: 64, numInferenceSteps: 5 } });
    const events = await watch(t.client, reqId);
    expect(last(events).type).toBe('completed');
    const state = await get(t.client, reqId);
    expect(state.status).toBe('REQUEST_STATUS_COMPLETED');
    expect(state.timings.map((x) => x.stage)).toEqual(['STAGE_NAME_TEXT_ENCODING', 'STAGE_NAME_DENOISING', 'STAGE_NAME_VAE_DECODING']);
    expect(state.step).toBe(1);
    expect(state.results.map((r) => r.name)).toEqual(['pixels']);
    const again = await watch(t.client, reqId);
    expect(again.map((e) => e.type)).toEqual(events.map((e) => e.type));
  });

  it('cancels mid-denoise: stepping stops within a step and intermediates are deleted', async () => {
    let cancelSentAt = 0;
    let reqId = '';
    // 512×512 makes a step long enough that the cancel reaches the DiT within a step or two.
    const events = await generate(
      t.client,
      { params: { prompt: 'a blue circle', width: 512, height: 512, numInferenceSteps: 200 } },
      (e) => {
        reqId = e.reqId;
        if (e.type === 'progress' && e.stage === 'denoising' && e.step >= 3 && cancelSentAt === 0) {
          cancelSentAt = Date.now();
          void cancel(t.client, e.reqId);
        }
      },
    );
    expect(last(events).type).toBe('cancelled');
    const progress = events.flatMap((e) => (e.type === 'progress' && e.stage === 'denoising' ? [e] : []));
    const steps = progress.map((e) => e.step);
    // Events come batched, so steps after the one that triggered the cancel may already have
    // run. Those done before Cancel was sent (same clock: one machine) set the bar; the step
    // running when the cancellation arrives is the last (one or two more may have started while
    // the Cancel call was in flight on a loaded machine).
    const doneBeforeCancel = Math.max(...progress.filter((e) => e.at <= cancelSentAt).map((e) => e.step));
    expect(doneBeforeCancel).toBeGreaterThanOrEqual(3);
    expect(Math.max(...steps)).toBeLessThanOrEqual(doneBeforeCancel + 3);
    expect(Math.max(...steps)).toBeLessThan(20);
    const state = await get(t.client, reqId);
    expect(state.status).toBe('REQUEST_STATUS_CANCELLED');
    const encoded = events.find((e) => e.type === 'stage_finished' && e.stage === 'text_encoding');
    if (encoded?.type !== 'stage_finished') throw new Error('text encoding did not finish');
    const err = await rejection(t.store.stat(encoded.outputs.prompt_embeds));
    expect(err.code).toBe(Code.NOT_FOUND);
  });

  it('fails a request for a pool with no instance at once with UNAVAILABLE naming the pool', async () => {
    // 1 s deadline: a request that queued instead of failing fast would end DEADLINE_EXCEEDED.
    const err = await rejection(submit(t.client, { model: 'diffmesh/synthetic-dit-image', params: { prompt: 'x' } }, 1000));
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(err.reason).toBe('POOL_UNAVAILABLE');
    expect(err.message).toMatch(/pool "encoder-synthetic"/);
    expect(err.retryAfterMs).toBeGreaterThan(0);
  });

  it('answers bad requests with the field named and keeps serving', async () => {
    const bad = [
      [{ params: { prompt: '' } }, 'prompt'],
      [{ params: { prompt: 'x', width: 100 } }, 'width'],
      [{ params: { prompt: 'x', numInferenceSteps: 0 } }, 'num_inference_steps'],
      [{ params: { prompt: 'x', guidanceScale: -2 } }, 'guidance_scale'],
    ] as const;
    for (const [spec, field] of bad) {
      const err = await rejection(submit(t.client, spec));
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.field).toBe(field);
    }
    const unknown = await rejection(submit(t.client, { model: 'nobody/nothing', params: { prompt: 'x' } }));
    expect(unknown).toMatchObject({ code: Code.NOT_FOUND, reason: 'UNKNOWN_MODEL' });
    const ok = await generate(t.client, { params: { prompt: 'a red square', width: 64, height: 64, numInferenceSteps: 3 } });
    expect(last(ok).type).toBe('completed');
  });

  it('expires a tensor after its TTL', async () => {
    const ref = await t.store.put(
      // Large enough to be stored, not passed by value.
      { requestId: 'ttl-test', name: 'short-lived', data: toBytes(new Float32Array(64 * 1024)), shape: [64 * 1024], dtype: 'float32' },
      { ttlMs: 300 },
    );
    expect((await t.store.stat(ref)).ref.objectId).toBe(ref.objectId);
    const deadline = Date.now() + 10_000;
    let err;
    while (Date.now() < deadline) {
      try {
        await t.store.get(ref);
        await new Promise((r) => setTimeout(r, 100));
      } catch (e) {
        err = e;
        break;
      }
    }
    expect(err).toMatchObject({ code: Code.NOT_FOUND, reason: 'OBJECT_EXPIRED' });
  });

  it('exports Prometheus metrics from the scheduler, found through discovery', async () => {
    const before = await generate(t.client, { params: { prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 7 } });
    expect(last(before).type).toBe('completed');
    const scheduler = (await t.mesh.discovery.instances()).find((i) => i.name === 'scheduler');
    const url = scheduler?.metadata.metrics_url ?? '';
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const text = await (await fetch(url)).text();
    const value = (pattern: RegExp): number => Number(text.match(pattern)?.[1] ?? NaN);
    expect(value(/^diffmesh_requests_completed_total\{model="diffmesh\/tiny-shapes"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    expect(value(/^diffmesh_requests_submitted_total\{model="diffmesh\/tiny-shapes"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    // Steps are counted by the DiT instance that ran them, on its own endpoint.
    const dit = (await t.mesh.discovery.instances()).find((i) => i.id === 'dit-svc-1');
    const ditText = await (await fetch(dit?.metadata.metrics_url ?? '')).text();
    expect(Number(ditText.match(/^diffmesh_denoising_steps_total\{pool="dit-tiny"\} (\d+)/m)?.[1])).toBeGreaterThanOrEqual(7);
    expect(value(/^diffmesh_worker_idle\{pool="dit-tiny"\} (\d+)/m)).toBe(4);
    expect(value(/^diffmesh_breaker_state\{instance_id="dit-svc-1",pool="dit-tiny"\} (\d+)/m)).toBe(0);
    expect(text).toMatch(/^diffmesh_stage_latency_seconds_bucket\{le="[^"]+",stage="denoising",pool="dit-tiny"\} \d+/m);
  });

  it('lists every registered service with `diffmesh status`', async () => {
    const bin = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));
    const { stdout: out } = await promisify(execFile)(process.execPath, [bin, 'status', '--nats', t.mesh.natsUrl], { timeout: 30_000 });
    for (const name of ['scheduler', 'encoder-svc', 'dit-svc', 'vae-svc']) expect(out).toMatch(new RegExp(`^${name}\\s+0\\.1\\.0`, 'm'));
    expect(out).toMatch(new RegExp(`dit-svc\\s+0\\.1\\.0\\s+dit-tiny\\s+denoising\\s+${t.mesh.nodeId}\\s+127\\.0\\.0\\.1:\\d+\\s+0/4`));
  });
});
