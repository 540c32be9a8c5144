import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '@diffmesh/core';
import { classifyTaskEnd, type TrySeen } from './task-end.js';
import { TaskRefused } from './types.js';

const seen = (over: Partial<TrySeen> = {}): TrySeen => ({
  stage: 'denoising',
  leaseLost: false,
  handedBack: false,
  requestEnded: false,
  timedOut: false,
  instanceGone: () => false,
  ...over,
});

const transport = new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'dispatch stream ended');
const draining = new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'shutting down');

describe('classifyTaskEnd', () => {
  it('names each way a try ends', () => {
    expect(classifyTaskEnd({ result: { outputs: {} } }, seen()).kind).toBe('completed');
    expect(classifyTaskEnd({ result: { outputs: {} } }, seen({ leaseLost: true })).kind).toBe('superseded');
    expect(classifyTaskEnd({ rejected: transport }, seen({ leaseLost: true })).kind).toBe('superseded');
    expect(classifyTaskEnd({ rejected: new TaskRefused('breaker open') }, seen()).kind).toBe('refused');
    expect(classifyTaskEnd({ rejected: draining }, seen()).kind).toBe('handed-back');
    expect(classifyTaskEnd({ rejected: new Error('stopped') }, seen({ handedBack: true })).kind).toBe('handed-back');
    expect(classifyTaskEnd({ rejected: new Error('stopped') }, seen({ requestEnded: true })).kind).toBe('request-ended');
    expect(classifyTaskEnd({ rejected: transport }, seen({ instanceGone: () => true })).kind).toBe('lost');
  });

  it('decides in order: a refusal is never a hand-back, a hand-back never a loss, an ended request never a failure', () => {
    const refused = new TaskRefused('breaker open');
    expect(classifyTaskEnd({ rejected: refused }, seen({ handedBack: true, requestEnded: true })).kind).toBe('refused');
    expect(classifyTaskEnd({ rejected: transport }, seen({ handedBack: true, instanceGone: () => true })).kind).toBe('handed-back');
    expect(classifyTaskEnd({ rejected: transport }, seen({ requestEnded: true, instanceGone: () => true })).kind).toBe('request-ended');
  });

  it('tells retryable failures, and those that may come from a lost input', () => {
    expect(classifyTaskEnd({ rejected: transport }, seen())).toMatchObject({ kind: 'failed', retryable: true, inputsMayBeLost: true });
    const notFound = new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', 'gone');
    expect(classifyTaskEnd({ rejected: notFound }, seen())).toMatchObject({ kind: 'failed', retryable: false, inputsMayBeLost: true });
    const bad = new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'bad');
    expect(classifyTaskEnd({ rejected: bad }, seen())).toMatchObject({ kind: 'failed', retryable: false, inputsMayBeLost: false });
    const timedOut = classifyTaskEnd({ rejected: new Error('aborted') }, seen({ timedOut: true }));
    expect(timedOut).toMatchObject({ kind: 'failed', retryable: true, inputsMayBeLost: false, error: { reason: 'TIMEOUT' } });
  });
});
