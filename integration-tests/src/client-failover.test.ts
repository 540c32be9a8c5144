/**
 * The client library fails over: with two schedulers on a shared queue (redis), a generation
 * whose scheduler is killed with SIGKILL mid-run goes on through the other one, re-attached by
 * request id, and the caller sees one sequence of events — no gap, no repeat, one completion.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchedulerClient, eventFromWire } from '@diffmesh/client';
import { paramsToWire, silentLogger, type RequestEvent } from '@diffmesh/core';
import type { RequestEvent__Output } from '@diffmesh/protos';
import { startTestMesh, type TestMesh } from './harness.js';

let t: TestMesh;
beforeAll(async () => {
  t = await startTestMesh({ queue: 'redis', replicas: { scheduler: 2 } });
}, 180_000);
afterAll(async () => {
  await t?.stop();
});

describe('SchedulerClient with two schedulers on a shared queue', () => {
  it('carries a generation over to the other scheduler when its own is killed, without a gap or a repeat', async () => {
    const [first, second] = t.mesh.schedulerAddresses;
    expect(second).toBeDefined();
    // The first address takes the request; the second is there to fail over to.
    const client = new SchedulerClient({ addresses: [first, second], log: silentLogger(), reattachTimeoutMs: 60_000 });
    const wire: RequestEvent__Output[] = [];
    let killed = false;
    try {
      for await (const e of client.generate({
        model: 'diffmesh/tiny-shapes',
        params: paramsToWire({ prompt: 'an orange square', width: 64, height: 64, numInferenceSteps: 120 }),
      })) {
        wire.push(e);
        const domain = eventFromWire(e);
        if (!killed && domain?.type === 'progress' && domain.stage === 'denoising' && domain.step >= 5) {
          killed = true;
          t.mesh.supervisor.get(t.mesh.schedulers[0])?.child.kill('SIGKILL');
        }
      }
    } finally {
      await client.close();
    }
    expect(killed).toBe(true);
    const sequences = wire.map((e) => e.sequence);
    expect(sequences).toEqual(sequences.map((_, i) => i + 1)); // dense from 1: nothing missed, nothing twice
    const events = wire.map((e) => eventFromWire(e)).filter((e): e is RequestEvent => e !== undefined);
    expect(events.filter((e) => e.type === 'completed')).toHaveLength(1);
    expect(events.at(-1)?.type).toBe('completed');
    expect(new Set(events.map((e) => e.reqId)).size).toBe(1);
  });
});
