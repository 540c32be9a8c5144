import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '../errors/index.js';
import { createBreaker } from './breaker.js';

async function reasonOf(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'ok',
    (e: DiffmeshError) => e.reason,
  );
}

const full = (): Promise<never> => Promise.reject(new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'STORE_FULL', 'full'));
const bad = (): Promise<never> => Promise.reject(new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', 'bad'));
const down = (): Promise<never> => Promise.reject(new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'down'));
const thunk = (f: () => Promise<unknown>): Promise<unknown> => f();
// Any counted failure past the first two calls opens these breakers.
const tuning = { volumeThreshold: 2, errorThresholdPercentage: 1, resetTimeoutMs: 60_000 };

describe('createBreaker', () => {
  it('by default counts RESOURCE_EXHAUSTED (stage instances)', async () => {
    const breaker = createBreaker(thunk, { name: 'stage', ...tuning });
    expect(await reasonOf(breaker.fire(full))).toBe('STORE_FULL');
    expect(await reasonOf(breaker.fire(full))).toBe('STORE_FULL');
    expect(await reasonOf(breaker.fire(full))).toBe('BREAKER_OPEN');
    breaker.shutdown();
  });

  it('by default never counts a caller error', async () => {
    const breaker = createBreaker(thunk, { name: 'stage', ...tuning });
    for (let i = 0; i < 4; i++) expect(await reasonOf(breaker.fire(bad))).toBe('INVALID_PARAMETER');
    breaker.shutdown();
  });

  it('counts only what `counts` accepts', async () => {
    const breaker = createBreaker(thunk, { name: 'owner', ...tuning, counts: (err) => (err as DiffmeshError).code === Code.UNAVAILABLE });
    for (let i = 0; i < 4; i++) expect(await reasonOf(breaker.fire(full))).toBe('STORE_FULL');
    expect(await reasonOf(breaker.fire(down))).toBe('TRANSPORT');
    expect(await reasonOf(breaker.fire(full))).toBe('BREAKER_OPEN');
    breaker.shutdown();
  });
});
