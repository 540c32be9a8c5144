import { describe, expect, it } from 'vitest';
import { createScheduler } from './create-scheduler.js';
import { fluxPipelineSigmas } from './flow-match-euler-scheduler.js';
import { decodeSchedulerState, encodeSchedulerState } from './state-codec.js';
import { pattern, SeededNormals } from './test-support.js';
import type { CreateSchedulerOptions, DiffusionScheduler, SchedulerState } from './types.js';

/**
 * Checkpoint and resume: a run stopped after K steps, its state encoded to bytes, decoded,
 * restored into a freshly created scheduler (as a retried task on another instance would),
 * and continued, ends with exactly the same bits as the uninterrupted run.
 */

const LATENT = { beta_start: 0.00085, beta_end: 0.012, beta_schedule: 'scaled_linear', num_train_timesteps: 1000 };
const SIZE = 32;
const SEED = 77;

/** A deterministic stand-in model that depends on the sample and the timestep. */
function model(x: Float32Array, t: number): Float32Array {
  const c = pattern(5, 0, x.length);
  return Float32Array.from(x, (v, k) => 0.3 * v + c[k] * Math.cos(t / 300));
}

function start(s: DiffusionScheduler, img2img: boolean, rng: SeededNormals): Float32Array {
  const noise = rng.normals(SIZE);
  return img2img ? s.addNoise(pattern(6, 0, SIZE), noise, 0) : Float32Array.from(noise, (v) => v * s.initNoiseSigma);
}

function steps(s: DiffusionScheduler, x: Float32Array, from: number, to: number, rng: SeededNormals): Float32Array {
  for (let i = from; i < to; i += 1) x = s.step(model(s.scaleModelInput(x, i), s.timesteps[i]), i, x, rng);
  return x;
}

const CASES: [string, Record<string, unknown>, CreateSchedulerOptions][] = [
  ['PNDM PLMS (multistep history ets)', { _class_name: 'PNDMScheduler', ...LATENT, skip_prk_steps: true, steps_offset: 1 }, { steps: 20 }],
  ['PNDM with PRK warm-up (stopped inside the warm-up)', { _class_name: 'PNDMScheduler', ...LATENT }, { steps: 10 }],
  ['DDIM η = 1 (noise)', { _class_name: 'DDIMScheduler', ...LATENT, clip_sample: false }, { steps: 12, eta: 1 }],
  ['Euler Karras', { _class_name: 'EulerDiscreteScheduler', ...LATENT, use_karras_sigmas: true }, { steps: 12 }],
  ['Euler ancestral (noise)', { _class_name: 'EulerAncestralDiscreteScheduler', ...LATENT }, { steps: 12 }],
  ['Euler ancestral img2img', { _class_name: 'EulerAncestralDiscreteScheduler', ...LATENT }, { steps: 12, strength: 0.6 }],
  ['DPM-Solver++ 2M (model output history)', { _class_name: 'DPMSolverMultistepScheduler', ...LATENT }, { steps: 12 }],
  [
    'DPM-Solver++ 2M Karras img2img',
    { _class_name: 'DPMSolverMultistepScheduler', ...LATENT, use_karras_sigmas: true },
    { steps: 16, strength: 0.5 },
  ],
  ['LCM (noise)', { _class_name: 'LCMScheduler', ...LATENT }, { steps: 6 }],
  [
    'flow match (Flux)',
    { _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 3.0, use_dynamic_shifting: true },
    { steps: 10, imageSeqLen: 1024, sigmas: fluxPipelineSigmas(10) },
  ],
];

