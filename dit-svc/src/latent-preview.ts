/**
 * Live previews: a small RGB picture of a denoising latent, made between steps without the VAE.
 *
 * A model with known factors gets the linear map that latent-space previewers use: each pixel's
 * RGB is `bias + Σ_c latent[c] · factors[c]`, read as [-1, 1] and mapped to 0–255. The factors of
 * the diffusers families below are the `latent_rgb_factors` (and `latent_rgb_factors_bias`) of
 * ComfyUI's `comfy/latent_formats.py` (comfyanonymous/ComfyUI, GPL-3.0, commit 040a3243, classes
 * SD15, SDXL, SD3 and Flux): fitted coefficients, quoted here as data with attribution (see
 * NOTICE). They apply to the latent as the denoiser sees it (scaled and shifted), which is the
 * space diffusers' loop runs in. Built-in models give theirs in `model.json` (`preview`);
 * tiny-shapes' latent is the picture itself. A model without factors (the synthetic DiT
 * families, whose VAEs are random; a directory whose channel count matches no family) gets
 * its first three channels (fewer: the first, as grey), each normalised to its own mean ± 2σ:
 * not the colours the VAE would make, but the shapes forming.
 *
 * The picture is one frame (a video's first) at the latent's resolution, sampled down (nearest)
 * so that its longer side is at most `maxSide`; it is never upsampled (a viewer scales it).
 * Only the pixels kept are computed, and the PNG is a few KiB.
 *
 * Off the loop's critical path ({@link LoopPreviews}): at a due step the loop only copies the
 * frame; the picture is drawn while the next step's model runs in its runner thread, and goes
 * out with that step's progress. The last step's is drawn at once (the result comes next).
 */
import { DEFAULT_PREVIEW_SIDE, type PreviewParams, type StagePreview } from '@diffmesh/core';
import { encodePng } from '@diffmesh/media';

/** How a model's latent channels become RGB. */
export type LatentRgbProjection =
  | {
      kind: 'linear';
      /** `factors[c]`: the R, G, B weights of latent channel c. */
      factors: ReadonlyArray<readonly [number, number, number]>;
      bias: readonly [number, number, number];
    }
  | { kind: 'normalised' };

type Rgb = readonly [number, number, number];

/** ComfyUI `latent_formats.py` (commit 040a3243): SD15.latent_rgb_factors (SD 1.x and 2.x). */
const SD15: Rgb[] = [
  [0.3512, 0.2297, 0.3227],
  [0.325, 0.4974, 0.235],
  [-0.2829, 0.1762, 0.2721],
  [-0.212, -0.2616, -0.7177],
];

/** ComfyUI `latent_formats.py` (commit 040a3243): SDXL.latent_rgb_factors and _bias. */
const SDXL: Rgb[] = [
  [0.3651, 0.4232, 0.4341],
  [-0.2533, -0.0042, 0.1068],
  [0.1076, 0.1111, -0.0362],
  [-0.3165, -0.2492, -0.2188],
];
const SDXL_BIAS: Rgb = [0.1084, -0.0175, -0.0011];

/** ComfyUI `latent_formats.py` (commit 040a3243): SD3.latent_rgb_factors and _bias. */
const SD3: Rgb[] = [
  [-0.0922, -0.0175, 0.0749],
  [0.0311, 0.0633, 0.0954],
  [0.1994, 0.0927, 0.0458],
  [0.0856, 0.0339, 0.0902],
  [0.0587, 0.0272, -0.0496],
  [-0.0006, 0.1104, 0.0309],
  [0.0978, 0.0306, 0.0427],
  [-0.0042, 0.1038, 0.1358],
  [-0.0194, 0.002, 0.0669],
  [-0.0488, 0.013, -0.0268],
  [0.0922, 0.0988, 0.0951],
  [-0.0278, 0.0524, -0.0542],
  [0.0332, 0.0456, 0.0895],
  [-0.0069, -0.003, -0.081],
  [-0.0596, -0.0465, -0.0293],
  [-0.1448, -0.1463, -0.1189],
];
const SD3_BIAS: Rgb = [0.2394, 0.2135, 0.1925];

