#!/usr/bin/env node
// `npm run chaos`: the chaos suite against every durable queue backend (or those named), with
// its counts printed per backend. Exits 1 unless every run lost and duplicated nothing.
import { parseArgs } from 'node:util';
import { CHAOS_BACKENDS, formatReport, runChaos, type ChaosBackend } from './chaos.js';

const { values } = parseArgs({
  options: {
    backends: { type: 'string', default: CHAOS_BACKENDS.join(',') },
    requests: { type: 'string', default: '60' },
    rate: { type: 'string', default: '4' },
    faults: { type: 'string', default: '12' },
    seed: { type: 'string' },
  },
});
const backends = (values.backends ?? '').split(',').filter(Boolean) as ChaosBackend[];
for (const b of backends) {
  if (!CHAOS_BACKENDS.includes(b)) {
    process.stderr.write(`chaos: backends: unknown backend "${b}" (known: ${CHAOS_BACKENDS.join(', ')})\n`);
    process.exit(2);
  }
}
let ok = true;
for (const backend of backends) {
  process.stderr.write(`chaos ${backend}: starting a mesh (2 schedulers, 2 workers per stage, ${values.requests} requests)\n`);
  const report = await runChaos({
    backend,
    requests: Number(values.requests),
    ratePerSecond: Number(values.rate),
    faults: Number(values.faults),
    ...(values.seed ? { seed: Number(values.seed) } : {}),
    timeLimitMs: 300_000,
    onLine: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${formatReport(report)}\n`);
  if (report.lost > 0 || report.duplicated > 0) ok = false;
}
process.exit(ok ? 0 : 1);
