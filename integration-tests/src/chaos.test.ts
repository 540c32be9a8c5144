import { describe, expect, it } from 'vitest';
import { CHAOS_BACKENDS, formatReport, runChaos } from './chaos.js';

// Bounded: 20 requests and 5 faults per backend, loopback only. `npm run chaos` runs longer.
describe('chaos: workers, a scheduler and tensor-svc die under load', () => {
  it.each(CHAOS_BACKENDS)(
    '%s: no accepted request is lost or completed twice',
    async (backend) => {
      const report = await runChaos({ backend, requests: 20, ratePerSecond: 4, faults: 5, faultEveryMs: 1500, timeLimitMs: 120_000 });
      process.stdout.write(`${formatReport(report)}\n`);
      expect(report.submitted).toBe(20);
      expect(report.faults.length).toBeGreaterThanOrEqual(3);
      expect(report.lost).toBe(0);
      expect(report.duplicated).toBe(0);
    },
    240_000,
  );
});