/** ComfyUI `latent_formats.py` (commit 040a3243): Flux.latent_rgb_factors and _bias. */
const FLUX: Rgb[] = [
  [-0.0346, 0.0244, 0.0681],
  [0.0034, 0.021, 0.0687],
  [0.0275, -0.0668, -0.0433],
  [-0.0174, 0.016, 0.0617],
  [0.0859, 0.0721, 0.0329],
  [0.0004, 0.0383, 0.0115],
  [0.0405, 0.0861, 0.0915],
  [-0.0236, -0.0185, -0.0259],
  [-0.0245, 0.025, 0.118],
  [0.1008, 0.0755, -0.0421],
  [-0.0515, 0.0201, 0.0011],
  [0.0428, -0.0012, -0.0036],
  [0.0817, 0.0765, 0.0749],
  [-0.1264, -0.0522, -0.1103],
  [-0.028, -0.0881, -0.0499],
  [-0.1262, -0.0982, -0.0778],
];
const FLUX_BIAS: Rgb = [-0.0329, -0.0718, -0.0851];

const FAMILIES: Record<'sd' | 'sdxl' | 'sd3' | 'flux', { factors: Rgb[]; bias: Rgb }> = {
  sd: { factors: SD15, bias: [0, 0, 0] },
  sdxl: { factors: SDXL, bias: SDXL_BIAS },
  sd3: { factors: SD3, bias: SD3_BIAS },
  flux: { factors: FLUX, bias: FLUX_BIAS },
};

/**
 * The projection of a diffusers pipeline kind with `channels` latent channels: its family's
 * factors when the channel count matches them, else the normalised fallback.
 */
export function familyProjection(kind: keyof typeof FAMILIES, channels: number): LatentRgbProjection {
  const f = FAMILIES[kind];
  return f.factors.length === channels ? { kind: 'linear', factors: f.factors, bias: f.bias } : { kind: 'normalised' };
}

/** The projection a built-in manifest gives (`preview.rgbFactors`), or the fallback. */
export function manifestProjection(
  preview: { rgbFactors: number[][]; rgbBias?: number[] } | undefined,
  channels: number,
): LatentRgbProjection {
  if (!preview || preview.rgbFactors.length !== channels) return { kind: 'normalised' };
  return {
    kind: 'linear',
    factors: preview.rgbFactors.map((r) => [r[0], r[1], r[2]] as const),
    bias: preview.rgbBias ? [preview.rgbBias[0], preview.rgbBias[1], preview.rgbBias[2]] : [0, 0, 0],
  };
}

/** True when step `step` of `totalSteps` gets a preview: every `everySteps`, and the last. */
export function previewDue(every: { everySteps: number } | undefined, step: number, totalSteps: number): boolean {
  return every !== undefined && every.everySteps > 0 && (step % every.everySteps === 0 || step === totalSteps);
}

/**
 * A PNG preview of one frame of a latent. `latent` holds `channels` planes of `planeStride`
 * floats apart, each starting with the frame's h×w values (so [C, h, w] has a stride of h·w,
 * and frame 0 of [C, F, h, w] a stride of F·h·w).
 */
