import { describe, expect, it } from 'vitest';
import { parseSchedulerConfigJson } from './config.js';
import { createScheduler, SUPPORTED_SCHEDULERS } from './create-scheduler.js';
import { SchedulerError } from './errors.js';
import { schedulerTraits } from './scheduler-traits.js';

/** Config validation: unknown classes, bad fields and unsupported options fail clearly. */

const LATENT = { beta_start: 0.00085, beta_end: 0.012, beta_schedule: 'scaled_linear', num_train_timesteps: 1000 };

function refusal(config: unknown, opts: object = { steps: 10 }): SchedulerError {
  try {
    createScheduler(config, { steps: 10, ...opts });
  } catch (err) {
    expect(err).toBeInstanceOf(SchedulerError);
    return err as SchedulerError;
  }
  throw new Error('expected createScheduler to throw');
}

describe('scheduler config errors', () => {
  it('an unknown class names it and lists the supported ones', () => {
    const e = refusal({ _class_name: 'UniPCMultistepScheduler', ...LATENT });
    expect(e.code).toBe('UNKNOWN_SCHEDULER');
    expect(e.field).toBe('_class_name');
    expect(e.message).toContain('"UniPCMultistepScheduler" is not supported');
    for (const name of SUPPORTED_SCHEDULERS) expect(e.message).toContain(name);
    expect(SUPPORTED_SCHEDULERS).toHaveLength(7);
    expect(refusal({ ...LATENT }).message).toMatch(/no `_class_name`/);
    expect(refusal('PNDMScheduler').message).toMatch(/must be a JSON object/);
  });

  it('bad field values name the field', () => {
    const bad: [Record<string, unknown>, string, RegExp][] = [
      [
        { _class_name: 'DDIMScheduler', beta_schedule: 'cosine' },
        'beta_schedule',
        /one of "linear", "scaled_linear", "squaredcos_cap_v2", got "cosine"/,
      ],
      [{ _class_name: 'DDIMScheduler', num_train_timesteps: '1000' }, 'num_train_timesteps', /must be an integer, got "1000"/],
      [{ _class_name: 'DDIMScheduler', clip_sample: 'yes' }, 'clip_sample', /true or false/],
      [{ _class_name: 'DDIMScheduler', timestep_spacing: 'uniform' }, 'timestep_spacing', /"leading", "trailing", "linspace"/],
      [{ _class_name: 'DDIMScheduler', beta_end: 1.5 }, 'beta_end', /must be < 1/],
      [{ _class_name: 'DDIMScheduler', steps_offset: -1 }, 'steps_offset', /≥ 0/],
      [{ _class_name: 'DDIMScheduler', prediction_type: 'x0' }, 'prediction_type', /got "x0"/],
      [{ _class_name: 'DDIMScheduler', trained_betas: [0.1, 0.2] }, 'trained_betas', /has 2 values but num_train_timesteps is 1000/],
      [{ _class_name: 'LCMScheduler', original_inference_steps: 2000 }, 'original_inference_steps', /more than num_train_timesteps/],
      [{ _class_name: 'FlowMatchEulerDiscreteScheduler', shift: 0 }, 'shift', /must be > 0/],
      [{ _class_name: 'FlowMatchEulerDiscreteScheduler', time_shift_type: 'cubic' }, 'time_shift_type', /"exponential", "linear"/],
      [{ _class_name: 'DPMSolverMultistepScheduler', lambda_min_clipped: 'low' }, 'lambda_min_clipped', /must be a number/],
    ];
    for (const [config, field, message] of bad) {
      const e = refusal(config);
      expect(e.code, field).toBe('INVALID_FIELD');
      expect(e.field).toBe(field);
      expect(e.message).toMatch(message);
      expect(e.message).toContain(`\`${field}\``);
    }
  });

  it('valid diffusers options that are not implemented are refused by name', () => {
    const unsupported: [Record<string, unknown>, string, RegExp][] = [
      [
        { _class_name: 'DPMSolverMultistepScheduler', algorithm_type: 'sde-dpmsolver++' },
        'algorithm_type',
        /"sde-dpmsolver\+\+" is not supported/,
      ],
      [{ _class_name: 'DPMSolverMultistepScheduler', algorithm_type: 'dpmsolver' }, 'algorithm_type', /supported: "dpmsolver\+\+"/],
      [{ _class_name: 'DPMSolverMultistepScheduler', solver_order: 3 }, 'solver_order', /= 3 is not supported \(supported: 1, 2\)/],
      [{ _class_name: 'DPMSolverMultistepScheduler', use_lu_lambdas: true }, 'use_lu_lambdas', /not supported/],
      [{ _class_name: 'DPMSolverMultistepScheduler', variance_type: 'learned_range' }, 'variance_type', /not supported/],
      [{ _class_name: 'DPMSolverMultistepScheduler', prediction_type: 'flow_prediction' }, 'prediction_type', /not supported/],
      [{ _class_name: 'EulerDiscreteScheduler', use_exponential_sigmas: true }, 'use_exponential_sigmas', /not supported/],
      [{ _class_name: 'EulerDiscreteScheduler', interpolation_type: 'log_linear' }, 'interpolation_type', /"log_linear" is not supported/],
      [{ _class_name: 'EulerAncestralDiscreteScheduler', prediction_type: 'sample' }, 'prediction_type', /"sample" is not supported/],
      [{ _class_name: 'PNDMScheduler', prediction_type: 'sample' }, 'prediction_type', /"sample" is not supported/],
      [{ _class_name: 'FlowMatchEulerDiscreteScheduler', stochastic_sampling: true }, 'stochastic_sampling', /not supported/],
      [{ _class_name: 'FlowMatchEulerDiscreteScheduler', invert_sigmas: true }, 'invert_sigmas', /not supported/],
      [{ _class_name: 'FlowMatchEulerDiscreteScheduler', use_karras_sigmas: true }, 'use_karras_sigmas', /not supported/],
    ];
    for (const [config, field, message] of unsupported) {
      const e = refusal(config);
      expect(e.code, field).toBe('UNSUPPORTED_OPTION');
      expect(e.field).toBe(field);
      expect(e.message).toMatch(message);
      expect(e.message.startsWith(`${config._class_name as string}:`)).toBe(true);
    }
    const prk = refusal({ _class_name: 'PNDMScheduler' }, { strength: 0.5 });
    expect(prk.field).toBe('skip_prk_steps');
  });

  it('run options are checked too', () => {
    expect(refusal({ _class_name: 'DDIMScheduler' }, { steps: 0 }).field).toBe('steps');
    expect(refusal({ _class_name: 'DDIMScheduler' }, { steps: 1001 }).message).toMatch(/more than num_train_timesteps/);
    expect(refusal({ _class_name: 'DDIMScheduler' }, { strength: 1.5 }).field).toBe('strength');
    expect(refusal({ _class_name: 'DDIMScheduler' }, { strength: 0.05 }).message).toMatch(/leaves no denoising step/);
    expect(refusal({ _class_name: 'LCMScheduler' }, { steps: 8, strength: 0.1 }).message).toMatch(/smaller than steps/);
    const dyn = refusal({ _class_name: 'FlowMatchEulerDiscreteScheduler', use_dynamic_shifting: true });
    expect(dyn.field).toBe('imageSeqLen');
    expect(dyn.message).toMatch(/use_dynamic_shifting/);
    expect(refusal({ _class_name: 'FlowMatchEulerDiscreteScheduler' }, { sigmas: [1, 0.5] }).field).toBe('sigmas');
    expect(refusal({ _class_name: 'DDIMScheduler' }, { eta: -1 }).field).toBe('eta');
    expect(refusal({ _class_name: 'EulerDiscreteScheduler' }, { steps: 2, sigmas: [1, 0.5] }).message).toMatch(
      /only supported for FlowMatch/,
    );
  });

  it('unknown keys and nulls are ignored as diffusers does; another class can read the same config', () => {
    const sd15 = {
      _class_name: 'PNDMScheduler',
      _diffusers_version: '0.6.0',
      ...LATENT,
      set_alpha_to_one: false,
      skip_prk_steps: true,
      steps_offset: 1,
      trained_betas: null,
      clip_sample: false,
      some_future_option: { nested: true },
    };
    expect(createScheduler(sd15, { steps: 20 }).className).toBe('PNDMScheduler');
    const dpm = createScheduler(sd15, { steps: 20, className: 'DPMSolverMultistepScheduler' });
    expect(dpm.className).toBe('DPMSolverMultistepScheduler');
  });

  it('parses Python-written JSON with -Infinity (json.dumps of lambda_min_clipped)', () => {
    const cfg = parseSchedulerConfigJson(
      '{"_class_name": "DPMSolverMultistepScheduler", "lambda_min_clipped": -Infinity, "note": "-Infinity \\" NaN", "x": NaN}',
    );
    expect(cfg.lambda_min_clipped).toBe(-Infinity);
    expect(cfg.note).toBe('-Infinity " NaN');
    expect(Number.isNaN(cfg.x)).toBe(true);
    expect(createScheduler(cfg, { steps: 10 }).timesteps[0]).toBe(999);
    expect(() => parseSchedulerConfigJson('[1]')).toThrow(/must be a JSON object/);
    expect(() => parseSchedulerConfigJson('{')).toThrow(/not valid JSON/);
  });
});

