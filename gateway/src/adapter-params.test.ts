import { describe, expect, it } from 'vitest';
import { optAdapters } from './adapter-params.js';

describe('adapters of the OpenAI routes (extra_body)', () => {
  it('takes a list, or a JSON string of one (forms), scale 1 when left out', () => {
    expect(optAdapters({ adapters: [{ name: 'ink', scale: 0.5 }, { name: 'pencil' }] })).toEqual([
      { name: 'ink', scale: 0.5 },
      { name: 'pencil', scale: 1 },
    ]);
    expect(optAdapters({ adapters: '[{"name":"ink","scale":2}]' })).toEqual([{ name: 'ink', scale: 2 }]);
    expect(optAdapters({})).toBeUndefined();
  });

  it('names what is wrong', () => {
    expect(() => optAdapters({ adapters: 'ink' })).toThrow(/JSON list/);
    expect(() => optAdapters({ adapters: { name: 'ink' } })).toThrow(/expected a list/);
    expect(() => optAdapters({ adapters: [{ name: 3 }] })).toThrow(/expected a string/);
    expect(() => optAdapters({ adapters: [{ name: 'ink', scale: '1' }] })).toThrow(/expected a number/);
    expect(() => optAdapters({ adapters: [{ name: 'ink', weight: 1 }] })).toThrow(/unrecognized field/);
  });
});
