#!/usr/bin/env node
// npm run deploy:check: every static check of deploy/, one report, exit 1 on any failure.
import { printReport } from './report.js';
import { runChecks } from './run.js';

try {
  const ok = printReport(await runChecks());
  process.exitCode = ok ? 0 : 1;
} catch (e) {
  process.stderr.write(`deploy:check: ${(e as Error).stack ?? String(e)}\n`);
  process.exitCode = 1;
}
