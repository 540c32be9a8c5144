/**
 * `diffmesh plan-pools`: proposes pool sizes from measured stage costs and a target rate or a
 * GPU budget, and compares them with the whole pipeline on every worker (see
 * `planPools` in the scheduler package for the arithmetic).
 */
import { readFile } from 'node:fs/promises';
import { parseStageCosts, planPools, PoolPlanError, type PoolPlan, type StageCostInput } from '@diffmesh/scheduler';

/** Flags of `diffmesh plan-pools`, as commander gives them. */
export interface PlanPoolsFlags {
  stage: string[];
  costs?: string;
  example?: string;
  rate?: string;
  gpus?: string;
  utilisation: string;
  steps?: string;
  wholeBatch: string;
  json?: boolean;
}

interface Example {
  description: string;
  /** What the source claims for this scenario, printed after the plan. */
  claim?: string;
  stages: StageCostInput[];
  gpus: number;
}

/** Built-in scenarios (`--example NAME`). */
export const PLAN_EXAMPLES: Record<string, Example> = {
  'wan-14b': {
    description:
      "the design's example: Wan-14B text-to-video, 125 frames at 720p, 50 steps on 32 H100s (text encoding 2 s, denoising 50 × 1.1 s, VAE 3 s)",
    stages: [
      { name: 'text_encoding', perItemMs: 2000 },
      { name: 'denoising', perItemMs: 1100, steps: 50 },
      { name: 'vae_decoding', perItemMs: 3000 },
    ],
    gpus: 32,
    claim:
      "the design's figures are 4 whole-pipeline machines at ~4 videos/min (a video holds a machine's 8 GPUs for its ~60 s) against " +
      'pools of 2/28/2 at 16–20 videos/min (a stage task on one GPU): its 4–5× compares 8 GPUs per video with 1. ' +
      'With the same per-GPU stage costs on both sides, as above, both give ~30 videos/min',
  },
};

/** Bad input of `plan-pools`; `flag` names the flag it came from. */
export class PlanPoolsUsageError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(message);
  }
}

const STAGE_SPEC_KEYS: Record<string, keyof StageCostInput> = {
  name: 'name',
  pool: 'pool',
  'fixed-ms': 'fixedMs',
  'per-item-ms': 'perItemMs',
  steps: 'steps',
  'max-batch': 'maxBatch',
};

/** `name=denoising,per-item-ms=1100,steps=50,max-batch=4` → a stage. */
export function parseStageSpec(spec: string): StageCostInput {
  const stage: Record<string, string | number> = {};
  for (const part of spec.split(',').map((p) => p.trim())) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? '' : part.slice(eq + 1).trim();
    const field = STAGE_SPEC_KEYS[key.trim()];
    if (!field)
      throw new PlanPoolsUsageError('--stage', `unknown key "${key}" in "${spec}" (keys: ${Object.keys(STAGE_SPEC_KEYS).join(', ')})`);
    if (field === 'name' || field === 'pool') {
      if (value === '') throw new PlanPoolsUsageError('--stage', `${key} is empty in "${spec}"`);
      stage[field] = value;
    } else {
      const n = Number(value);
      if (value === '' || !Number.isFinite(n))
        throw new PlanPoolsUsageError('--stage', `${key} must be a number, got "${value}" in "${spec}"`);
      stage[field] = n;
    }
  }
  if (stage.name === undefined) throw new PlanPoolsUsageError('--stage', `no name= in "${spec}"`);
  return stage as unknown as StageCostInput;
}

/** `12`, `12/min`, `0.5/s`, `600/h` → requests per minute. */
export function parseRate(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(s|min|h))?\s*$/.exec(raw);
  const n = m ? Number(m[1]) : NaN;
  if (!m || !(n > 0))
    throw new PlanPoolsUsageError('--rate', `expected requests per minute greater than 0, e.g. 12/min (or 0.5/s, 600/h), got "${raw}"`);
  return m[2] === 's' ? n * 60 : m[2] === 'h' ? n / 60 : n;
}

function parsePositiveInteger(raw: string, flag: string): number {
  if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) throw new PlanPoolsUsageError(flag, `expected an integer ≥ 1, got "${raw}"`);
  return Number(raw);
}

