import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '@diffmesh/core';
import { describeUnreachable, NO_UPSTREAM } from './connection-errors.js';
import { backoffDelay, describeWait, isServiceUnreachable, Waiting } from './wait-policy.js';

const refused = new DiffmeshError(
  Code.UNAVAILABLE,
  'TRANSPORT',
  'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:5000',
);
const draining = new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'the scheduler is draining');
const noneKnown = describeUnreachable('scheduler', [], refused);

describe('which failures wait for a restarting service', () => {
  it('waits when no instance can be reached: refused, draining, or none known', () => {
    expect(isServiceUnreachable(refused)).toBe(true);
    expect(isServiceUnreachable(draining)).toBe(true);
    expect(noneKnown.metadata[NO_UPSTREAM]).toBe('scheduler');
    expect(isServiceUnreachable(noneKnown)).toBe(true);
  });

  it('never waits on an answer about the call', () => {
    for (const e of [
      new DiffmeshError(Code.NOT_FOUND, 'REQUEST_NOT_FOUND', 'no request r1'),
      new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'bad width'),
      new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'QUEUE_FULL', 'the queue is full'),
      new DiffmeshError(Code.DEADLINE_EXCEEDED, 'TIMEOUT', 'deadline exceeded'),
      // A scheduler's own answer: a stage pool of the model has no instance.
      new DiffmeshError(Code.UNAVAILABLE, 'POOL_UNAVAILABLE', 'no instance in pool dit'),
    ]) {
      expect(isServiceUnreachable(e), e.message).toBe(false);
      expect(new Waiting({ maxWaitMs: 60_000 }).next(e, 'scheduler', ['a:1'])).toBeUndefined();
    }
  });
});

describe('backoff', () => {
  it('doubles from the initial delay up to the largest', () => {
    const policy = { maxWaitMs: 60_000, initialDelayMs: 100, maxDelayMs: 1000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(policy, n))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(backoffDelay({ maxWaitMs: 1 }, 1)).toBe(250);
    expect(backoffDelay({ maxWaitMs: 1 }, 10)).toBe(1000);
  });

  it('takes at most the jitter share off each sleep', () => {
    const low = new Waiting(
      { maxWaitMs: 60_000, initialDelayMs: 1000, jitter: 0.2 },
      () => 0,
      () => 0.999,
    );
    const none = new Waiting(
      { maxWaitMs: 60_000, initialDelayMs: 1000, jitter: 0.2 },
      () => 0,
      () => 0,
    );
    expect(low.next(refused, 'scheduler', [])!.delayMs).toBe(800);
    expect(none.next(refused, 'scheduler', [])!.delayMs).toBe(1000);
  });
});

describe('Waiting', () => {
  it('counts from the first failure and gives up once the policy’s time is spent, the last sleep cut to what is left', () => {
    let now = 5_000;
    const w = new Waiting({ maxWaitMs: 2_000, initialDelayMs: 500, maxDelayMs: 1000, jitter: 0 }, () => now);
    const seen: Array<[number, number, number]> = [];
    for (;;) {
      const n = w.next(refused, 'scheduler', ['127.0.0.1:5000']);
      if (!n) break;
      seen.push([n.attempt, n.waitedMs, n.delayMs]);
      now += n.delayMs;
    }
    expect(seen).toEqual([
      [1, 0, 500],
      [2, 500, 1000],
      [3, 1500, 500],
    ]);
    expect(now - 5_000).toBe(2_000);
  });

  it('fails at once with maxWaitMs 0', () => {
    expect(new Waiting({ maxWaitMs: 0 }).next(refused, 'scheduler', [])).toBeUndefined();
  });

  it('says what it waits for and why', () => {
    const n = new Waiting({ maxWaitMs: 30_000, jitter: 0 }, () => 0).next(refused, 'scheduler', ['127.0.0.1:5000'])!;
    expect(n).toMatchObject({ service: 'scheduler', addresses: ['127.0.0.1:5000'], cause: 'connection refused', attempt: 1 });
    expect(describeWait(n)).toBe('waiting for the scheduler at 127.0.0.1:5000 (connection refused); retrying for up to 30 s more');
    expect(describeWait({ ...n, addresses: [], waitedMs: 12_400 })).toBe(
      'waiting for the scheduler (none known yet) (connection refused); retrying for up to 18 s more',
    );
  });
});
