import { describe, expect, it } from 'vitest';
import { Cancellation } from './abort.js';

describe('Cancellation', () => {
  it('runs callbacks once with the reason and aborts a signal taken before or after', () => {
    const c = new Cancellation();
    const early = c.signal;
    const seen: unknown[] = [];
    c.onCancel((r) => seen.push(r));
    const removed = c.onCancel(() => seen.push('removed'));
    removed();
    expect(c.aborted).toBe(false);
    c.cancel('stop');
    c.cancel('again');
    expect(seen).toEqual(['stop']);
    expect(early.aborted).toBe(true);
    expect(early.reason).toBe('stop');
    expect(c.signal.aborted).toBe(true);
    expect(c.reason).toBe('stop');
    expect(c.timedOut()).toBe(false);
  });

  it('calls a callback registered after the cancel at once', () => {
    const c = new Cancellation();
    c.cancel(new Error('gone'));
    let got: unknown;
    c.onCancel((r) => (got = r));
    expect((got as Error).message).toBe('gone');
  });

  it('cancels itself at its deadline with the timeout error, and says it timed out', async () => {
    const c = new Cancellation(20, () => new Error('too slow'));
    const reason = await new Promise((resolve) => c.onCancel(resolve));
    expect((reason as Error).message).toBe('too slow');
    expect(c.timedOut()).toBe(true);
    expect(c.signal.aborted).toBe(true);
  });

  it('never fires after dispose', async () => {
    const c = new Cancellation(10);
    let fired = false;
    c.onCancel(() => (fired = true));
    c.dispose();
    await new Promise((r) => setTimeout(r, 40));
    expect(fired).toBe(false);
    expect(c.aborted).toBe(false);
  });
});
