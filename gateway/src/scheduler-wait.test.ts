import { describe, expect, it } from 'vitest';
import { schedulerWaitFor } from './scheduler-wait.js';

const policy = { maxWaitMs: 10_000 };
const scheduler = (method: string): string => `/diffmesh.scheduler.v1.SchedulerService/${method}`;

describe('which proto-route calls wait for a restarting scheduler', () => {
  it('the reads and Cancel wait', () => {
    for (const m of ['Get', 'Watch', 'GetResult', 'GetStatus', 'ListModels', 'Cancel']) {
      expect(schedulerWaitFor(scheduler(m), { req_id: 'r1' }, policy), m).toBe(policy);
    }
  });

  it('a Submit or Generate waits only when it names its request_id', () => {
    for (const m of ['Submit', 'Generate']) {
      expect(schedulerWaitFor(scheduler(m), { model: 'm', request_id: 'mine-1' }, policy), m).toBe(policy);
      expect(schedulerWaitFor(scheduler(m), { model: 'm', request_id: '' }, policy), m).toBeUndefined();
      expect(schedulerWaitFor(scheduler(m), { model: 'm' }, policy), m).toBeUndefined();
    }
  });

  it('nothing waits with schedulerWaitMs 0, nor calls to other services', () => {
    expect(schedulerWaitFor(scheduler('Get'), {}, { maxWaitMs: 0 })).toBeUndefined();
    expect(schedulerWaitFor(scheduler('Get'), {}, undefined)).toBeUndefined();
    expect(schedulerWaitFor('/diffmesh.tensor.v1.TensorService/Get', { object_id: 'o' }, policy)).toBeUndefined();
  });
});
