import { ATTR, Code, DiffmeshError, invalidParameter, type StageContext, type StageResult, type StageTask } from '@diffmesh/core';
import { decodeImage, type RgbImage } from '@diffmesh/media';
import {
  feedTensor,
  floatOutput,
  OnnxStage,
  ort,
  type LoadedManifest,
  type LoadedModelDirectory,
  type OnnxStageDeps,
} from '@diffmesh/stage-host';
import { toBytes } from '@diffmesh/tensor-client';

export type ImageEncodingStageOptions = OnnxStageDeps;

/** The object the scheduler stores a request's encoded input image under (uint8 [byte length]). */
export const INPUT_IMAGE = 'input_image';

/**
 * The `image_encoding` stage: the request's input image (PNG, JPEG or WebP bytes, the object
 * `input_image`) decoded with media's `decodeImage` to the request's width × height (cover and
 * centre crop, Lanczos, as diffusers' image processor resizes), normalised to [-1, 1] and run
 * through the model's VAE encoder. Outputs `image_latents`, float32:
 *
 * - model directories: `vae_encoder/model.onnx` (`sample` → `latent_parameters` = mean ‖ logvar,
 *   of which the mean is taken, or an older export's `latent_sample`), then diffusers' scaling
 *   `(latent − shift_factor) · scaling_factor` from the VAE config: [1, C, h, w], the denoiser's
 *   img2img start;
 * - built-in models with a `vaeEncoder` file (tiny-shapes): [1, C, 1, h, w], the first frame's
 *   latent that conditions an image-to-video request.
 *
 * A request without an input image gets no output (the scheduler leaves this stage out of such
 * requests' plans). A corrupt image is INVALID_ARGUMENT naming `input_image`.
 */
export class ImageEncodingStage extends OnnxStage {
  readonly stage = 'image_encoding' as const;
  protected readonly modelFile = 'vaeEncoder' as const;

  override async warm(model: string): Promise<void> {
    const m = await this.deps.catalog.resolve(model);
    if (m.kind === 'manifest') {
      await this.deps.sessions.get(this.manifestEncoder(m.manifest, model));
      return;
    }
    if (!m.directory.layout.imageInput) throw noEncoder(model, 'its directory has no vae_encoder/');
    await super.warm(model);
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const ref = task.inputs[INPUT_IMAGE];
    if (!ref) return { outputs: {} };
    if (ref.dtype !== 'uint8' || ref.shape.length !== 1) {
      throw invalidParameter(INPUT_IMAGE, `expected the encoded image as uint8 [bytes], got ${ref.dtype} [${ref.shape.join(', ')}]`);
    }
    const m = await this.deps.catalog.resolve(task.model);
    const { data } = await this.deps.store.get(ref);
    const p = task.params;
    const image = await decodeImage(data, { width: p.width, height: p.height }, INPUT_IMAGE);
    ctx.signal.throwIfAborted();
    const { latent, shape } =
      m.kind === 'directory'
        ? await this.encodeDirectory(m.directory, image, task.model)
        : await this.encodeManifest(m.manifest, image, task.model);
    const out = await this.deps.store.put({ requestId: task.reqId, name: 'image_latents', data: toBytes(latent), shape, dtype: 'float32' });
    ctx.onProgress({ step: 1, totalSteps: 1 });
    return { outputs: { image_latents: out } };
  }

  private async encodeDirectory(
    directory: LoadedModelDirectory,
    image: RgbImage,
    model: string,
  ): Promise<{ latent: Float32Array; shape: number[] }> {
    const layout = directory.layout;
    if (!layout.imageInput) throw noEncoder(model, 'its directory has no vae_encoder/');
    const { scalingFactor, shiftFactor, latentChannels: C, scaleFactor } = layout.vae;
    const session = await directory.session(this.deps.sessions, 'vae_encoder');
    const input = directory.input('vae_encoder', 'sample');
    const result = await this.runModel({ [ATTR.model]: model, [ATTR.batchSize]: 1 }, () =>
      session.run({ sample: feedTensor(input?.type ?? 'float32', planar(image), [1, 3, image.height, image.width]) }),
    );
    const out = result[directory.io('vae_encoder').outputs[0].name];
    const [, channels, h, w] = out.dims;
    if ((channels !== C && channels !== 2 * C) || h * scaleFactor !== image.height || w * scaleFactor !== image.width) {
      throw new DiffmeshError(
        Code.FAILED_PRECONDITION,
        'MODEL_LOAD_FAILED',
        `model directory ${layout.dir}: vae_encoder/model.onnx: output [${out.dims.join(', ')}] is not a ${C}-channel latent (or mean ‖ logvar) of a ${image.width}×${image.height} image`,
      );
    }
    // latent_parameters: the distribution's mean (the first C channels); latent_sample: as is.
    const values = floatOutput(out).subarray(0, C * h * w);
    const latent = Float32Array.from(values, (v) => (v - shiftFactor) * scalingFactor);
    return { latent, shape: [1, C, h, w] };
  }

  private async encodeManifest(m: LoadedManifest, image: RgbImage, model: string): Promise<{ latent: Float32Array; shape: number[] }> {
    const session = await this.deps.sessions.get(this.manifestEncoder(m, model));
    const result = await this.runModel({ [ATTR.model]: model, [ATTR.batchSize]: 1 }, () =>
      session.run({ sample: new ort.Tensor('float32', planar(image), [1, 3, 1, image.height, image.width]) }),
    );
    const out = result.latent;
    return { latent: Float32Array.from(out.data as Float32Array), shape: [...out.dims] };
  }

  private manifestEncoder(m: LoadedManifest, model: string): string {
    if (!m.manifest.files.vaeEncoder) throw noEncoder(model, 'its manifest names no vaeEncoder file');
    return m.file('vaeEncoder');
  }
}

/** Interleaved RGB bytes → planar [3, H, W] floats in [-1, 1] (diffusers' `2·x − 1`). */
function planar(image: RgbImage): Float32Array {
  const n = image.width * image.height;
  const out = new Float32Array(3 * n);
  for (let i = 0; i < n; i += 1) {
    for (let c = 0; c < 3; c += 1) out[c * n + i] = image.data[i * 3 + c] / 127.5 - 1;
  }
  return out;
}

function noEncoder(model: string, why: string): DiffmeshError {
  return new DiffmeshError(Code.FAILED_PRECONDITION, 'MODEL_LOAD_FAILED', `model "${model}" cannot encode images: ${why}`, {
    metadata: { model },
  });
}
