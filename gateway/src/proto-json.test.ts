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
