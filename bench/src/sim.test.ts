// The cluster simulation at a tiny size: a real scheduler on JetStream, a real tensor-svc and
// 4 simulated workers in one host process. Asserts what must hold whatever the machine's
// speed: every request sent completes, and the table's fields are present and in range.
import { describe, expect, it } from 'vitest';
import { formatSim, poolOf, runSimCase, WAN_14B } from './sim.js';

describe('npm run bench -- sim', () => {
  it('runs 4 workers through one scheduler: every request completes and the figures are sane', async () => {
    // The design's Wan-14B costs ÷ 1000: text encoding 2 ms, denoising 50 × 1.1 ms, VAE 3 ms.
    const pools = [poolOf(WAN_14B, 'enc', 1, 1000), poolOf(WAN_14B, 'dit', 2, 1000), poolOf(WAN_14B, 'vae', 1, 1000)];
    const r = await runSimCase({ label: 'test', queue: 'jetstream', schedulers: 1, pools, warmupS: 1, durationS: 2, drain: true });
    expect(r.sent).toBeGreaterThan(0);
    expect(r.failed).toBe(0);
    expect(r.completed).toBe(r.sent);
    expect(r.workers).toBe(4);
    expect(r.fraction).toBeGreaterThan(0);
    expect(r.fraction).toBeLessThanOrEqual(1.05);
    expect(r.pools.map((p) => p.pool)).toEqual(['enc', 'dit', 'vae']);
    for (const p of r.pools) {
      expect(p.utilisation).toBeGreaterThanOrEqual(0);
      expect(p.utilisation).toBeLessThanOrEqual(1);
      expect(p.waitP99).toBeGreaterThanOrEqual(p.waitP50);
    }
    expect(r.waitP99).toBeGreaterThanOrEqual(r.waitP50);
    expect(r.tasksPerRequest).toBe(3);
    expect(r.schedulerCpuMsPerRequest).toBeGreaterThan(0);
    expect(r.schedulerCpuMsPerTask).toBeCloseTo(r.schedulerCpuMsPerRequest / 3, 6);
    expect(r.natsInPerRequest).toBeGreaterThan(0);
    const text = formatSim({ costsName: 'wan-14b', scale: 1000, sweep: [r], saturation: [{ queue: 'jetstream', largestOk: 4 }] });
    expect(text).toContain('fraction');
    expect(text).toContain('sched CPU ms/req');
  }, 120_000);
});