/** The stages from `--example`, `--costs` and `--stage` (a `--stage` replaces a stage of the same name), with `--steps` applied. */
async function gatherStages(flags: PlanPoolsFlags, example: Example | undefined): Promise<StageCostInput[]> {
  let stages: StageCostInput[] = example ? example.stages.map((s) => ({ ...s })) : [];
  if (flags.costs !== undefined) {
    let text: string;
    try {
      text = await readFile(flags.costs, 'utf8');
    } catch (err) {
      throw new PlanPoolsUsageError('--costs', `cannot read "${flags.costs}": ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    try {
      stages = parseStageCosts(text);
    } catch (err) {
      if (err instanceof PoolPlanError) throw new PlanPoolsUsageError('--costs', `${flags.costs}: ${err.message}`);
      throw err;
    }
  }
  for (const spec of flags.stage) {
    const stage = parseStageSpec(spec);
    const at = stages.findIndex((s) => s.name === stage.name);
    if (at >= 0) stages[at] = stage;
    else stages.push(stage);
  }
  if (stages.length === 0)
    throw new PlanPoolsUsageError('--stage', 'give the stages: --stage name=…,fixed-ms=… (repeatable), --costs FILE or --example wan-14b');
  if (flags.steps !== undefined) {
    const steps = parsePositiveInteger(flags.steps, '--steps');
    const denoising = stages.filter((s) => s.name === 'denoising');
    if (denoising.length === 0) throw new PlanPoolsUsageError('--steps', 'sets the steps of the "denoising" stage, and there is none');
    for (const s of denoising) s.steps = steps;
  }
  return stages;
}

/** Runs `plan-pools`: writes the plan to `out`; throws {@link PlanPoolsUsageError} on bad input. */
export async function planPoolsCommand(flags: PlanPoolsFlags, out: NodeJS.WritableStream): Promise<void> {
  let example: Example | undefined;
  if (flags.example !== undefined) {
    example = PLAN_EXAMPLES[flags.example];
    if (!example)
      throw new PlanPoolsUsageError('--example', `unknown example "${flags.example}" (known: ${Object.keys(PLAN_EXAMPLES).join(', ')})`);
  }
  if (flags.rate !== undefined && flags.gpus !== undefined) throw new PlanPoolsUsageError('--rate', 'give --rate or --gpus, not both');
  const utilisation = Number(flags.utilisation);
  if (flags.utilisation.trim() === '' || !(utilisation > 0 && utilisation <= 1)) {
    throw new PlanPoolsUsageError('--utilisation', `expected a number greater than 0 and at most 1, got "${flags.utilisation}"`);
  }
  const wholeBatch = parsePositiveInteger(flags.wholeBatch, '--whole-batch');
  const target =
    flags.rate !== undefined
      ? { ratePerMin: parseRate(flags.rate) }
      : flags.gpus !== undefined
        ? { gpus: parsePositiveInteger(flags.gpus, '--gpus') }
        : example
          ? { gpus: example.gpus }
          : undefined;
  if (!target) throw new PlanPoolsUsageError('--rate', 'give a target rate (--rate N/min) or a GPU budget (--gpus N)');
  const stages = await gatherStages(flags, example);
  let plan: PoolPlan;
  try {
    plan = planPools({ stages, ...target, utilisation, wholeBatch });
  } catch (err) {
    if (err instanceof PoolPlanError) throw new PlanPoolsUsageError(flagOfField(err.field, flags), err.message);
    throw err;
  }
  if (flags.json) out.write(`${JSON.stringify({ ...(flags.example ? { example: flags.example } : {}), ...plan })}\n`);
  else {
    out.write(formatPlan(plan, example ? `${flags.example}: ${example.description}` : undefined));
    // The claim is about the example as given: its stages on its GPUs.
    const asGiven =
      flags.stage.length === 0 &&
      flags.costs === undefined &&
      flags.steps === undefined &&
      flags.rate === undefined &&
      flags.gpus === undefined;
    if (example?.claim && asGiven) out.write(`note: ${example.claim}\n`);
  }
}

function flagOfField(field: string, flags: PlanPoolsFlags): string {
  if (field.startsWith('stages')) return flags.stage.length > 0 || flags.costs === undefined ? '--stage' : '--costs';
  return { rate: '--rate', gpus: '--gpus', utilisation: '--utilisation', wholeBatch: '--whole-batch' }[field] ?? field;
}

const fixed = (n: number, digits = 2): string => n.toFixed(digits);
const seconds = (ms: number): string => fixed(ms / 1000);
const times = (x: number): string => `${fixed(x)}×`;

/** The plan as a table and a few sentences. */
export function formatPlan(plan: PoolPlan, title?: string): string {
  const lines: string[] = [];
  if (title) lines.push(title);
  const u = `${Math.round(plan.utilisationCeiling * 100)}%`;
  lines.push(
    plan.mode === 'gpus'
      ? `split of ${plan.totalWorkers} GPUs between the pools (utilisation ceiling ${u}):`
      : `pools for ${fixed(plan.plannedRatePerMin)} requests/min (utilisation ceiling ${u}):`,
  );
  const header = ['POOL', 'STAGES', 'BATCH', 'S/REQUEST', 'WORKERS', 'REQ/MIN', 'UTILISATION'];
  const rows = plan.pools.map((p) => [
    p.pool,
    p.stages.map((s) => s.name).join('+'),
    p.stages.map((s) => String(s.batch)).join('/'),
    seconds(p.msPerRequest),
    String(p.workers),
    fixed(p.capacityPerMin),
    `${Math.round(p.utilisation * 100)}%`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  for (const row of [header, ...rows]) {
    lines.push(`  ${row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ')}`.trimEnd());
  }
  lines.push(
    `pipeline: at most ${fixed(plan.capacityPerMin)} requests/min on ${plan.totalWorkers} GPUs (bottleneck: ${plan.bottleneck}); ` +
      `planned ${fixed(plan.plannedRatePerMin)}/min`,
  );
  const w = plan.whole;
  lines.push(
    `whole pipeline on the same ${w.workers} GPUs: each worker runs a request's stages in sequence, ${seconds(w.msPerRequest)} s per request ` +
      `at batch ${w.batch}: at most ${fixed(w.capacityPerMin)} requests/min` +
      (w.workersForRate !== undefined ? `; it needs ${w.workersForRate} GPUs for ${fixed(plan.plannedRatePerMin)}/min` : ''),
  );
  const { batchingGain, balance } = plan.explanation;
  lines.push(
    `ratio pools / whole pipeline: ${times(plan.ratio)} = batching gain ${times(batchingGain)} × balance ${times(balance)}`,
    `  A whole-pipeline worker is busy for the sum of the stages. Pools gain only where a stage runs at a larger batch`,
    `  (a request costs ${seconds(w.msPerRequest)} s of GPU time whole, ${seconds(w.msPerRequest / batchingGain)} s in the pools) and lose what` +
      ` whole workers per pool leave unbalanced.`,
    batchingGain < 1 + 1e-9
      ? `  With no batching gain the ratio is ~1× apart from rounding: separate pools alone do not multiply throughput on the same GPUs.`
      : `  The gain here comes from batching (${times(batchingGain)}); without it the ratio would be ~1×.`,
  );
  return `${lines.join('\n')}\n`;
}
