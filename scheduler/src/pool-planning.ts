/**
 * Pool planning: how many workers each stage pool needs, from measured stage costs and a
 * target rate or a GPU budget, and how that compares with running the whole pipeline on
 * every worker. Pure arithmetic (no I/O); `diffmesh plan-pools` prints it.
 *
 * Cost model. A task of a stage that handles `batch` requests at once costs
 * `steps × (fixedMs + perItemMs × batch)` of one worker's time (`steps` is 1 except for
 * denoising, whose cost is per step). A request's share is that ÷ `batch`, so batching pays
 * only through `fixedMs`. A pool runs its stages at their largest batch (the planner assumes
 * the queue fills batches, which holds when the pool is busy). A whole-pipeline worker runs
 * every stage of a request in sequence, at batch 1 unless `wholeBatch` says otherwise.
 *
 * Capacity of a pool with `n` workers: `n × 60 000 ÷ msPerRequest` requests/min. The
 * pipeline's bound is the smallest pool capacity. Workers for a rate `R` at a utilisation
 * ceiling `u`: `ceil(R × msPerRequest ÷ (60 000 × u))`.
 */
import { parse as parseYaml } from 'yaml';

/** One stage's measured cost. */
export interface StageCostInput {
  /** Stage name, e.g. `text_encoding`, `denoising`, `vae_decoding`. */
  name: string;
  /** Pool that serves it (default: the stage name). Stages sharing a pool add their costs. */
  pool?: string;
  /** Milliseconds per task whatever its batch (default 0). */
  fixedMs?: number;
  /** Milliseconds per request in the batch (default 0). */
  perItemMs?: number;
  /** Repetitions of the cost per request: the denoising steps (default 1). */
  steps?: number;
  /** Largest batch the stage runs (default 1). */
  maxBatch?: number;
}

/** What to plan for: a target rate or a GPU budget (exactly one). */
export interface PoolPlanInput {
  stages: StageCostInput[];
  /** Target rate, requests per minute. */
  ratePerMin?: number;
  /** Workers (GPUs) to split between the pools. */
  gpus?: number;
  /** Highest planned utilisation of a worker, in (0, 1] (default 0.8: queueing headroom). */
  utilisation?: number;
  /** Batch a whole-pipeline worker runs each stage at, capped by the stage's `maxBatch` (default 1). */
  wholeBatch?: number;
}

/** A bad planning input; `field` names it (`stages[1].maxBatch`, `gpus`, …). */
export class PoolPlanError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'PoolPlanError';
  }
}

/** One stage as planned. */
export interface PlannedStage {
  name: string;
  batch: number;
  /** Worker milliseconds per request at `batch`. */
  msPerRequest: number;
}

/** One pool as planned. */
export interface PlannedPool {
  pool: string;
  stages: PlannedStage[];
  /** Worker milliseconds per request, its stages together. */
  msPerRequest: number;
  workers: number;
  /** Requests per minute its workers can run at 100% utilisation. */
  capacityPerMin: number;
  /** Planned rate ÷ capacity. */
  utilisation: number;
}

/** The whole pipeline on every worker, on the same number of GPUs. */
export interface WholePipeline {
  workers: number;
  batch: number;
  /** Worker milliseconds per request: the sum of the stages' at `batch`. */
  msPerRequest: number;
  capacityPerMin: number;
  /** Workers a whole-pipeline deployment needs for the target rate (rate mode only). */
  workersForRate?: number;
}

/** A pool plan: sizes, the bound and the comparison with the whole pipeline. */
export interface PoolPlan {
  mode: 'rate' | 'gpus';
  utilisationCeiling: number;
  pools: PlannedPool[];
  totalWorkers: number;
  /** The pipeline's bound: the smallest pool capacity, requests/min. */
  capacityPerMin: number;
  bottleneck: string;
  /** The rate the plan is for: the target, or (GPU budget) the bound × the utilisation ceiling. */
  plannedRatePerMin: number;
  whole: WholePipeline;
  /** Disaggregated bound ÷ whole-pipeline capacity on the same workers. */
  ratio: number;
  /** Where the ratio comes from: `ratio = batchingGain × balance`. */
  explanation: {
    /** Whole-pipeline ms per request ÷ the pools' sum: what batching in the pools saves. */
    batchingGain: number;
    /** Bound ÷ (workers × 60 000 ÷ the pools' ms per request): ≤ 1, lost to whole workers per pool. */
    balance: number;
  };
}

