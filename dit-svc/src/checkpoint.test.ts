/**
 * Step checkpoints: a denoising task retried from its last checkpoint (as the scheduler hands
 * it to the next try on another instance) ends with exactly the bits of an uninterrupted run,
 * for the built-in model and for model directories with stochastic (Euler ancestral) and
 * multistep (DPM-Solver++ 2M) schedulers.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSdDir, defaultModelsRoot } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { DiffmeshError, silentLogger, type GenerationParams, type ObjectRef, type StageProgress, type StageTask } from '@diffmesh/core';
import { CHECKPOINT_NAME, decodeCheckpoint, encodeCheckpoint } from './checkpoint.js';
import { DenoisingStage } from './denoising-stage.js';
import { NoiseRng } from './rng.js';

let store: TensorStore;
let sessions: SessionCache;
let root: string;
const directories: Record<string, string> = {};

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-checkpoint-'));
  directories['test/sd-euler-a'] = path.join(root, 'sd-euler-a');
  directories['test/sd-dpm'] = path.join(root, 'sd-dpm');
  await buildSdDir(directories['test/sd-euler-a'], { scheduler: { _class_name: 'EulerAncestralDiscreteScheduler' } });
  await buildSdDir(directories['test/sd-dpm'], { scheduler: { _class_name: 'DPMSolverMultistepScheduler', use_karras_sigmas: true } });
});
afterAll(async () => {
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

function stage(checkpointEvery: number): DenoisingStage {
  const catalog = new ModelCatalog([defaultModelsRoot()], { directories });
  return new DenoisingStage({ catalog, sessions, store, models: [], maxBatch: 4, checkpointEvery });
}

/** Text embeddings as the encoder would store them (any values do: the run only has to repeat). */
async function embeds(reqId: string, length: number, hidden: number): Promise<Record<string, ObjectRef>> {
  const rng = new NoiseRng(77n);
  const put = (name: string) =>
    store.put({ requestId: reqId, name, data: toBytes(rng.normals(length * hidden)), shape: [1, length, hidden], dtype: 'float32' });
  return { prompt_embeds: await put('prompt_embeds'), negative_prompt_embeds: await put('negative_prompt_embeds') };
}

interface Run {
  latents: Float32Array;
  progress: StageProgress[];
}

async function run(s: DenoisingStage, task: StageTask, abortAfterStep?: number): Promise<Run> {
  const progress: StageProgress[] = [];
  const controller = new AbortController();
  try {
    const result = await s.execute(task, {
      signal: controller.signal,
      log: silentLogger(),
      onProgress: (p) => {
        progress.push(p);
        if (abortAfterStep !== undefined && p.step >= abortAfterStep) controller.abort();
      },
    });
    return { latents: float32View((await store.get(result.outputs.latents)).data).slice(), progress };
  } catch (err) {
    if (abortAfterStep === undefined) throw err;
    return { latents: new Float32Array(0), progress };
  }
}

function task(reqId: string, model: string, params: Partial<GenerationParams>, inputs: Record<string, ObjectRef>, attempt = 1): StageTask {
  return {
    reqId,
    stageIndex: 1,
    stage: 'denoising',
    attempt,
    model,
    params: {
      prompt: 'a red circle',
      negativePrompt: '',
      width: 64,
      height: 64,
      numFrames: 1,
      numInferenceSteps: 12,
      guidanceScale: 2,
      seed: '41',
      fps: 8,
      ...params,
    },
    inputs,
    deadline: 0,
    traceContext: {},
  };
}

describe('checkpoint codec', () => {
  it('round-trips a checkpoint and refuses a corrupt one with DATA_LOSS', () => {
    const rng = new NoiseRng('9');
    rng.normals(3);
    const c = {
      step: 4,
      totalSteps: 10,
      fingerprint: 'f',
      latent: Float32Array.of(1, -2, 3.5),
      rng: rng.getState(),
      scheduler: Uint8Array.of(1, 2, 3),
    };
    const back = decodeCheckpoint(encodeCheckpoint(c));
    expect(back).toEqual(c);
    const bytes = encodeCheckpoint(c);
    for (const bad of [
      bytes.subarray(0, 10),
      bytes.subarray(0, bytes.length - 1),
      Uint8Array.from(bytes, (b, i) => (i === 0 ? b ^ 1 : b)),
    ]) {
      expect(() => decodeCheckpoint(bad)).toThrow(DiffmeshError);
    }
  });

  it('carries the noise stream over exactly, a pending Box–Muller value included', () => {
    const a = new NoiseRng('123');
    a.normals(5); // odd count: one value pending
    const b = NoiseRng.fromState(a.getState());
    expect(b.normals(7)).toEqual(a.normals(7));
  });
});

describe.each([
  ['the built-in model', 'diffmesh/tiny-shapes', { width: 64, height: 64 }, 16, 32],
  ['a model directory with Euler ancestral', 'test/sd-euler-a', {}, 77, 32],
  ['a model directory with DPM-Solver++ 2M (Karras)', 'test/sd-dpm', {}, 77, 32],
])('a retried denoising task on %s', (_name, model, params, length, hidden) => {
  it('resumes from its last checkpoint and ends with the bits of an uninterrupted run', async () => {
    const inputs = await embeds(`r-${model.replace(/\W/g, '')}`, length, hidden);
    const reqId = `r-${model.replace(/\W/g, '')}`;
    const whole = await run(stage(0), task(reqId, model, params, inputs));
    expect(whole.progress.some((p) => p.checkpoint)).toBe(false);

    // The first try stores checkpoints every 3 steps and dies after step 7.
    const first = await run(stage(3), task(reqId, model, params, inputs), 7);
    const saved = first.progress.filter((p) => p.checkpoint).map((p) => p.checkpoint![CHECKPOINT_NAME]);
    expect(saved.length).toBe(2); // after steps 3 and 6
    // The second try, on another instance, gets the latest checkpoint among its inputs.
    const second = await run(stage(3), task(reqId, model, params, { ...inputs, [CHECKPOINT_NAME]: saved[1] }, 2));
    expect(second.progress[0].step).toBe(7); // it went on from step 6
    expect(Buffer.from(second.latents.buffer).equals(Buffer.from(whole.latents.buffer))).toBe(true);
  });

  it('starts over from a checkpoint of another run (other parameters), and still gets that run right', async () => {
    const inputs = await embeds(`o-${model.replace(/\W/g, '')}`, length, hidden);
    const reqId = `o-${model.replace(/\W/g, '')}`;
    const first = await run(stage(3), task(reqId, model, { ...params, seed: '1' }, inputs), 4);
    const ref = first.progress.find((p) => p.checkpoint)!.checkpoint![CHECKPOINT_NAME];
    const other = await run(stage(3), task(reqId, model, { ...params, seed: '2' }, { ...inputs, [CHECKPOINT_NAME]: ref }, 2));
    expect(other.progress[0].step).toBe(1);
    const fresh = await run(stage(0), task(reqId, model, { ...params, seed: '2' }, inputs));
    expect(Buffer.from(other.latents.buffer).equals(Buffer.from(fresh.latents.buffer))).toBe(true);
  });
});
