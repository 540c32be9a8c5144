/**
 * The numpy and torch primitives diffusers' schedulers are written with, reproduced with their
 * exact arithmetic: numpy float64 routines (`linspace`, `arange`, `interp`, `round`), and torch
 * float32 tensor arithmetic, where every operation rounds to float32. A float32 operation is
 * written `f(a op b)`: for +, −, ×, ÷ and √ of float32 operands, computing in float64 and
 * rounding once gives exactly the float32 result.
 */

/** Round to float32 (one torch float32 operation). */
export const f = Math.fround;

/** `numpy.round` / `np.ndarray.round()`: round half to even. */
export function roundHalfEven(x: number): number {
  if (Math.abs(x - Math.trunc(x)) === 0.5) return 2 * Math.round(x / 2);
  return Math.round(x);
}

/** `numpy.linspace(start, stop, num, endpoint)` in float64, as numpy computes it. */
export function npLinspace(start: number, stop: number, num: number, endpoint = true): Float64Array {
  const out = new Float64Array(num);
  const div = endpoint ? num - 1 : num;
  const delta = stop - start;
  if (div > 0) {
    const step = delta / div;
    for (let i = 0; i < num; i += 1) out[i] = (step === 0 ? (i / div) * delta : i * step) + start;
  } else {
    for (let i = 0; i < num; i += 1) out[i] = i * delta + start;
  }
  if (endpoint && num > 1) out[num - 1] = stop;
  return out;
}

/**
 * `numpy.arange(start, stop, step)` with a float step: numpy sets the first two values and
 * fills the rest as `start + i·(a[1] − a[0])`.
 */
export function npArange(start: number, stop: number, step: number): Float64Array {
  const len = Math.max(0, Math.ceil((stop - start) / step));
  const out = new Float64Array(len);
  if (len > 0) out[0] = start;
  if (len > 1) out[1] = start + step;
  const delta = len > 1 ? out[1] - out[0] : 0;
  for (let i = 2; i < len; i += 1) out[i] = start + i * delta;
  return out;
}

/**
 * `numpy.interp(x, np.arange(fp.length), fp)` for one value: linear interpolation on the
 * integer grid 0…n−1, with numpy's arithmetic (`slope·(x − xⱼ) + fⱼ`, in float64).
 */
export function npInterpIndex(x: number, fp: ArrayLike<number>): number {
  const n = fp.length;
  if (x <= 0) return fp[0];
  if (x >= n - 1) return fp[n - 1];
  const j = Math.floor(x);
  if (j === x) return fp[j];
  const slope = fp[j + 1] - fp[j];
  return slope * (x - j) + fp[j];
}

/**
 * `torch.linspace(start, end, steps, dtype=torch.float32)` on the CPU: step =
 * (end − start)/(steps − 1) in float32, the first half counted from `start`, the second from
 * `end`. (torch's vectorised kernel can differ from this scalar formula by one float32 ulp in
 * some elements, depending on the CPU's vector width.)
 */
export function torchLinspaceF32(start: number, end: number, steps: number): Float32Array {
  const out = new Float32Array(steps);
  const s = f(start);
  const e = f(end);
  if (steps === 1) {
    out[0] = s;
    return out;
  }
  const step = f(f(e - s) / (steps - 1));
  const halfway = Math.floor(steps / 2);
  for (let i = 0; i < steps; i += 1) {
    out[i] = i < halfway ? f(s + f(step * i)) : f(e - f(step * (steps - i - 1)));
  }
  return out;
}

/** `torch.cumprod` of a float32 tensor on the CPU: accumulated in float64, stored as float32. */
export function cumprodF32(x: Float32Array): Float32Array {
  const out = new Float32Array(x.length);
  let acc = 1;
  for (let i = 0; i < x.length; i += 1) {
    acc *= x[i];
    out[i] = acc;
  }
  return out;
}
