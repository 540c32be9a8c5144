import { describe, expect, it } from 'vitest';
import { Code } from '@diffmesh/core';
import { parseDeadline } from './deadline.js';

describe('--deadline', () => {
  it('turns a duration from now into an absolute time', () => {
    const now = Date.now();
    expect(parseDeadline('30s') - now).toBeGreaterThanOrEqual(30_000);
    expect(parseDeadline('30s') - now).toBeLessThan(31_000);
    expect(parseDeadline('1500ms') - now).toBeLessThan(2_500);
    expect(parseDeadline('2m') - now).toBeGreaterThanOrEqual(120_000);
    expect(parseDeadline('10') - now).toBeGreaterThanOrEqual(10_000);
  });

  it('refuses what is not a positive duration, naming the flag', () => {
    for (const bad of ['soon', '-5s', '0', '30d', '']) {
      expect(() => parseDeadline(bad)).toThrow(expect.objectContaining({ code: Code.INVALID_ARGUMENT, metadata: { field: 'deadline' } }));
    }
  });
});
