import {
  ATTR,
  OnnxStage,
  float32View,
  invalidParameter,
  ort,
  tensorToFrames,
  type StageContext,
  type StageResult,
  type StageTask,
  type OnnxStageDeps,
} from '@diffmesh/runtime';

export type VaeDecodingStageOptions = OnnxStageDeps;

/**
 * The `vae_decoding` stage: decodes `latents` into pixels and outputs `pixels`, uint8 RGB
 * [frames, height, width, 3] — a quarter of the float tensor's size, lossless for display,
 * and what the PNG/video encoders take.
 */
export class VaeDecodingStage extends OnnxStage {
  readonly stage = 'vae_decoding' as const;
  protected readonly modelFile = 'vaeDecoder' as const;

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const m = await this.deps.catalog.get(task.model);
    const ref = task.inputs.latents;
    if (!ref) throw invalidParameter('latents', 'missing input from the denoising stage');
    const { data } = await this.deps.store.get(ref);
    ctx.signal.throwIfAborted();
    const session = await this.deps.sessions.get(m.file('vaeDecoder'));
    const result = await this.runModel({ [ATTR.model]: task.model, [ATTR.batchSize]: ref.shape[0] ?? 1 }, () =>
      session.run({ latent: new ort.Tensor('float32', float32View(data), ref.shape) }),
    );
    const sample = result.sample;
    const { width, height, frames: list } = tensorToFrames(sample.data as Float32Array, [...sample.dims]);
    const frames = list.length;
    const pixels = new Uint8Array(frames * width * height * 3);
    list.forEach((f, i) => pixels.set(f, i * f.length));
    const out = await this.deps.store.put({
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
