import { invalidParameter, type StageTask } from '@diffmesh/core';
import { latentFrames, ort, type LoadedManifest, type SessionCache } from '@diffmesh/stage-host';
import { float32View, type TensorStore } from '@diffmesh/tensor-client';
import { runFingerprint, type DenoiseCheckpoint } from './checkpoint.js';
import type { DenoisingRun, RunPlan, RunState } from './denoising-loop.js';
import { imageConditioning, type ImageConditioning } from './image-to-video.js';
import { manifestProjection, type LatentFrame, type LatentRgbProjection } from './latent-preview.js';
import { NoiseRng } from './rng.js';
import { samplerFor, type Sampler } from './samplers.js';
import { StepBatcher, type BatchRun, type Prediction, type StepBatcherOptions } from './step-batcher.js';

/** One denoiser call of one request on a built-in model. */
interface BuiltinItem {
  request: StageTask;
  file: string;
  sample: Float32Array;
  sampleShape: number[];
  timestep: number;
  text: Float32Array;
  textShape: number[];
}

/** Text embeddings with their shape. */
interface Embeds {
  data: Float32Array;
  shape: number[];
}

export interface BuiltinDenoiserDeps extends StepBatcherOptions {
  sessions: SessionCache;
  store: TensorStore;
}

/**
 * The denoiser of the built-in models (a `model.json` manifest): seeded noise of the manifest's
 * latent shape, its sampler (`flow_euler` or `ddim`), the prompt's embeddings and the negative's
 * as a CFG pair when the scale is not 1, image-to-video for flow models. Every step goes through
 * the step batcher, so concurrent tasks of the same shape share one run whatever step each is at.
 */
export class BuiltinDenoiser {
  private readonly batcher: StepBatcher<BuiltinItem>;

  constructor(private readonly deps: BuiltinDenoiserDeps) {
    this.batcher = new StepBatcher((items) => this.stack(items), deps);
  }

  /** Sets up the run of `task` (its inputs read, its start latent made). */
  async prepare(task: StageTask, loaded: LoadedManifest): Promise<DenoisingRun> {
    const { manifest, file } = loaded;
    const p = task.params;
    if (p.adapters?.length) throw invalidParameter('adapters[0].name', `${task.model} takes no adapters (only model directories do)`);
    const f = manifest.latent.spatialFactor;
    if (p.width % f !== 0) throw invalidParameter('width', `must be a multiple of ${f}`);
    if (p.height % f !== 0) throw invalidParameter('height', `must be a multiple of ${f}`);
    const shape = [1, manifest.latent.channels, latentFrames(p.numFrames, manifest.latent.temporalFactor), p.height / f, p.width / f];
    const cond = await this.embeds(task, 'prompt_embeds');
    const uncond = p.guidanceScale !== 1 ? await this.embeds(task, 'negative_prompt_embeds') : undefined;
    const rng = new NoiseRng(p.seed);
    const x = rng.normals(shape.reduce((a, b) => a * b, 1));
    const sampler = samplerFor(manifest, p.numInferenceSteps);
    const image = await imageConditioning(task, this.deps.store, shape, sampler, x);
    const denoiser = file('denoiser');
    return new BuiltinRun({
      task,
      batcher: this.batcher,
      denoiser,
      key: `${denoiser}|${shape.join('x')}|${cond.shape.join('x')}`,
      shape,
      x,
      rng,
      sampler,
      image,
      cond,
      uncond,
      projection: manifestProjection(manifest.preview, shape[1]),
    });
  }

  private async embeds(task: StageTask, name: string): Promise<Embeds> {
    const ref = task.inputs[name];
    if (!ref) throw invalidParameter(name, 'missing input from the text encoding stage');
    const { data } = await this.deps.store.get(ref);
    return { data: float32View(data), shape: ref.shape };
  }

  /** Stacks items along the batch axis; the stacked inputs are this run's own, so they move to the runner thread. */
  private async stack(items: BuiltinItem[]): Promise<BatchRun> {
    const first = items[0];
    const session = await this.deps.sessions.get(first.file, { rewrite: true });
    const n = items.length;
    const sampleSize = first.sample.length;
    const textSize = first.text.length;
    const sample = new Float32Array(n * sampleSize);
    const text = new Float32Array(n * textSize);
    const timestep = new Float32Array(n);
    items.forEach((it, b) => {
      sample.set(it.sample, b * sampleSize);
      text.set(it.text, b * textSize);
      timestep[b] = it.timestep;
    });
    const feeds = {
      sample: new ort.Tensor('float32', sample, [n, ...first.sampleShape.slice(1)]),
      timestep: new ort.Tensor('float32', timestep, [n]),
      encoder_hidden_states: new ort.Tensor('float32', text, [n, ...first.textShape.slice(1)]),
    };
    return { session, feeds, output: 'out', transfer: true };
  }
}

/** What a built-in run is made of. */
interface BuiltinRunParts {
  task: StageTask;
  batcher: StepBatcher<BuiltinItem>;
  denoiser: string;
  /** The batcher key: requests of one denoiser, latent shape and text shape share runs. */
  key: string;
  shape: number[];
  /** The latent [1, C, F, h, w], stepped in place. */
  x: Float32Array;
  rng: NoiseRng;
  sampler: Sampler;
  image: ImageConditioning | undefined;
  cond: Embeds;
  uncond: Embeds | undefined;
  projection: LatentRgbProjection;
}

/** A built-in model's run: the sampler steps the latent in place; its noise is drawn once, at the start. */
class BuiltinRun implements DenoisingRun {
  readonly plan: RunPlan;

  constructor(private readonly r: BuiltinRunParts) {
    this.plan = {
      totalSteps: r.sampler.timesteps.length,
      firstStep: r.image?.start ?? 0,
      // The built-in samplers keep no state: a checkpoint is the latent (and the noise stream).
      fingerprint: runFingerprint(r.task, { image: r.image !== undefined }),
      latentLength: r.x.length,
      callsPerStep: r.uncond ? 2 : 1,
      projection: r.projection,
    };
  }

  modelInput(): Float32Array {
    this.r.image?.hold();
    return this.r.x;
  }

  predict(input: Float32Array, i: number, signal: AbortSignal): Promise<Prediction> {
    const { task, denoiser, shape, sampler, key, cond, uncond } = this.r;
    const item = (text: Embeds): BuiltinItem => ({
      request: task,
      file: denoiser,
      sample: input,
      sampleShape: shape,
      timestep: sampler.timesteps[i],
      text: text.data,
      textShape: text.shape,
    });
    return this.r.batcher.predict({ cond: key, uncond: key }, item(cond), uncond && item(uncond), signal);
  }

  step(out: Float32Array, i: number): void {
    this.r.sampler.step(this.r.x, out, i);
  }

  state(): RunState {
    return { latent: this.r.x, rng: this.r.rng.getState() };
  }

  restore(c: DenoiseCheckpoint): void {
    this.r.x.set(c.latent);
  }

  /** Frame 0 of the [1, C, F, h, w] latent as [C, h, w] (a copy). */
  previewFrame(): LatentFrame {
    const [, C, F, h, w] = this.r.shape;
    const plane = h * w;
    const data = new Float32Array(C * plane);
    for (let c = 0; c < C; c += 1) data.set(this.r.x.subarray(c * F * plane, c * F * plane + plane), c * plane);
    return { data, channels: C, height: h, width: w };
  }

  output(): { data: Float32Array; shape: number[] } {
    this.r.image?.hold();
    return { data: this.r.x, shape: this.r.shape };
  }
}
