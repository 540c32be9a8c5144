import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDiffmesh, type Run } from './fixtures/run-cli.js';

// The command as a user runs it: a separate node process on the built CLI.
const diffmesh = (args: string[], cwd: string): Promise<Run> => runDiffmesh(args, { cwd, timeoutMs: 60_000 });

describe('diffmesh plan-pools', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-plan-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("prints the design's wan-14b scenario: 2/28/2 of 32 GPUs, the whole-pipeline rate and the ratio", async () => {
    const run = await diffmesh(['plan-pools', '--example', 'wan-14b'], dir);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/split of 32 GPUs/);
    expect(run.stdout).toMatch(/text_encoding\s+text_encoding\s+1\s+2\.00\s+2\s+60\.00\s+41%/);
    expect(run.stdout).toMatch(/denoising\s+denoising\s+1\s+55\.00\s+28\s+30\.55\s+80%/);
    expect(run.stdout).toMatch(/vae_decoding\s+vae_decoding\s+1\s+3\.00\s+2\s+40\.00\s+61%/);
    expect(run.stdout).toMatch(/at most 30\.55 requests\/min on 32 GPUs \(bottleneck: denoising\)/);
    expect(run.stdout).toMatch(/whole pipeline on the same 32 GPUs: .* at most 32\.00 requests\/min/);
    expect(run.stdout).toMatch(/ratio pools \/ whole pipeline: 0\.95× = batching gain 1\.00× × balance 0\.95×/);
    expect(run.stdout).toMatch(/note: .*its 4–5× compares 8 GPUs per video with 1/);
  });

  it('sizes the wan-14b pools for a target rate: 20 × 55 s ÷ (60 s × 0.8) → 23 denoising GPUs', async () => {
    const run = await diffmesh(['plan-pools', '--example', 'wan-14b', '--rate', '20/min'], dir);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/text_encoding\s+text_encoding\s+1\s+2\.00\s+1\s/);
    expect(run.stdout).toMatch(/denoising\s+denoising\s+1\s+55\.00\s+23\s/);
    expect(run.stdout).toMatch(/vae_decoding\s+vae_decoding\s+1\s+3\.00\s+2\s/);
    expect(run.stdout).toMatch(/at most 25\.09 requests\/min on 26 GPUs/);
    expect(run.stdout).toMatch(/it needs 25 GPUs for 20\.00\/min/); // 20 × 60 s ÷ 48 s
    // The design's claim is about its 32 GPUs; it is not repeated for another plan.
    expect(run.stdout).not.toMatch(/note:/);
  });

  it('plans for a rate from --stage flags, and --json gives the same plan', async () => {
    const args = [
      'plan-pools',
      '--stage',
      'name=text_encoding,per-item-ms=500',
      '--stage',
      'name=denoising,fixed-ms=800,per-item-ms=200,max-batch=4',
      '--stage',
      'name=vae_decoding,per-item-ms=500',
      '--steps',
      '10',
      '--rate',
      '1.6/s',
    ];
    const run = await diffmesh(args, dir);
    expect(run.code).toBe(0);
    // 96/min at 80%: 96 × 4 s ÷ 48 s = 8 denoising workers at batch 4; 96 × 0.5 s ÷ 48 s = 1 each for the others.
    expect(run.stdout).toMatch(/pools for 96\.00 requests\/min/);
    expect(run.stdout).toMatch(/denoising\s+denoising\s+4\s+4\.00\s+8\s+120\.00\s+80%/);
    expect(run.stdout).toMatch(/it needs 22 GPUs for 96\.00\/min/); // 96 × 11 s ÷ 48 s
    expect(run.stdout).toMatch(/2\.20× = batching gain 2\.20×/);
    const json = await diffmesh([...args, '--json'], dir);
    expect(json.code).toBe(0);
    const plan = JSON.parse(json.stdout) as { pools: { pool: string; workers: number }[]; whole: { workersForRate: number } };
    expect(plan.pools.map((p) => [p.pool, p.workers])).toEqual([
      ['text_encoding', 1],
      ['denoising', 8],
      ['vae_decoding', 1],
    ]);
    expect(plan.whole.workersForRate).toBe(22);
  });

  it('reads the stages from a --costs YAML file', async () => {
    const file = path.join(dir, 'costs.yaml');
    await writeFile(
      file,
      'stages:\n  - { name: a, per-item-ms: 1000 }\n  - { name: b, per-item-ms: 2000 }\n  - { name: c, per-item-ms: 3000 }\n',
    );
    const run = await diffmesh(['plan-pools', '--costs', file, '--gpus', '12', '--json'], dir);
    expect(run.code).toBe(0);
    const plan = JSON.parse(run.stdout) as { pools: { workers: number }[]; ratio: number };
    expect(plan.pools.map((p) => p.workers)).toEqual([2, 4, 6]);
    expect(plan.ratio).toBeCloseTo(1);
  });

  it('exits 2 naming the flag on bad input', async () => {
    await writeFile(path.join(dir, 'bad.yaml'), '- name: x\n  cost: 3\n');
    const cases: [string[], RegExp][] = [
      [['--example', 'wan-14b', '--rate', 'fast'], /\(--rate\)/],
      [['--example', 'wan-14b', '--gpus', '2'], /gpus: must be an integer ≥ the number of pools \(3\), got 2 \(--gpus\)/],
      [['--example', 'wan-14b', '--utilisation', '1.5'], /\(--utilisation\)/],
      [['--example', 'sdxl'], /unknown example "sdxl" \(known: wan-14b\) \(--example\)/],
      [['--stage', 'name=x,cost=3', '--gpus', '1'], /unknown key "cost" .*\(--stage\)/],
      [['--stage', 'name=x,per-item-ms=5,max-batch=0', '--gpus', '1'], /stages\[0\]\.maxBatch: must be an integer ≥ 1, got 0 \(--stage\)/],
      [['--stage', 'name=x,fixed-ms=5'], /give a target rate .*\(--rate\)/],
      [['--costs', path.join(dir, 'missing.yaml'), '--gpus', '3'], /cannot read .*ENOENT \(--costs\)/],
      [['--costs', path.join(dir, 'bad.yaml'), '--gpus', '3'], /bad\.yaml: stages\[0\]\.cost: unknown key .*\(--costs\)/],
    ];
    for (const [args, message] of cases) {
      const run = await diffmesh(['plan-pools', ...args], dir);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stdout).toBe('');
    }
  });
});