describe('schedulerTraits', () => {
  it('tells the prediction type, guidance, input scaling, noise and timestep kind', () => {
    expect(schedulerTraits({ _class_name: 'PNDMScheduler', ...LATENT })).toEqual({
      className: 'PNDMScheduler',
      predictionType: 'epsilon',
      guidance: 'cfg',
      scalesModelInput: false,
      needsNoise: false,
      timestepValues: 'integer',
    });
    expect(schedulerTraits({ _class_name: 'EulerDiscreteScheduler', prediction_type: 'v_prediction' })).toMatchObject({
      predictionType: 'v_prediction',
      scalesModelInput: true,
      timestepValues: 'float',
    });
    expect(schedulerTraits({ _class_name: 'EulerAncestralDiscreteScheduler' }).needsNoise).toBe(true);
    expect(schedulerTraits({ _class_name: 'DDIMScheduler' }, { eta: 0.5 }).needsNoise).toBe(true);
    expect(
      schedulerTraits({ _class_name: 'LCMScheduler' }, { modelInputs: ['sample', 'timestep', 'encoder_hidden_states', 'timestep_cond'] }),
    ).toMatchObject({
      guidance: 'embedded',
      needsNoise: true,
    });
    expect(
      schedulerTraits(
        { _class_name: 'FlowMatchEulerDiscreteScheduler' },
        { modelInputs: ['hidden_states', 'img_ids', 'txt_ids', 'guidance'] },
      ),
    ).toMatchObject({
      predictionType: 'flow',
      guidance: 'embedded',
      timestepValues: 'float',
    });
    expect(
      schedulerTraits({ _class_name: 'FlowMatchEulerDiscreteScheduler' }, { modelInputs: ['hidden_states', 'img_ids', 'txt_ids'] })
        .guidance,
    ).toBe('none');
    expect(
      schedulerTraits({ _class_name: 'FlowMatchEulerDiscreteScheduler' }, { modelInputs: ['hidden_states', 'pooled_projections'] })
        .guidance,
    ).toBe('cfg');
    expect(() => schedulerTraits({ _class_name: 'KDPM2DiscreteScheduler' })).toThrow(/not supported/);
  });
});