describe('resume from getState()/restoreState()', () => {
  for (const [name, config, opts] of CASES) {
    it(`${name}: every stopping point gives the uninterrupted run's bits`, () => {
      const img2img = (opts.strength ?? 1) < 1;
      const ref = createScheduler(config, opts);
      const refRng = new SeededNormals(SEED);
      const total = ref.timesteps.length;
      const expected = steps(ref, start(ref, img2img, refRng), 0, total, refRng);

      for (let k = 1; k < total; k += 1) {
        // first attempt: runs k steps, checkpoints latent + scheduler state, dies
        const a = createScheduler(config, opts);
        const rngA = new SeededNormals(SEED);
        const xk = steps(a, start(a, img2img, rngA), 0, k, rngA);
        const bytes = encodeSchedulerState(a.getState());
        const latent = xk.slice();

        // retry: a new scheduler, the decoded state, the noise source brought to the same place
        const b = createScheduler(config, opts);
        const state = decodeSchedulerState(bytes);
        b.restoreState(state);
        expect(state.nextStep).toBe(k);
        const rngB = new SeededNormals(SEED);
        rngB.normals(SIZE); // the start noise
        rngB.normals(state.noiseDrawn);
        const out = steps(b, latent, k, total, rngB);
        expect(Buffer.from(out.buffer).equals(Buffer.from(expected.buffer)), `resumed after ${k} steps`).toBe(true);
      }
    });
  }

  it('the state is plain JSON plus Float32Array buffers, detached from the scheduler', () => {
    const s = createScheduler({ _class_name: 'DPMSolverMultistepScheduler', ...LATENT }, { steps: 10 });
    let x = pattern(1, 0, SIZE);
    for (let i = 0; i < 3; i += 1) x = s.step(model(x, s.timesteps[i]), i, x);
    const state = s.getState();
    const { buffers, ...plain } = state;
    expect(JSON.parse(JSON.stringify(plain))).toEqual(plain);
    expect(plain).toMatchObject({ version: 1, className: 'DPMSolverMultistepScheduler', nextStep: 3, values: { lower_order_nums: 2 } });
    expect(Object.keys(buffers).sort()).toEqual(['model_outputs.0', 'model_outputs.1']);
    const before = state.buffers['model_outputs.1'].slice();
    x = s.step(model(x, s.timesteps[3]), 3, x);
    expect(state.buffers['model_outputs.1']).toEqual(before);
  });

  it('PNDM keeps its last four model outputs', () => {
    const s = createScheduler({ _class_name: 'PNDMScheduler', ...LATENT, skip_prk_steps: true }, { steps: 10 });
    let x = pattern(1, 0, SIZE);
    for (let i = 0; i < 7; i += 1) x = s.step(model(x, s.timesteps[i]), i, x);
    const st = s.getState();
    expect(st.values).toEqual({ counter: 7, ets: 4 });
    expect(Object.keys(st.buffers).sort()).toEqual(['ets.0', 'ets.1', 'ets.2', 'ets.3']);
  });

  it('refuses a state from another config, another class, or a corrupt one', () => {
    const cfg = { _class_name: 'DPMSolverMultistepScheduler', ...LATENT };
    const s = createScheduler(cfg, { steps: 10 });
    const state = s.getState();
    expect(() => createScheduler(cfg, { steps: 11 }).restoreState(state)).toThrow(/another scheduler config or options/);
    expect(() => createScheduler({ ...cfg, use_karras_sigmas: true }, { steps: 10 }).restoreState(state)).toThrow(/another/);
    expect(() => createScheduler({ ...cfg, _class_name: 'DDIMScheduler' }, { steps: 10 }).restoreState(state)).toThrow(
      /saved by DPMSolverMultistepScheduler/,
    );
    const bad: SchedulerState = { ...state, nextStep: 99 };
    expect(() => createScheduler(cfg, { steps: 10 }).restoreState(bad)).toThrow(/outside/);
    expect(() => decodeSchedulerState(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]))).toThrow(/not an encoded scheduler state/);
  });

  it('steps must run in order; a stochastic step needs noise', () => {
    const s = createScheduler({ _class_name: 'EulerAncestralDiscreteScheduler', ...LATENT }, { steps: 5 });
    const x = pattern(1, 0, SIZE);
    expect(() => s.step(x, 1, x, new SeededNormals(1))).toThrow(/next step is 0/);
    expect(() => s.step(x, 0, x)).toThrow(/needs a NoiseSource/);
    expect(() => s.step(x.subarray(1), 0, x, new SeededNormals(1))).toThrow(/model output has 31 values, sample has 32/);
    expect(() => s.scaleModelInput(x, 5)).toThrow(/outside 0…4/);
  });
});
