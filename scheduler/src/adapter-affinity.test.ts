import { describe, expect, it } from 'vitest';
import type { AdapterReport } from '@diffmesh/core';
import { AdapterAffinity } from './adapter-affinity.js';

const silent = (id: string) => ({ id });
const reporting = (id: string, report: AdapterReport) => ({ id, adapters: () => report });

describe('AdapterAffinity', () => {
  it('remembers the adapters sent to an instance that does not report, the most recent ones within its bound', () => {
    const a = new AdapterAffinity(3);
    a.started('dit-1', ['ink']);
    a.started('dit-2', ['pencil', 'ink']);
    expect(a.holds(silent('dit-1'), ['ink', 'pencil'])).toEqual({ held: 1, available: 2, reported: false });
    expect(a.holds(silent('dit-2'), ['ink', 'pencil'])).toEqual({ held: 2, available: 2, reported: false });
    expect(a.holds(silent('dit-3'), ['ink']).held).toBe(0);
    a.started('dit-1', ['b', 'c', 'd']);
    expect(a.of('dit-1')).toEqual(['b', 'c', 'd']);
    a.started('dit-1', ['b']);
    expect(a.of('dit-1')).toEqual(['c', 'd', 'b']);
    a.forget('dit-2');
    expect(a.holds(silent('dit-2'), ['ink']).held).toBe(0);
  });

  it("takes a reporting instance's word, plus the adapters of the tasks running on it now", () => {
    const a = new AdapterAffinity();
    const report: AdapterReport = { held: ['ink'], available: ['ink', 'pencil', 'chalk'] };
    const dit = reporting('dit-1', report);
    // Sent before, but the instance says it dropped it: not held.
    a.started('dit-1', ['chalk']);
    a.ended('dit-1', ['chalk']);
    expect(a.holds(dit, ['ink', 'chalk'])).toEqual({ held: 1, available: 2, reported: true });
    // A task with pencil runs there: pencil is being loaded, held until its report says otherwise.
    a.started('dit-1', ['pencil']);
    a.started('dit-1', ['pencil']);
    expect(a.holds(dit, ['pencil']).held).toBe(1);
    a.ended('dit-1', ['pencil']);
    expect(a.holds(dit, ['pencil']).held).toBe(1);
    a.ended('dit-1', ['pencil']);
    expect(a.holds(dit, ['pencil']).held).toBe(0);
    report.held.push('pencil');
    expect(a.holds(dit, ['ink', 'pencil'])).toEqual({ held: 2, available: 2, reported: true });
    // One that lacks a file ranks below any that has them all, whatever it holds.
    const other = reporting('dit-2', { held: ['ink'], available: ['ink'] });
    expect(a.score(other, ['ink', 'oil'])).toBeLessThan(
      a.score(reporting('dit-3', { held: [], available: ['ink', 'oil'] }), ['ink', 'oil']),
    );
  });
});
