import { ATTR, invalidParameter, type StageContext, type StageResult, type StageTask } from '@diffmesh/core';
import {
  defaultLatentSize,
  feedTensor,
  floatOutput,
  OnnxStage,
  ort,
  type LoadedModelDirectory,
  type OnnxStageDeps,
  type ResolvedModel,
} from '@diffmesh/stage-host';
import { float32View } from '@diffmesh/tensor-client';
import { tensorToFrames } from '@diffmesh/media';

export type VaeDecodingStageOptions = OnnxStageDeps;

/**
 * The `vae_decoding` stage: decodes `latents` into pixels and outputs `pixels`, uint8 RGB
 * [frames, height, width, 3] — a quarter of the float tensor's size, lossless for display,
 * and what the PNG/video encoders take. Built-in models: `latent` [1, C, F, h, w] → `sample`.
 * Model directories: `latents` [1, C, h, w] divided by the VAE's `scaling_factor` and shifted
 * by its `shift_factor` (vae_decoder/config.json), fed as `latent_sample` in the graph's element
 * type, and the image processor's `(x / 2 + 0.5)` clamped and rounded to 8 bits.
 */
export class VaeDecodingStage extends OnnxStage {
  readonly stage = 'vae_decoding' as const;
  protected readonly modelFile = 'vaeDecoder' as const;

  /** One latent at the default size. */
  protected override warmDims(m: ResolvedModel): Record<string, number> {
    const latent = defaultLatentSize(m);
    if (m.kind === 'manifest') return { batch: 1, ...latent };
    return { batch: 1, latent_height: latent.height, latent_width: latent.width };
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const m = await this.deps.catalog.resolve(task.model);
    const ref = task.inputs.latents;
    if (!ref) throw invalidParameter('latents', 'missing input from the denoising stage');
    const { data } = await this.deps.store.get(ref);
    ctx.signal.throwIfAborted();
    let sample: { data: Float32Array; dims: number[] };
    if (m.kind === 'directory') {
      sample = await this.decodeDirectory(m.directory, float32View(data), ref.shape, task.model, ctx.signal);
    } else {
      const session = await this.deps.sessions.get(m.manifest.file('vaeDecoder'));
      const result = await this.runModel({ [ATTR.model]: task.model, [ATTR.batchSize]: ref.shape[0] ?? 1 }, () =>
        session.run({ latent: new ort.Tensor('float32', float32View(data), ref.shape) }, { signal: ctx.signal }),
      );
      sample = { data: result.sample.data as Float32Array, dims: [...result.sample.dims] };
    }
    const { width, height, frames: list } = tensorToFrames(sample.data, sample.dims);
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

  /** Unscales a directory model's latent and decodes it; returns [1, 3, 1, H, W]. */
  private async decodeDirectory(
    directory: LoadedModelDirectory,
    latents: Float32Array,
    shape: number[],
    model: string,
    signal: AbortSignal,
  ): Promise<{ data: Float32Array; dims: number[] }> {
    const { scalingFactor, shiftFactor, latentChannels } = directory.layout.vae;
    if (shape.length !== 4 || shape[0] !== 1 || shape[1] !== latentChannels) {
      throw invalidParameter('latents', `expected a [1, ${latentChannels}, h, w] latent, got [${shape.join(', ')}]`);
    }
    const z = latents.map((v) => v / scalingFactor + shiftFactor);
    const input = directory.input('vae_decoder', 'latent_sample');
    const session = await directory.session(this.deps.sessions, 'vae_decoder');
    const result = await this.runModel({ [ATTR.model]: model, [ATTR.batchSize]: 1 }, () =>
      session.run({ latent_sample: feedTensor(input?.type ?? 'float32', z, shape) }, { signal, transfer: true }),
    );
    const outName = directory.io('vae_decoder').outputs[0].name;
    const out = result[outName];
    const [B, C, H, W] = out.dims;
    return { data: floatOutput(out), dims: [B, C, 1, H, W] };
  }
}
