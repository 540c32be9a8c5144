import { describe, expect, it } from 'vitest';
import type { PlanEntry } from './plans/schema.js';
import { modelAvailability, type InstanceSource } from './model-availability.js';
import type { StageInstance } from './types.js';

function instance(pool: string, extra: Partial<StageInstance> = {}): { instance: StageInstance } {
  return {
    instance: {
      id: `${pool}-1`,
      pool,
      stage: 'denoising',
      nodeId: 'n',
      version: '1.2.0',
      capacity: 1,
      models: [],
      execute: () => Promise.reject(new Error('not run here')),
      ...extra,
    },
  };
}

function source(list: Array<{ instance: StageInstance }>): InstanceSource {
  return { instances: (pool) => list.filter((i) => i.instance.pool === pool) };
}

const plan = (stages: PlanEntry['stages']): PlanEntry => ({ model: 'acme/m', stages }) as unknown as PlanEntry;

describe('modelAvailability', () => {
  const stages = [
    { name: 'text_encoding', pool: 'enc' },
    { name: 'image_encoding', pool: 'img', requires: 'input_image' },
    { name: 'denoising', pool: 'dit', version: '^1.0.0' },
  ] as PlanEntry['stages'];

  it('is ready when every stage a request always takes has an instance; an optional stage does not count', () => {
    expect(modelAvailability(source([instance('enc'), instance('dit')]), plan(stages))).toEqual({ ready: true, unavailablePools: [] });
  });

  it('names the pools with no instance that could run the model', () => {
    const out = modelAvailability(
      source([
        instance('enc', { models: ['other/model'] }), // serves another model only
        instance('dit', { version: '2.0.0' }), // outside the plan's range
      ]),
      plan(stages),
    );
    expect(out).toEqual({ ready: false, unavailablePools: ['enc', 'dit'] });
  });

  it('does not count an instance that refuses work (breaker open, connection lost)', () => {
    const out = modelAvailability(source([instance('enc'), instance('dit', { available: () => false })]), plan(stages));
    expect(out).toEqual({ ready: false, unavailablePools: ['dit'] });
  });
});
