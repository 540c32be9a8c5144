/**
 * What a task costs, known at admission: the unit of fair share and of tenant quotas.
 *
 * The nominal cost is a pure function of the stage and the request's parameters: pixels ×
 * frames × steps for `denoising` (the loop runs its model once per step), pixels × frames
 * for every other stage. Once this scheduler has seen tasks of a model finish in a pool
 * ({@link MIN_SAMPLES} of them), the estimate is corrected by what they measured: the nominal
 * cost × the model's run time per nominal unit ÷ the pool's (all its models'). The unit stays
 * the same — "nominal units at the pool's average speed" — so quotas keep their meaning, and a
 * model that runs twice as slow per pixel-step as the pool's others costs twice as much.
 */
import type { GenerationParams, StageName } from '@diffmesh/core';

/** Finished tasks of a model in a pool before its measured factor is used. */
export const MIN_SAMPLES = 3;

/** Weight of a new sample in the running averages. */
const ALPHA = 0.2;

/** The nominal cost of a stage task: pixels × frames (× steps for denoising), at least 1. */
export function nominalCost(
  stage: StageName,
  params: Pick<GenerationParams, 'width' | 'height' | 'numFrames' | 'numInferenceSteps'>,
): number {
  const pixels = Math.max(1, params.width) * Math.max(1, params.height) * Math.max(1, params.numFrames);
  return stage === 'denoising' ? pixels * Math.max(1, params.numInferenceSteps) : pixels;
}

interface Average {
  value: number;
  samples: number;
}

/** Nominal costs corrected by measured run times (see the file comment); per scheduler. */
export class TaskCosts {
  private readonly byModel = new Map<string, Average>();
  private readonly byPool = new Map<string, Average>();

  /** The cost of a task of `model` at `stage` in `pool`. */
  estimate(pool: string, model: string, stage: StageName, params: GenerationParams): number {
    const nominal = nominalCost(stage, params);
    const m = this.byModel.get(`${pool}\u0000${model}`);
    const p = this.byPool.get(pool);
    if (!m || !p || m.samples < MIN_SAMPLES || p.value <= 0) return nominal;
    return nominal * (m.value / p.value);
  }

  /**
   * How long a task of `model` at `stage` in `pool` is expected to run (ms), from the run
   * times measured here: the model's own once it has {@link MIN_SAMPLES}, else the pool's
   * average per nominal unit; undefined before any task of the pool finished.
   */
  estimateMs(pool: string, model: string, stage: StageName, params: GenerationParams): number | undefined {
    const m = this.byModel.get(`${pool}\u0000${model}`);
    const p = this.byPool.get(pool);
    const perUnit = m && m.samples >= MIN_SAMPLES ? m.value : p?.value;
    return perUnit === undefined ? undefined : perUnit * nominalCost(stage, params);
  }

  /** A task finished after running `runMs` on an instance. */
  observe(pool: string, model: string, stage: StageName, params: GenerationParams, runMs: number): void {
    if (!(runMs >= 0)) return;
    const perUnit = runMs / nominalCost(stage, params);
    update(this.byModel, `${pool}\u0000${model}`, perUnit);
    update(this.byPool, pool, perUnit);
  }
}

function update(map: Map<string, Average>, key: string, sample: number): void {
  const a = map.get(key);
  if (!a) map.set(key, { value: sample, samples: 1 });
  else {
    a.value = a.value + ALPHA * (sample - a.value);
    a.samples += 1;
  }
}
