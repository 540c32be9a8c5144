import { describe, expect, it } from 'vitest';
import { createScheduler } from './create-scheduler.js';
import { fluxPipelineSigmas } from './flow-match-euler-scheduler.js';
import { loadPortCases, pattern, PatternNoise, portModel, ulpDiff } from './test-support.js';

/**
 * Every case of test-reference/expected.json, which test-reference/diffusers_port.py computed by porting
 * the diffusers scheduler code (and the pipeline glue) to numpy, with torch float32 arithmetic
 * as np.float32. Each case runs the pipeline loop with a stand-in model (0.25·x + c) and compares
 * the timesteps, initial noise scale and every intermediate sample.
 */
const { size, cases } = loadPortCases();

describe('schedulers against the numpy port of diffusers', () => {
  for (const c of cases) {
    it(c.name, () => {
      const s = createScheduler(c.config, {
        steps: c.steps,
        ...c.options,
        sigmas: c.fluxSigmas ? fluxPipelineSigmas(c.steps) : undefined,
      });
      if (c.config.use_karras_sigmas === true && c.config._class_name === 'EulerDiscreteScheduler') {
        // Karras timesteps come from diffusers' `np.log(sigmas)` on a float32 array: numpy's
        // SIMD float32 log is not correctly rounded (≈8% of values are 1 ulp off), so the
        // fractional timesteps may differ in their last bits; the σ schedule does not.
        expect(s.timesteps.length).toBe(c.timesteps.length);
        s.timesteps.forEach((t, k) => expect(ulpDiff(t, c.timesteps[k]), `timestep ${k}`).toBeLessThanOrEqual(2));
      } else expect(Array.from(s.timesteps)).toEqual(c.timesteps);
      expect(s.initNoiseSigma).toBe(c.initNoiseSigma);
      const noise = new PatternNoise();
      const init = pattern(1, 0, size);
      let x =
        (c.options.strength ?? 1) < 1 ? s.addNoise(pattern(2, 0, size), init, 0) : Float32Array.from(init, (v) => v * s.initNoiseSigma);
      const worst = { ulp: 0, step: -1 };
      const check = (step: number): void => {
        const want = c.trajectory[step];
        for (let k = 0; k < size; k += 1) {
          const d = ulpDiff(x[k], want[k]);
          if (d > worst.ulp) Object.assign(worst, { ulp: d, step });
        }
      };
      check(0);
      for (let i = 0; i < s.timesteps.length; i += 1) {
        x = s.step(portModel(s.scaleModelInput(x, i)), i, x, noise);
        check(i + 1);
      }
      // float32 transcendental functions (log, exp) may differ by an ulp between numpy and V8
      expect(worst, `${c.name}: worst step ${worst.step}`).toEqual({ ulp: 0, step: -1 });
    });
  }
});
