/** One part of deploy:check's report. */
export interface Section {
  name: string;
  /** Failures: any makes deploy:check exit 1. */
  problems: string[];
  /** Information (e.g. pending flags the services do not have yet). */
  notes: string[];
  /** What was checked and held, one line each. */
  passed: string[];
}

/** Prints a report; returns true when nothing failed. */
export function printReport(sections: Section[], write: (s: string) => void = (s) => process.stdout.write(s)): boolean {
  let failed = 0;
  let passed = 0;
  for (const s of sections) {
    write(`\n${s.problems.length ? '✗' : '✓'} ${s.name}\n`);
    for (const p of s.passed) write(`    ok    ${p}\n`);
    for (const n of s.notes) write(`    note  ${n}\n`);
    for (const p of s.problems) write(`    FAIL  ${p}\n`);
    passed += s.passed.length;
    failed += s.problems.length;
  }
  write(`\ndeploy:check: ${passed} passed, ${failed} failed\n`);
  return failed === 0;
}
