import { describe, expect, it } from 'vitest';
import { AdapterAffinity } from './adapter-affinity.js';

describe('AdapterAffinity', () => {
  it('remembers the adapters sent to each instance, the most recent ones within its bound', () => {
    const a = new AdapterAffinity(3);
    a.sent('dit-1', ['ink']);
    a.sent('dit-2', ['pencil', 'ink']);
    expect(a.holds('dit-1', ['ink', 'pencil'])).toBe(1);
    expect(a.holds('dit-2', ['ink', 'pencil'])).toBe(2);
    expect(a.holds('dit-3', ['ink'])).toBe(0);
    a.sent('dit-1', ['b', 'c', 'd']);
    expect(a.of('dit-1')).toEqual(['b', 'c', 'd']);
    a.sent('dit-1', ['b']);
    expect(a.of('dit-1')).toEqual(['c', 'd', 'b']);
    a.forget('dit-2');
    expect(a.holds('dit-2', ['ink'])).toBe(0);
  });
});