export function latentPreview(
  latent: Float32Array,
  layout: { channels: number; height: number; width: number; planeStride: number },
  projection: LatentRgbProjection,
  maxSide: number,
): Omit<StagePreview, 'step'> {
  const { channels: C, height: h, width: w, planeStride } = layout;
  const scale = Math.max(1, Math.max(h, w) / maxSide);
  const W = Math.max(1, Math.min(w, Math.floor(w / scale)));
  const H = Math.max(1, Math.min(h, Math.floor(h / scale)));
  // Source cell of each kept pixel (nearest).
  const at = new Int32Array(W * H);
  for (let y = 0; y < H; y += 1) {
    const sy = Math.min(h - 1, Math.floor(((y + 0.5) * h) / H));
    for (let x = 0; x < W; x += 1) at[y * W + x] = sy * w + Math.min(w - 1, Math.floor(((x + 0.5) * w) / W));
  }
  const rgb = new Uint8Array(W * H * 3);
  if (projection.kind === 'linear') {
    const { factors, bias } = projection;
    for (let p = 0; p < at.length; p += 1) {
      let r = bias[0];
      let g = bias[1];
      let b = bias[2];
      for (let c = 0; c < C; c += 1) {
        const v = latent[c * planeStride + at[p]];
        const f = factors[c];
        r += v * f[0];
        g += v * f[1];
        b += v * f[2];
      }
      rgb[p * 3] = toByte(r);
      rgb[p * 3 + 1] = toByte(g);
      rgb[p * 3 + 2] = toByte(b);
    }
  } else {
    for (let k = 0; k < 3; k += 1) {
      const base = Math.min(k, C - 1) * planeStride;
      let sum = 0;
      let sq = 0;
      for (let p = 0; p < at.length; p += 1) {
        const v = latent[base + at[p]];
        sum += v;
        sq += v * v;
      }
      const mean = sum / at.length;
      const sd = Math.sqrt(Math.max(0, sq / at.length - mean * mean)) || 1;
      // mean ± 2σ → [-1, 1]
      for (let p = 0; p < at.length; p += 1) rgb[p * 3 + k] = toByte((latent[base + at[p]] - mean) / (2 * sd));
    }
  }
  return { mediaType: 'image/png', data: encodePng(rgb, W, H), width: W, height: H };
}

/** [-1, 1] → 0–255, clamped (ComfyUI's `((v + 1) / 2).clamp(0, 1) · 255`). */
function toByte(v: number): number {
  const u = ((v + 1) / 2) * 255;
  return u <= 0 ? 0 : u >= 255 ? 255 : Math.round(u);
}

/** One frame of a latent: `channels` planes of height × width, a copy the loop no longer writes. */
export interface LatentFrame {
  data: Float32Array;
  channels: number;
  height: number;
  width: number;
}

/**
 * The previews of one denoising loop (params `preview`). After each step the loop calls
 * {@link after}, which returns the previews to send with that step's progress.
 */
export class LoopPreviews {
  private pending: Promise<StagePreview | undefined> | undefined;

  constructor(
    private readonly params: PreviewParams | undefined,
    private readonly projection: LatentRgbProjection,
  ) {}

  /**
   * After step `step` of `totalSteps`: a due step's frame is copied now (`frame()`) and drawn
   * two turns of the event loop later, after the micro-batcher has sent the next step's run
   * to its runner thread, so the drawing overlaps the model run instead of adding to the
   * loop. Returns what is ready: the preview of an earlier step (drawn while this step ran),
   * and at the last step its own, drawn at once.
   */
  async after(step: number, totalSteps: number, frame: () => LatentFrame): Promise<StagePreview[]> {
    if (!this.params) return [];
    const ready = this.pending;
    this.pending = undefined;
    const out: StagePreview[] = [];
    if (ready) {
      const p = await ready;
      if (p) out.push(p);
    }
    if (!previewDue(this.params, step, totalSteps)) return out;
    const f = frame();
    if (step === totalSteps) {
      const p = this.draw(f, step);
      if (p) out.push(p);
    } else {
      this.pending = new Promise((resolve) => setImmediate(() => setImmediate(() => resolve(this.draw(f, step)))));
    }
    return out;
  }

  /** A preview, or none when drawing fails (a preview is never worth failing the task for). */
  private draw(f: LatentFrame, step: number): StagePreview | undefined {
    try {
      const layout = { channels: f.channels, height: f.height, width: f.width, planeStride: f.height * f.width };
      return { ...latentPreview(f.data, layout, this.projection, this.params?.maxSide ?? DEFAULT_PREVIEW_SIDE), step };
    } catch {
      return undefined;
    }
  }
}
