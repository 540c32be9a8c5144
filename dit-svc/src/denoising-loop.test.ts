/**
 * The denoising loop against a toy run (a 2×2 one-channel latent that each step moves by the
 * guided output): what the loop owns whatever the model is — guidance, progress counted from
 * the run's first step, previews, preemption after the previews at a step boundary, resuming
 * from a checkpoint, the output.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  Code,
  DiffmeshError,
  silentLogger,
  type GenerationParams,
  type ObjectRef,
  type StageContext,
  type StageProgress,
  type StageTask,
} from '@diffmesh/core';
import { createTensorStore, float32View } from '@diffmesh/tensor-client';
import { CHECKPOINT_NAME, Checkpointer, decodeCheckpoint, encodeCheckpoint, type DenoiseCheckpoint } from './checkpoint.js';
import { DenoisingLoop, type DenoisingRun, type RunPlan } from './denoising-loop.js';
import { NoiseRng } from './rng.js';
import type { Prediction } from './step-batcher.js';

const store = createTensorStore({ backend: 'memory' });
afterAll(() => store.close());

/** x ← x + out; the model predicts `cond` = 1 + i and `uncond` = 0.5 at step i. */
class ToyRun implements DenoisingRun {
  readonly plan: RunPlan;
  x = new Float32Array(4);
  readonly predicted: number[] = [];
  restored: DenoiseCheckpoint | undefined;

  constructor(totalSteps: number, firstStep = 0, cfg = true) {
    const projection = { kind: 'linear', factors: [[1, 1, 1]], bias: [0, 0, 0] } as const;
    this.plan = { totalSteps, firstStep, fingerprint: 'toy', latentLength: 4, callsPerStep: cfg ? 2 : 1, projection };
  }

  modelInput(): Float32Array {
    return this.x;
  }

  predict(_input: Float32Array, i: number): Promise<Prediction> {
    this.predicted.push(i);
    const out = (v: number, run: number) => ({ out: new Float32Array(4).fill(v), batchSize: 2, run });
    return Promise.resolve(this.plan.callsPerStep === 2 ? { cond: out(1 + i, i), uncond: out(0.5, i) } : { cond: out(1 + i, i) });
  }

  step(out: Float32Array): void {
    for (let k = 0; k < 4; k += 1) this.x[k] += out[k];
  }

  state() {
    return { latent: this.x, rng: new NoiseRng('1').getState() };
  }

  restore(c: DenoiseCheckpoint): void {
    this.restored = c;
    this.x.set(c.latent);
  }

  previewFrame() {
    return { data: this.x.slice(), channels: 1, height: 2, width: 2 };
  }

  output() {
    return { data: this.x, shape: [1, 1, 2, 2] };
  }
}

const PARAMS = { prompt: 'p', negativePrompt: '', width: 16, height: 16, numFrames: 1, seed: '1', fps: 8 };

function task(params: Partial<GenerationParams> = {}, inputs: Record<string, ObjectRef> = {}): StageTask {
  const p: GenerationParams = { ...PARAMS, numInferenceSteps: 5, guidanceScale: 3, ...params };
  return {
    reqId: `loop-${Math.random()}`,
    stageIndex: 1,
    stage: 'denoising',
    attempt: 1,
    model: 'toy',
    params: p,
    inputs,
    deadline: 0,
    traceContext: {},
  };
}

function context(progress: StageProgress[], preempt?: AbortController, preemptAfterStep?: number): StageContext {
  return {
    signal: new AbortController().signal,
    ...(preempt ? { preempt: preempt.signal } : {}),
    log: silentLogger(),
    onProgress: (p) => {
      progress.push(p);
      if (p.step === preemptAfterStep) preempt?.abort();
    },
  };
}

const loop = (every = 0) => new DenoisingLoop({ store, checkpoints: new Checkpointer({ store, every }) });

