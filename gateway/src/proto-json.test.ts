import { describe, expect, it } from 'vitest';
import { DiffmeshError } from '@diffmesh/core';
import { jsonToObject, protoRoot } from './proto-json.js';

describe('jsonToObject', () => {
  it('names an empty key as "" (found by the fuzz suite: the error named no field)', () => {
    const type = protoRoot().lookupType('diffmesh.scheduler.v1.SubmitRequest');
    let err: unknown;
    try {
      jsonToObject(type, { '': 1 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).field).toBe('""');
    expect((err as DiffmeshError).message).toMatch(/^"": unknown field/);
    // Nested too.
    expect(() => jsonToObject(type, { params: { '': 1 } })).toThrow(/^params\."": unknown field/);
  });
});

describe('params.adapters in /api/v1 JSON', () => {
  it('takes a list of {name, scale} and names a bad element by its path', () => {
    const type = protoRoot().lookupType('diffmesh.scheduler.v1.SubmitRequest');
    const obj = jsonToObject(type, {
      model: 'm',
      params: { prompt: 'a cat', adapters: [{ name: 'ink', scale: 0.8 }, { name: 'pencil' }] },
    });
    const back = type.toObject(type.fromObject(obj)) as { params: { adapters: Array<{ name: string; scale?: number }> } };
    expect(back.params.adapters).toEqual([{ name: 'ink', scale: 0.8 }, { name: 'pencil' }]);
    expect(() => jsonToObject(type, { params: { adapters: [{ name: 'ink', scale: 'strong' }] } })).toThrow(
      /^params\.adapters\[0\]\.scale: /,
    );
    expect(() => jsonToObject(type, { params: { adapters: [{ name: 'ink', weight: 1 }] } })).toThrow(
      /^params\.adapters\[0\]\.weight: unknown field/,
    );
  });
});
