import { describe, expect, it } from 'vitest';
import { parseStageCosts, planPools, PoolPlanError } from './pool-planning.js';

const WAN_14B = [
  { name: 'text_encoding', perItemMs: 2000 },
  { name: 'denoising', perItemMs: 1100, steps: 50 },
  { name: 'vae_decoding', perItemMs: 3000 },
];

const BATCHING = [
  { name: 'text_encoding', perItemMs: 500 },
  { name: 'denoising', fixedMs: 800, perItemMs: 200, steps: 10, maxBatch: 4 },
  { name: 'vae_decoding', perItemMs: 500 },
];

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof PoolPlanError) return err.field;
    throw err;
  }
  return undefined;
}

describe('planPools', () => {
  it('sizes each pool for a target rate and names the bottleneck', () => {
    // 30/min at 80%: light 30 × 1 s ÷ 48 s = 0.625 → 1 worker; heavy 30 × 3 s ÷ 48 s = 1.875 → 2.
    const plan = planPools({
      stages: [
        { name: 'light', fixedMs: 1000 },
        { name: 'heavy', perItemMs: 3000 },
      ],
      ratePerMin: 30,
    });
    expect(plan.pools.map((p) => [p.pool, p.workers])).toEqual([
      ['light', 1],
      ['heavy', 2],
    ]);
    expect(plan.pools[0].capacityPerMin).toBeCloseTo(60);
    expect(plan.pools[1].capacityPerMin).toBeCloseTo(40);
    expect(plan.pools[0].utilisation).toBeCloseTo(0.5);
    expect(plan.pools[1].utilisation).toBeCloseTo(0.75);
    expect(plan.capacityPerMin).toBeCloseTo(40);
    expect(plan.bottleneck).toBe('heavy');
    // The whole pipeline: 4 s per request; 3 GPUs give 45/min, and 30/min needs 30 × 4 ÷ 48 = 2.5 → 3.
    expect(plan.whole.capacityPerMin).toBeCloseTo(45);
    expect(plan.whole.workersForRate).toBe(3);
    expect(plan.ratio).toBeCloseTo(40 / 45);
  });

  it("splits the design's 32 GPUs 2/28/2 and finds about the whole pipeline's rate (batch 1)", () => {
    const plan = planPools({ stages: WAN_14B, gpus: 32 });
    expect(plan.pools.map((p) => p.workers)).toEqual([2, 28, 2]);
    expect(plan.bottleneck).toBe('denoising');
    expect(plan.capacityPerMin).toBeCloseTo((28 * 60) / 55); // 30.55/min
    expect(plan.plannedRatePerMin).toBeCloseTo(((28 * 60) / 55) * 0.8);
    expect(plan.whole.msPerRequest).toBe(60_000);
    expect(plan.whole.capacityPerMin).toBeCloseTo(32); // 32 GPUs × 1 video/min each
    expect(plan.ratio).toBeCloseTo(0.955, 3);
    expect(plan.explanation.batchingGain).toBeCloseTo(1);
    expect(plan.explanation.balance).toBeCloseTo(0.955, 3);
  });

  it('gives exactly 1× at batch 1 when the budget divides evenly between the stages', () => {
    const plan = planPools({
      stages: [
        { name: 'a', perItemMs: 1000 },
        { name: 'b', perItemMs: 2000 },
        { name: 'c', perItemMs: 3000 },
      ],
      gpus: 12,
    });
    expect(plan.pools.map((p) => p.workers)).toEqual([2, 4, 6]);
    expect(plan.capacityPerMin).toBeCloseTo(120);
    expect(plan.whole.capacityPerMin).toBeCloseTo(120);
    expect(plan.ratio).toBeCloseTo(1);
  });

  it('gains over the whole pipeline only by what batching saves', () => {
    // Denoising at batch 4: 10 × (800 + 200 × 4) ÷ 4 = 4 s per request, against 10 s at batch 1.
    const plan = planPools({ stages: BATCHING, gpus: 10 });
    expect(plan.pools.map((p) => [p.workers, p.stages[0].batch])).toEqual([
      [1, 1],
      [8, 4],
      [1, 1],
    ]);
    expect(plan.pools[1].msPerRequest).toBe(4000);
    expect(plan.capacityPerMin).toBeCloseTo(120);
    expect(plan.whole.msPerRequest).toBe(11_000);
    expect(plan.whole.capacityPerMin).toBeCloseTo(600_000 / 11_000); // 54.5/min
    expect(plan.ratio).toBeCloseTo(2.2);
    expect(plan.explanation.batchingGain).toBeCloseTo(2.2);
    expect(plan.explanation.balance).toBeCloseTo(1);
    // A whole-pipeline worker that batches as much gets the same gain back.
    const batchedWhole = planPools({ stages: BATCHING, gpus: 10, wholeBatch: 4 });
    expect(batchedWhole.whole.msPerRequest).toBe(5000);
    expect(batchedWhole.ratio).toBeCloseTo(1);
  });

  it('adds the costs of stages that share a pool', () => {
    const plan = planPools({
      stages: [
        { name: 'text_encoding', pool: 'light', perItemMs: 1000 },
        { name: 'denoising', perItemMs: 6000 },
        { name: 'vae_decoding', pool: 'light', perItemMs: 2000 },
      ],
      gpus: 3,
    });
    expect(plan.pools.map((p) => [p.pool, p.msPerRequest, p.workers])).toEqual([
      ['light', 3000, 1],
      ['denoising', 6000, 2],
    ]);
    expect(plan.capacityPerMin).toBeCloseTo(20);
  });

  it('refuses bad input naming the field', () => {
    expect(fieldOf(() => planPools({ stages: WAN_14B }))).toBe('rate');
    expect(fieldOf(() => planPools({ stages: WAN_14B, ratePerMin: 4, gpus: 32 }))).toBe('rate');
    expect(fieldOf(() => planPools({ stages: WAN_14B, gpus: 2 }))).toBe('gpus');
    expect(fieldOf(() => planPools({ stages: WAN_14B, gpus: 32, utilisation: 1.2 }))).toBe('utilisation');
    expect(fieldOf(() => planPools({ stages: [{ name: 'x', perItemMs: 1, maxBatch: 0 }], gpus: 1 }))).toBe('stages[0].maxBatch');
    expect(fieldOf(() => planPools({ stages: [{ name: 'x' }], gpus: 1 }))).toBe('stages[0].fixedMs');
    expect(fieldOf(() => planPools({ stages: [], gpus: 1 }))).toBe('stages');
  });
});

describe('parseStageCosts', () => {
  it('reads YAML in either spelling, and names an unknown key', () => {
    expect(parseStageCosts('stages:\n  - name: denoising\n    per-item-ms: 1100\n    steps: 50\n    maxBatch: 2\n')).toEqual([
      { name: 'denoising', perItemMs: 1100, steps: 50, maxBatch: 2 },
    ]);
    expect(parseStageCosts('[{"name": "vae_decoding", "fixedMs": 3000}]')).toEqual([{ name: 'vae_decoding', fixedMs: 3000 }]);
    expect(fieldOf(() => parseStageCosts('- name: x\n  cost: 3\n'))).toBe('stages[0].cost');
  });
});