const MINUTE_MS = 60_000;
/** Guards ceil() against float noise such as 2.0000000000000004. */
const EPSILON = 1e-9;

/** Plans the pools' sizes; throws {@link PoolPlanError} naming a bad field. */
export function planPools(input: PoolPlanInput): PoolPlan {
  const u = input.utilisation ?? 0.8;
  if (!(u > 0 && u <= 1)) throw new PoolPlanError('utilisation', `must be greater than 0 and at most 1, got ${u}`);
  if ((input.ratePerMin === undefined) === (input.gpus === undefined)) {
    throw new PoolPlanError('rate', 'give either a target rate or a GPU budget, not both or neither');
  }
  const wholeBatch = input.wholeBatch ?? 1;
  if (!(Number.isInteger(wholeBatch) && wholeBatch >= 1)) {
    throw new PoolPlanError('wholeBatch', `must be an integer ≥ 1, got ${wholeBatch}`);
  }
  const stages = checkStages(input.stages);
  const pools = groupPools(stages);
  const wholeMs = sum(stages.map((s) => stageMs(s, Math.min(wholeBatch, s.maxBatch))));

  let workers: number[];
  let mode: PoolPlan['mode'];
  if (input.ratePerMin !== undefined) {
    const rate = input.ratePerMin;
    if (!(Number.isFinite(rate) && rate > 0)) throw new PoolPlanError('rate', `must be a number greater than 0, got ${rate}`);
    mode = 'rate';
    workers = pools.map((p) => workersFor(rate, p.msPerRequest, u));
  } else {
    const gpus = input.gpus as number;
    if (!(Number.isInteger(gpus) && gpus >= pools.length)) {
      throw new PoolPlanError('gpus', `must be an integer ≥ the number of pools (${pools.length}), got ${gpus}`);
    }
    mode = 'gpus';
    workers = splitBudget(
      gpus,
      pools.map((p) => p.msPerRequest),
    );
  }

  const capacities = pools.map((p, i) => (workers[i] * MINUTE_MS) / p.msPerRequest);
  const bound = Math.min(...capacities);
  const b = capacities.indexOf(bound);
  const planned = mode === 'rate' ? (input.ratePerMin as number) : bound * u;
  const totalWorkers = sum(workers);
  const wholeCapacity = (totalWorkers * MINUTE_MS) / wholeMs;
  const pooledMs = sum(pools.map((p) => p.msPerRequest));
  return {
    mode,
    utilisationCeiling: u,
    pools: pools.map((p, i) => ({ ...p, workers: workers[i], capacityPerMin: capacities[i], utilisation: planned / capacities[i] })),
    totalWorkers,
    capacityPerMin: bound,
    bottleneck: pools[b].pool,
    plannedRatePerMin: planned,
    whole: {
      workers: totalWorkers,
      batch: wholeBatch,
      msPerRequest: wholeMs,
      capacityPerMin: wholeCapacity,
      ...(mode === 'rate' ? { workersForRate: workersFor(planned, wholeMs, u) } : {}),
    },
    ratio: bound / wholeCapacity,
    explanation: { batchingGain: wholeMs / pooledMs, balance: bound / ((totalWorkers * MINUTE_MS) / pooledMs) },
  };
}

interface CheckedStage {
  name: string;
  pool: string;
  fixedMs: number;
  perItemMs: number;
  steps: number;
  maxBatch: number;
}

function checkStages(stages: StageCostInput[]): CheckedStage[] {
  if (stages.length === 0) throw new PoolPlanError('stages', 'list at least one stage');
  const names = new Set<string>();
  return stages.map((s, i) => {
    const at = `stages[${i}]`;
    if (!s.name) throw new PoolPlanError(`${at}.name`, 'is required');
    if (names.has(s.name)) throw new PoolPlanError(`${at}.name`, `"${s.name}" is listed twice`);
    names.add(s.name);
    const fixedMs = nonNegative(s.fixedMs ?? 0, `${at}.fixedMs`);
    const perItemMs = nonNegative(s.perItemMs ?? 0, `${at}.perItemMs`);
    if (fixedMs + perItemMs <= 0) throw new PoolPlanError(`${at}.fixedMs`, `stage "${s.name}" costs nothing: give fixedMs or perItemMs`);
    const steps = s.steps ?? 1;
    if (!(Number.isInteger(steps) && steps >= 1)) throw new PoolPlanError(`${at}.steps`, `must be an integer ≥ 1, got ${steps}`);
    const maxBatch = s.maxBatch ?? 1;
    if (!(Number.isInteger(maxBatch) && maxBatch >= 1)) {
      throw new PoolPlanError(`${at}.maxBatch`, `must be an integer ≥ 1, got ${maxBatch}`);
    }
    return { name: s.name, pool: s.pool || s.name, fixedMs, perItemMs, steps, maxBatch };
  });
}

