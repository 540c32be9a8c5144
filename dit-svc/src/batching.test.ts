import { describe, expect, it } from 'vitest';
import { MicroBatcher } from './batching.js';

/** A batch function that holds every call until released, recording the batches and how many ran at once. */
function held() {
  const batches: number[][] = [];
  const releases: Array<() => void> = [];
  let inFlight = 0;
  let most = 0;
  const run = async (_key: string, items: number[]): Promise<number[]> => {
    batches.push(items);
    inFlight += 1;
    most = Math.max(most, inFlight);
    await new Promise<void>((resolve) => releases.push(resolve));
    inFlight -= 1;
    return items.map((i) => i * 10);
  };
  return { run, batches, releases, most: () => most };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('MicroBatcher', () => {
  it('puts the items of one turn in one batch, and what arrives while it runs in the next', async () => {
    const h = held();
    const b = new MicroBatcher(h.run, 8);
    const first = [b.submit('k', 1), b.submit('k', 2)];
    await tick();
    const later = [b.submit('k', 3), b.submit('k', 4)];
    await tick();
    expect(h.batches).toEqual([[1, 2]]);
    h.releases.shift()?.();
    expect(await Promise.all(first)).toEqual([10, 20]);
    await tick();
    expect(h.batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    h.releases.shift()?.();
    expect(await Promise.all(later)).toEqual([30, 40]);
    expect(h.most()).toBe(1);
  });

  it('two loops a step apart share runs from the second on: the answered items come back before the next batch starts', async () => {
    const batches: string[][] = [];
    // A run answers in a later turn, as a runner thread's does.
    const seen = new MicroBatcher(async (_key: string, items: string[]) => {
      batches.push(items);
      await tick();
      return items;
    }, 8);
    // Each loop submits its next step as soon as its last is answered (a denoising loop).
    const loop = async (name: string, steps: number) => {
      for (let i = 0; i < steps; i += 1) await seen.submit('k', `${name}${i}`);
    };
    const first = loop('a', 4);
    await tick();
    // b starts while a's first step runs.
    const second = loop('b', 3);
    await Promise.all([first, second]);
    expect(batches).toEqual([['a0'], ['b0', 'a1'], ['b1', 'a2'], ['b2', 'a3']]);
  });

  it('runs up to `concurrency` batches of a key at once, each of what was ready', async () => {
    const h = held();
    const b = new MicroBatcher(h.run, 8, 2);
    const a = b.submit('k', 1);
    await tick();
    const c = [b.submit('k', 2), b.submit('k', 3)];
    await tick();
    const d = b.submit('k', 4); // both slots busy: waits
    await tick();
    expect(h.batches).toEqual([[1], [2, 3]]);
    expect(h.most()).toBe(2);
    h.releases.shift()?.();
    expect(await a).toBe(10);
    await tick();
    expect(h.batches).toEqual([[1], [2, 3], [4]]);
    for (const r of h.releases.splice(0)) r();
    expect(await Promise.all([...c, d])).toEqual([20, 30, 40]);
  });

  it('answers an item whose signal aborts at once, in its batch or before it', async () => {
    const h = held();
    const b = new MicroBatcher(h.run, 8);
    const running = new AbortController();
    const waiting = new AbortController();
    const x = b.submit('k', 1, running.signal);
    const y = b.submit('k', 2);
    await tick();
    const z = b.submit('k', 3, waiting.signal);
    running.abort(new Error('stop x'));
    waiting.abort(new Error('stop z'));
    await expect(x).rejects.toThrow('stop x');
    await expect(z).rejects.toThrow('stop z');
    h.releases.shift()?.();
    expect(await y).toBe(20);
    await tick();
    // z never ran.
    expect(h.batches).toEqual([[1, 2]]);
  });
});
