import { afterEach, describe, expect, it } from 'vitest';
import type { RequestEvent } from '@diffmesh/core';
import { generate, last, startTestMesh, type TestMesh } from './harness.js';

// Each test starts its own mesh of separate processes: one DiT slot, so a video fills the pool.
let t: TestMesh | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

// 512×512 × 8 frames: a step of tens of ms even on a fast machine (the image reaches the DiT queue well before the video ends).
const video = { prompt: 'a green square moving right', seed: '7', width: 512, height: 512, numFrames: 8, numInferenceSteps: 40 };
const image = { prompt: 'a red circle', seed: '3', width: 64, height: 64, numInferenceSteps: 4 };

function pixelsOf(events: RequestEvent[]) {
  const e = last(events);
  if (e.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(e)}`);
  return e.outputs.pixels;
}

function denoising<T extends RequestEvent['type']>(events: RequestEvent[], type: T): Array<Extract<RequestEvent, { type: T }>> {
  return events.filter((e): e is Extract<RequestEvent, { type: T }> => e.type === type && 'stage' in e && e.stage === 'denoising');
}

describe.each(['memory', 'sqlite', 'redis'] as const)('step-boundary preemption (%s queue)', (queue) => {
  it('a high-priority image takes the DiT slot of a running video within a step; the video resumes with the same pixels', async () => {
    t = await startTestMesh({ queue, capacities: { 'dit-svc': 1 }, schedulerArgs: ['--preempt-min-run-ms', '100'] });
    const client = t.client;
    // The video alone: the reference pixels.
    const alone = await generate(client, { params: video });
    expect(denoising(alone, 'preempted')).toEqual([]);
    const reference = Buffer.from((await t.store.get(pixelsOf(alone))).data);

    // The same video again; once it has made a few steps, an image at priority 10 arrives.
    let imageRun: Promise<RequestEvent[]> | undefined;
    const stepTimes: number[] = [];
    const videoRun = generate(client, { params: video }, (e) => {
      if (e.type === 'progress' && e.stage === 'denoising') {
        stepTimes.push(e.at);
        if (e.step >= 3 && !imageRun) imageRun = generate(client, { params: image, priority: 10 });
      }
    });
    const videoEvents = await videoRun;
    expect(imageRun).toBeDefined();
    const imageEvents = await imageRun!;
    expect(last(imageEvents).type).toBe('completed');

    // The video was preempted once, at a step boundary, and went on from there in its next try.
    const preempted = denoising(videoEvents, 'preempted');
    expect(preempted.length).toBe(1);
    expect(preempted[0].reason).toBe('priority 10 > 0');
    expect(preempted[0].step).toBeGreaterThanOrEqual(3);
    expect(preempted[0].step).toBeLessThan(video.numInferenceSteps);
    const starts = denoising(videoEvents, 'stage_started');
    expect(starts.map((s) => s.attempt)).toEqual([1, 2]);
    // The resumed try reports steps after the one it stopped at (no step is run twice).
    const after = videoEvents.slice(videoEvents.indexOf(starts[1]));
    const resumedSteps = denoising(after, 'progress').map((p) => p.step);
    expect(resumedSteps[0]).toBe(preempted[0].step + 1);
    expect(last(videoEvents).type).toBe('completed');

    // The image ran while the video waited: it started before the video's second try, within
    // about one video step of reaching the DiT queue.
    const imageQueued = imageEvents.find((e) => e.type === 'queued' && e.stage === 'denoising')!;
    const imageStarted = denoising(imageEvents, 'stage_started')[0];
    expect(imageStarted.at).toBeLessThanOrEqual(starts[1].at);
    const steps = stepTimes
      .slice(1)
      .map((at, i) => at - stepTimes[i])
      .sort((a, b) => a - b);
    const videoStepMs = steps[Math.floor(steps.length / 2)];
    // One step to reach the boundary, plus the checkpoint write and the dispatch (generous for CI).
    expect(imageStarted.at - imageQueued.at).toBeLessThan(2 * videoStepMs + 1000);

    // Same pixels as alone, byte for byte.
    const resumed = Buffer.from((await t.store.get(pixelsOf(videoEvents))).data);
    expect(resumed.equals(reference)).toBe(true);
  });
});