function nonNegative(n: number, field: string): number {
  if (!(Number.isFinite(n) && n >= 0)) throw new PoolPlanError(field, `must be a number ≥ 0, got ${n}`);
  return n;
}

/** Worker ms per request of a stage at `batch`. */
function stageMs(s: CheckedStage, batch: number): number {
  return (s.steps * (s.fixedMs + s.perItemMs * batch)) / batch;
}

/** Stages grouped by pool, each at its largest batch. */
function groupPools(stages: CheckedStage[]): Omit<PlannedPool, 'workers' | 'capacityPerMin' | 'utilisation'>[] {
  const byPool = new Map<string, PlannedStage[]>();
  for (const s of stages) {
    const list = byPool.get(s.pool) ?? [];
    list.push({ name: s.name, batch: s.maxBatch, msPerRequest: stageMs(s, s.maxBatch) });
    byPool.set(s.pool, list);
  }
  return [...byPool].map(([pool, list]) => ({ pool, stages: list, msPerRequest: sum(list.map((s) => s.msPerRequest)) }));
}

function workersFor(ratePerMin: number, msPerRequest: number, u: number): number {
  return Math.max(1, Math.ceil((ratePerMin * msPerRequest) / (MINUTE_MS * u) - EPSILON));
}

/** One worker each, then each further worker to the pool with the smallest capacity (the first on a tie). */
function splitBudget(gpus: number, msPerRequest: number[]): number[] {
  const workers = msPerRequest.map(() => 1);
  for (let left = gpus - workers.length; left > 0; left -= 1) {
    let min = 0;
    for (let i = 1; i < workers.length; i += 1) {
      if (workers[i] / msPerRequest[i] < workers[min] / msPerRequest[min]) min = i;
    }
    workers[min] += 1;
  }
  return workers;
}

function sum(xs: number[]): number {
  return xs.reduce((a, x) => a + x, 0);
}

const STAGE_KEYS: Record<string, keyof StageCostInput> = {
  name: 'name',
  pool: 'pool',
  fixedMs: 'fixedMs',
  'fixed-ms': 'fixedMs',
  perItemMs: 'perItemMs',
  'per-item-ms': 'perItemMs',
  steps: 'steps',
  maxBatch: 'maxBatch',
  'max-batch': 'maxBatch',
};

/**
 * Reads a stage-costs file (YAML or JSON): a list of stages, or `{ stages: [...] }`; keys as in
 * {@link StageCostInput} or in the CLI's spelling (`fixed-ms`, `per-item-ms`, `max-batch`).
 */
export function parseStageCosts(text: string): StageCostInput[] {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new PoolPlanError('stages', `not YAML or JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const list = Array.isArray(doc) ? doc : (doc as { stages?: unknown } | null)?.stages;
  if (!Array.isArray(list)) throw new PoolPlanError('stages', 'expected a list of stages, or an object with a "stages" list');
  return list.map((item: unknown, i) => {
    if (typeof item !== 'object' || item === null) throw new PoolPlanError(`stages[${i}]`, 'expected an object');
    const stage: Record<string, string | number> = {};
    for (const [key, value] of Object.entries(item)) {
      const field = STAGE_KEYS[key];
      if (!field) throw new PoolPlanError(`stages[${i}].${key}`, `unknown key (known: ${Object.keys(STAGE_KEYS).join(', ')})`);
      const isText = field === 'name' || field === 'pool';
      if (isText ? typeof value !== 'string' : typeof value !== 'number') {
        throw new PoolPlanError(`stages[${i}].${key}`, `expected a ${isText ? 'string' : 'number'}, got ${JSON.stringify(value)}`);
      }
      stage[field] = value as string | number;
    }
    return stage as unknown as StageCostInput;
  });
}
