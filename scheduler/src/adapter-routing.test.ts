/**
 * LoRA adapters and the instances of a denoising pool: tasks go to the instance whose report
 * says it holds their adapters, and a name no instance has is refused at Submit once every
 * instance of the pool reports its adapter folder.
 */
import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError, type AdapterReport } from '@diffmesh/core';
import { PlanRegistry } from './plans/registry.js';
import { HeldInstance, entry, newScheduler, outcome } from './fixtures/stages.js';

/** Model `m` denoised by pool `dit`. */
const registry = PlanRegistry.fromEntries([{ ...entry({ model: 'm' }), stages: [{ name: 'denoising', pool: 'dit' }] }]);

function dit(id: string, adapters?: AdapterReport): HeldInstance {
  return new HeldInstance(id, { pool: 'dit', stage: 'denoising', ...(adapters ? { adapters } : {}) });
}

const request = (prompt: string, names: string[]) => ({
  model: 'm',
  params: { prompt, adapters: names.map((name) => ({ name, scale: 1 })) },
});

describe('adapter-aware routing', () => {
  it('sends a task to the instance that reports holding its adapters, elsewhere only when that one is busy', async () => {
    const dispatches: string[] = [];
    const s = newScheduler({}, { registry, onAdapterDispatch: (pool, held) => dispatches.push(`${pool}:${held}`) });
    const available = ['ink', 'pencil'];
    const a = dit('dit-a', { held: ['ink'], available });
    const b = dit('dit-b', { held: ['pencil'], available });
    s.addInstance(a);
    s.addInstance(b);
    const pencil = (await s.submit(request('1', ['pencil']))).context.reqId;
    await expect.poll(() => b.tasks.length, { timeout: 10_000 }).toBe(1);
    const ink = (await s.submit(request('2', ['ink']))).context.reqId;
    await expect.poll(() => a.tasks.length, { timeout: 10_000 }).toBe(1);
    a.finish(0);
    b.finish(0);
    for (const id of [pencil, ink]) expect(await outcome(s, id)).toBe('completed');
    expect(b.tasks.map((t) => t.params.prompt)).toEqual(['1']);
    expect(a.tasks.map((t) => t.params.prompt)).toEqual(['2']);
    // b reports it dropped pencil: a pencil task goes to whichever is free; one with ink to a.
    b.report = { held: [], available };
    const third = (await s.submit(request('3', ['ink']))).context.reqId;
    await expect.poll(() => a.tasks.length, { timeout: 10_000 }).toBe(2);
    // a is busy with it: the next ink task goes to b, which loads ink, rather than wait.
    const fourth = (await s.submit(request('4', ['ink']))).context.reqId;
    await expect.poll(() => b.tasks.length, { timeout: 10_000 }).toBe(2);
    a.finish(1);
    b.finish(1);
    for (const id of [third, fourth]) expect(await outcome(s, id)).toBe('completed');
    expect(b.tasks.map((t) => t.params.prompt)).toEqual(['1', '4']);
    expect(dispatches).toEqual(['dit:true', 'dit:true', 'dit:true', 'dit:false']);
  });

  it('sends a task to an instance that has its adapter files before one that holds more of the others', async () => {
    const s = newScheduler({}, { registry });
    const a = dit('dit-a', { held: ['ink'], available: ['ink'] });
    const b = dit('dit-b', { held: [], available: ['ink', 'oil'] });
    s.addInstance(a);
    s.addInstance(b);
    const id = (await s.submit(request('1', ['ink', 'oil']))).context.reqId;
    await expect.poll(() => b.tasks.length, { timeout: 10_000 }).toBe(1);
    b.finish(0);
    expect(await outcome(s, id)).toBe('completed');
    expect(a.tasks).toHaveLength(0);
  });

  it('refuses at Submit an adapter no instance of the denoising pool has, naming the field, when every instance reports', async () => {
    const s = newScheduler({}, { registry });
    s.addInstance(dit('dit-a', { held: [], available: ['ink'] }));
    s.addInstance(dit('dit-b', { held: [], available: ['pencil'] }));
    // Each name is somewhere: accepted.
    await expect(s.submit(request('ok', ['pencil', 'ink']))).resolves.toBeDefined();
    const err = await s.submit(request('bad', ['ink', 'chalk'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiffmeshError);
    const e = err as DiffmeshError;
    expect(e.code).toBe(Code.INVALID_ARGUMENT);
    expect(e.reason).toBe('INVALID_PARAMETER');
    expect(e.metadata).toMatchObject({ field: 'adapters[1].name' });
    expect(e.message).toContain('chalk');
    expect(e.message).toContain('ink, pencil');
  });

  it('leaves the decision to the stage while an instance of the pool does not report its adapters', async () => {
    const s = newScheduler({}, { registry });
    const a = dit('dit-a', { held: [], available: ['ink'] });
    const b = dit('dit-b');
    s.addInstance(a);
    s.addInstance(b);
    const id = (await s.submit(request('unknown here', ['chalk']))).context.reqId;
    await expect.poll(() => a.tasks.length + b.tasks.length, { timeout: 10_000 }).toBe(1);
    (a.tasks.length ? a : b).finish(0);
    expect(await outcome(s, id)).toBe('completed');
    // Once it reports, the name is refused at once.
    b.report = { held: [], available: [] };
    await expect(s.submit(request('now refused', ['chalk']))).rejects.toMatchObject({ code: Code.INVALID_ARGUMENT });
    // A request without adapters is not affected.
    await expect(s.submit({ model: 'm', params: { prompt: 'plain' } })).resolves.toBeDefined();
  });
});