describe('DenoisingLoop', () => {
  it('guides the pair, steps from the first step and counts progress from there', async () => {
    const run = new ToyRun(5, 2);
    const progress: StageProgress[] = [];
    const result = await loop().run(task(), context(progress), run);
    // Steps 2, 3, 4: uncond + 3·(cond − uncond) = 0.5 + 3·(i + 0.5) → 8, 11, 14.
    expect(run.predicted).toEqual([2, 3, 4]);
    expect(progress.map((p) => [p.step, p.totalSteps])).toEqual([
      [1, 3],
      [2, 3],
      [3, 3],
    ]);
    expect(Array.from(float32View((await store.get(result.outputs.latents)).data))).toEqual([33, 33, 33, 33]);
  });

  it('uses the conditional output alone without a CFG pair', async () => {
    const run = new ToyRun(3, 0, false);
    await loop().run(task(), context([]), run);
    expect(Array.from(run.x)).toEqual([6, 6, 6, 6]);
  });

  it('stops when preempted at the next step boundary, its checkpoint reported with the previews drawn by then', async () => {
    const run = new ToyRun(5);
    const progress: StageProgress[] = [];
    const preempt = new AbortController();
    const err = await loop()
      .run(task({ preview: { everySteps: 1, maxSide: 8 } }), context(progress, preempt, 1), run)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiffmeshError);
    expect((err as DiffmeshError).code).toBe(Code.UNAVAILABLE);
    expect((err as DiffmeshError).reason).toBe('PREEMPTED');
    expect(run.predicted).toEqual([0, 1]);
    const last = progress.at(-1) as StageProgress;
    expect(last).toMatchObject({ step: 2, totalSteps: 5, preempted: true });
    // Step 1's preview, drawn while step 2 ran, goes out with the preempted report.
    expect(last.previews?.map((p) => p.step)).toEqual([1]);
    const saved = decodeCheckpoint((await store.get(last.checkpoint?.[CHECKPOINT_NAME] as ObjectRef)).data);
    expect(saved).toMatchObject({ step: 2, totalSteps: 5, fingerprint: 'toy' });
    expect(Array.from(saved.latent)).toEqual(Array.from(run.x));
  });

  it('resumes from a checkpoint of the same run, and starts over from one of another run', async () => {
    const c = { step: 3, totalSteps: 5, fingerprint: 'toy', latent: Float32Array.of(1, 2, 3, 4), rng: new NoiseRng('1').getState() };
    const put = async (cp: DenoiseCheckpoint) => {
      const data = encodeCheckpoint(cp);
      return store.put({ requestId: 'resume', name: CHECKPOINT_NAME, data, shape: [data.byteLength], dtype: 'uint8' });
    };
    const resumed = new ToyRun(5);
    const progress: StageProgress[] = [];
    await loop().run(task({}, { [CHECKPOINT_NAME]: await put(c) }), context(progress), resumed);
    expect(resumed.restored?.step).toBe(3);
    // Steps 3 and 4 add 0.5 + 3·3.5 = 11 and 0.5 + 3·4.5 = 14 to the checkpoint's latent.
    expect(resumed.predicted).toEqual([3, 4]);
    expect(progress.map((p) => p.step)).toEqual([4, 5]);
    expect(Array.from(resumed.x)).toEqual([1 + 25, 2 + 25, 3 + 25, 4 + 25]);

    const other = new ToyRun(5);
    await loop().run(task({}, { [CHECKPOINT_NAME]: await put({ ...c, fingerprint: 'another' }) }), context([]), other);
    expect(other.restored).toBeUndefined();
    expect(other.predicted).toEqual([0, 1, 2, 3, 4]);
  });

  it('saves a checkpoint with the progress of every K-th step, never after the last', async () => {
    const progress: StageProgress[] = [];
    await loop(2).run(task(), context(progress), new ToyRun(5));
    expect(progress.filter((p) => p.checkpoint).map((p) => p.step)).toEqual([2, 4]);
  });
});
