import { describe, expect, it } from 'vitest';
import { EventLog } from './event-log.js';

describe('EventLog', async () => {
  it('gives a late listener the past events, then live ones, then close once', () => {
    const log = new EventLog<number>();
    log.push(1);
    const seen: Array<number | 'closed'> = [];
    const stop = log.listen({ item: (n) => seen.push(n), close: () => seen.push('closed') });
    log.push(2);
    log.close();
    log.push(3);
    log.close();
    expect(seen).toEqual([1, 2, 'closed']);
    stop();
  });

  it('stops calling a listener that stopped, and replays a closed log in full', () => {
    const log = new EventLog<string>();
    const seen: string[] = [];
    const stop = log.listen({ item: (s) => seen.push(s), close: () => seen.push('closed') });
    log.push('a');
    stop();
    log.push('b');
    log.close();
    expect(seen).toEqual(['a']);
    const replay: string[] = [];
    log.listen({ item: (s) => replay.push(s), close: () => replay.push('closed') });
    expect(replay).toEqual(['a', 'b', 'closed']);
  });

  it('serves async readers and listeners alike', async () => {
    const log = new EventLog<number>();
    const reading = (async () => {
      const got: number[] = [];
      for await (const n of log.subscribe()) got.push(n);
      return got;
    })();
    log.push(1);
    log.push(2);
    log.close();
    expect(await reading).toEqual([1, 2]);
  });
});
