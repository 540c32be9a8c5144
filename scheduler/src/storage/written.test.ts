import { describe, expect, it } from 'vitest';
import { encodeRecord } from './codec.js';
import { newItem, newRecord } from './conformance.js';
import { WrittenRecords } from './written.js';

describe('WrittenRecords', () => {
  it('hands back the record that made an item (same gen) until another process announces a newer revision', () => {
    const w = new WrittenRecords();
    const rec = newRecord('r1');
    rec.revision = 2;
    w.wrote(rec, encodeRecord(rec));
    expect(w.forItem(newItem('r1'))).toBe(rec);
    expect(w.forItem(newItem('r1', { gen: 2 }))).toBeUndefined();
    expect(w.forItem(newItem('r2'))).toBeUndefined();
    w.changed('r1', 2); // its own revision: still current
    expect(w.forItem(newItem('r1'))).toBe(rec);
    w.changed('r1', 3);
    expect(w.forItem(newItem('r1'))).toBeUndefined();
  });

  it('keeps no finished record, and copies a written record from its stored text', () => {
    const w = new WrittenRecords();
    const rec = newRecord('r1');
    rec.revision = 4;
    const text = encodeRecord(rec);
    w.wrote(rec, text);
    const copy = w.copy(rec);
    expect(copy).toEqual(rec);
    expect(copy).not.toBe(rec);
    expect(w.copy(newRecord('r1'))).toBeUndefined();
    rec.state.context.status = 'completed';
    w.wrote(rec, encodeRecord(rec));
    expect(w.forItem(newItem('r1'))).toBeUndefined();
  });
});
