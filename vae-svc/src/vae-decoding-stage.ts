import {
  ModelCatalog,
  SessionCache,
  float32View,
  invalidParameter,
  ort,
  type StageContext,
  type StageHandler,
  type StageResult,
  type StageTask,
  type TensorStore,
} from '@diffmesh/runtime';

export interface VaeDecodingStageOptions {
  catalog: ModelCatalog;
  sessions: SessionCache;
  store: TensorStore;
  /** Models this instance serves; empty = every model in the catalog. */
  models: string[];
}

/**
 * The `vae_decoding` stage: decodes `latents` into pixels and outputs `pixels`, uint8 RGB
 * [frames, height, width, 3] — a quarter of the float tensor's size, lossless for display,
 * and what the PNG/video encoders take.
 */
export class VaeDecodingStage implements StageHandler {
  readonly stage = 'vae_decoding' as const;

  constructor(private readonly opts: VaeDecodingStageOptions) {}

  models(): string[] {
    return this.opts.models;
  }

  async warm(model: string): Promise<void> {
    const m = await this.opts.catalog.get(model);
    await this.opts.sessions.get(m.file('vaeDecoder'));
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const m = await this.opts.catalog.get(task.model);
    const ref = task.inputs.latents;
    if (!ref) throw invalidParameter('latents', 'missing input from the denoising stage');
    const { data } = await this.opts.store.get(ref);
    ctx.signal.throwIfAborted();
    const session = await this.opts.sessions.get(m.file('vaeDecoder'));
    const result = await session.run({ latent: new ort.Tensor('float32', float32View(data), ref.shape) });
    const sample = result.sample;
    const [, , frames, height, width] = sample.dims;
    const pixels = toRgbFrames(sample.data as Float32Array, frames, height, width);
    const out = await this.opts.store.put({
      requestId: task.reqId,
      name: 'pixels',
      data: pixels,
      shape: [frames, height, width, 3],
      dtype: 'uint8',
    });
    ctx.onProgress({ step: 1, totalSteps: 1 });
    return { outputs: { pixels: out } };
  }
}

/** [1, 3, F, H, W] floats in [-1, 1] → [F, H, W, 3] bytes. */
export function toRgbFrames(data: Float32Array, frames: number, height: number, width: number): Uint8Array {
  const plane = frames * height * width;
  const out = new Uint8Array(plane * 3);
  for (let c = 0; c < 3; c += 1) {
    const base = c * plane;
    for (let p = 0; p < plane; p += 1) {
      const v = Math.round((data[base + p] + 1) * 127.5);
      out[p * 3 + c] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
  }
  return out;
}
