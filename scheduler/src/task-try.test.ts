import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '@diffmesh/core';
import { recordingLogger } from './fixtures/stages.js';
import type { InstanceSlot } from './instances.js';
import { LocalInstance } from './local-instance.js';
import type { Lease } from './storage/types.js';
import { TaskTry } from './task-try.js';
import { TransitionCounts } from './transition-counts.js';

const lease: Lease = {
  item: {
    id: 'r1#0',
    reqId: 'r1',
    stageIndex: 0,
    gen: 1,
    createdAt: 0,
    pool: 'enc',
    queue: 'enc',
    model: 'm1',
    priority: 0,
    enqueuedAt: 0,
    tenant: 'default',
  },
  token: 't1',
  deliveries: 1,
};

function newTry(): { t: TaskTry; counts: TransitionCounts; lines: Array<Record<string, unknown>> } {
  const { log, lines } = recordingLogger();
  const instance = new LocalInstance(
    'enc-1',
    'enc',
    { stage: 'text_encoding', models: () => [], execute: async () => ({ outputs: {} }) },
    1,
    log,
  );
  const slot: InstanceSlot = { instance, active: 1, replaced: [], lastUsed: 0, retiring: false };
  const counts = new TransitionCounts();
  return { t: new TaskTry(lease, slot, 1, log, counts), counts, lines };
}

const stopped = new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'request cancelled');

describe('TaskTry', () => {
  it('moves only as its table allows, and logs and counts each move', () => {
    const { t, counts, lines } = newTry();
    expect(t.transition('answered')).toBe(false);
    expect(t.state).toBe('starting');
    t.running(0);
    expect(t.state).toBe('running');
    expect(t.transition('running')).toBe(false);
    expect(t.transition('answered')).toBe(true);
    expect(t.transition('stopping', 'request-ended')).toBe(false);
    expect(t.transition('done')).toBe(true);
    expect(t.transition('running')).toBe(false);
    expect(counts.all()).toEqual([
      { machine: 'try', from: 'starting', to: 'running', count: 1 },
      { machine: 'try', from: 'running', to: 'answered', count: 1 },
      { machine: 'try', from: 'answered', to: 'done', count: 1 },
    ]);
    expect(lines.filter((l) => l.msg === 'try moved').map((l) => [l.from, l.to, l.reqId])).toEqual([
      ['starting', 'running', 'r1'],
      ['running', 'answered', 'r1'],
      ['answered', 'done', 'r1'],
    ]);
  });

  it('takes a later stop reason only when it ranks higher, and tells classifyTaskEnd the one it has', () => {
    const { t } = newTry();
    const cancel = t.running(0);
    expect(t.stop('preempted', stopped, { reason: 'priority 10 > 0' })).toBe(true);
    expect(t.preempt.signal.aborted).toBe(true);
    expect(cancel.aborted).toBe(false);
    expect(t.seen('text_encoding').preempting?.reason).toBe('priority 10 > 0');
    expect(t.stop('request-ended', stopped)).toBe(true);
    expect(cancel.aborted).toBe(true);
    expect(t.muted).toBe(true);
    // A lower or equal reason does not replace it.
    expect(t.stop('preempted', stopped)).toBe(false);
    expect(t.stop('request-ended', stopped)).toBe(false);
    expect(t.seen('text_encoding')).toMatchObject({ requestEnded: true, handedBack: false, leaseLost: false });
    expect(t.seen('text_encoding').preempting).toBeUndefined();
    expect(t.stop('lease-lost', stopped)).toBe(true);
    expect(t.seen('text_encoding')).toMatchObject({ leaseLost: true, requestEnded: false });
    expect(t.state).toBe('stopping');
    expect(t.why).toBe('lease-lost');
  });

  it('stops a try asked to stop before it was sent as soon as it is sent', () => {
    const { t } = newTry();
    expect(t.stop('handed-back', stopped)).toBe(true);
    const cancel = t.running(0);
    expect(cancel.aborted).toBe(true);
    expect(t.state).toBe('stopping');
    expect(t.seen('text_encoding').handedBack).toBe(true);
  });
});
