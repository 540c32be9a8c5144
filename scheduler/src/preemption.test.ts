import { describe, expect, it } from 'vitest';
import { chooseVictim, deadlineAtRisk, urgency, type RunningTask } from './preemption.js';

const run = (o: Partial<RunningTask>): RunningTask => ({
  priority: 0,
  deadline: 0,
  step: 5,
  totalSteps: 50,
  ranMs: 5000,
  progressed: true,
  stopping: false,
  fits: true,
  ...o,
});

describe('preemption: the victim', () => {
  it('takes the lowest priority, then the most steps left', () => {
    const a = run({ priority: 1, step: 2 });
    const b = run({ priority: 0, step: 40 });
    const c = run({ priority: 0, step: 10 });
    const got = chooseVictim({ priority: 10, deadline: 0, atRisk: false }, [a, b, c], 1000);
    expect(got.victim).toBe(c);
    expect(got.reason).toBe('priority 10 > 0');
  });

  it('never preempts for an equal or lower priority without a deadline at risk', () => {
    expect(chooseVictim({ priority: 0, deadline: 0, atRisk: false }, [run({})], 0).victim).toBeUndefined();
    expect(chooseVictim({ priority: 0, deadline: 1, atRisk: true }, [run({})], 0).reason).toBe('deadline at risk');
    // A running task with an earlier deadline keeps its slot.
    expect(urgency({ priority: 0, deadline: 100, atRisk: true }, { priority: 0, deadline: 50 })).toBeUndefined();
  });

  it('is bounded: a minimum run, a step of progress in this try, steps left, once per try, an instance that fits', () => {
    const w = { priority: 10, deadline: 0, atRisk: false };
    expect(chooseVictim(w, [run({ ranMs: 500 })], 1000)).toEqual({ later: true });
    expect(chooseVictim(w, [run({ progressed: false })], 1000)).toEqual({ later: true });
    expect(chooseVictim(w, [run({ step: 50 })], 1000).victim).toBeUndefined();
    expect(chooseVictim(w, [run({ totalSteps: 1, step: 0 })], 1000).victim).toBeUndefined();
    expect(chooseVictim(w, [run({ stopping: true })], 1000)).toEqual({ later: false });
    expect(chooseVictim(w, [run({ fits: false })], 1000)).toEqual({ later: false });
  });

  it('a deadline is at risk when waiting for the soonest free slot ends past it', () => {
    expect(deadlineAtRisk(0, 1000, 300, 800)).toBe(true);
    expect(deadlineAtRisk(0, 1000, 300, 600)).toBe(false);
    expect(deadlineAtRisk(0, 1000, undefined, 600)).toBe(false);
    expect(deadlineAtRisk(0, 0, 300, 800)).toBe(false);
  });
});
