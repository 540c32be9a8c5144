import {
  ATTR,
  DEFAULT_STRENGTH,
  SPAN,
  invalidParameter,
  type StageContext,
  type StageResult,
  type StageTask,
  withSpan,
} from '@diffmesh/core';
import { MicroBatcher } from './batching.js';
import { NoiseRng } from './rng.js';
import { defaultLatentSize, OnnxStage, latentFrames, ort, type OnnxStageDeps, type ResolvedModel } from '@diffmesh/stage-host';
import { float32View, toBytes } from '@diffmesh/tensor-client';
import { applyGuidance, FlowEulerSampler, samplerFor, type Sampler } from './samplers.js';
import { DirectoryDenoiser } from './directory-denoiser.js';
import { Checkpointer, runFingerprint } from './checkpoint.js';
import { StepCache, stepCacheWarning } from './step-cache.js';
import { LoopPreviews, manifestProjection, type LatentFrame } from './latent-preview.js';

export interface DenoisingStageOptions extends OnnxStageDeps {
  /** Most latents in one denoiser run (a CFG request counts two). */
  maxBatch: number;
  /** Called after every denoiser run with its batch size (for metrics). */
  onBatch?: (size: number, ms: number) => void;
  /**
   * Store a checkpoint (latent, noise and sampler state) every this many steps, so a retried
   * task resumes on another instance instead of starting over; 0 = never. Default 0.
   */
  checkpointEvery?: number;
  /**
   * Denoiser runs of one shape in flight at once (the model's runner threads, so runs overlap
   * where the hardware allows; each is a batch of whatever was ready). Default 1.
   */
  runConcurrency?: number;
}

/** What one item gets back from a denoiser run. */
interface StepOutput {
  out: Float32Array;
  /** Items in the run that produced it. */
  batchSize: number;
  /** Which run (a counter), to tell whether two items shared one. */
  run: number;
}

interface StepItem {
  file: string;
  sample: Float32Array;
  sampleShape: number[];
  timestep: number;
  text: Float32Array;
  textShape: number[];
}

/**
 * The `denoising` stage: starts from seeded noise and runs the model's sampler for
 * `num_inference_steps`, with classifier-free guidance against the negative prompt.
 * Every step goes through a batcher, so concurrent requests of the same shape share one
 * denoiser run, whatever step each is at.
 */
export class DenoisingStage extends OnnxStage {
  readonly stage = 'denoising' as const;
  protected readonly modelFile = 'denoiser' as const;
  private readonly batcher: MicroBatcher<StepItem, StepOutput>;
  private readonly directories: DirectoryDenoiser;
  private readonly checkpoints: Checkpointer;
  private runs = 0;

  constructor(private readonly opts: DenoisingStageOptions) {
    super(opts);
    this.batcher = new MicroBatcher((_key, items) => this.runBatch(items), opts.maxBatch, opts.runConcurrency ?? 1);
    this.checkpoints = new Checkpointer({ store: opts.store, every: opts.checkpointEvery ?? 0 });
    this.directories = new DirectoryDenoiser({
      sessions: opts.sessions,
      store: opts.store,
      maxBatch: opts.maxBatch,
      runConcurrency: opts.runConcurrency ?? 1,
      checkpoints: this.checkpoints,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
      ...(opts.onBatch ? { onBatch: opts.onBatch } : {}),
    });
  }

  override async warm(model: string, opts: { run?: boolean } = {}): Promise<void> {
    const m = await this.opts.catalog.resolve(model);
    if (m.kind === 'directory') this.directories.checkScheduler(m.directory);
    await super.warm(model, opts);
  }

  /** A step at the default size, with the CFG pair as one batch when the default guides. */
  protected override warmDims(m: ResolvedModel): Record<string, number> {
    const latent = defaultLatentSize(m);
    if (m.kind === 'manifest') {
      const { manifest } = m.manifest;
      return { batch: manifest.defaults.guidanceScale !== 1 ? 2 : 1, ...latent, length: manifest.text.maxLength };
    }
    const layout = m.directory.layout;
    const { height: h, width: w } = latent;
    const tokens = layout.textEncoders.find((t) => t.maxLength !== undefined)?.maxLength ?? 77;
    return {
      batch: layout.guidance === 'cfg' && layout.defaults.guidanceScale > 1 ? 2 : 1,
      height: h,
      width: w,
      sequence_length: tokens,
      packed_height_width: (h / 2) * (w / 2),
    };
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const resolved = await this.opts.catalog.resolve(task.model);
    if (resolved.kind === 'directory') return this.directories.run(task, ctx, resolved.directory);
    const { manifest, file } = resolved.manifest;
    const p = task.params;
    const f = manifest.latent.spatialFactor;
    if (p.width % f !== 0) throw invalidParameter('width', `must be a multiple of ${f}`);
    if (p.height % f !== 0) throw invalidParameter('height', `must be a multiple of ${f}`);
    const shape = [1, manifest.latent.channels, latentFrames(p.numFrames, manifest.latent.temporalFactor), p.height / f, p.width / f];
    const cond = await this.embeds(task, 'prompt_embeds');
    const guided = p.guidanceScale !== 1;
    const uncond = guided ? await this.embeds(task, 'negative_prompt_embeds') : undefined;

    const rng = new NoiseRng(p.seed);
    const x = rng.normals(shape.reduce((a, b) => a * b, 1));
    const sampler = samplerFor(manifest, p.numInferenceSteps);
    const image = await this.imageConditioning(task, shape, sampler, x);
    const denoiser = file('denoiser');
    const key = `${denoiser}|${shape.join('x')}|${cond.shape.join('x')}`;
    const total = sampler.timesteps.length;
    const start = image?.start ?? 0;
    // A retried task goes on from its last checkpoint (the built-in samplers keep no state).
    const fingerprint = runFingerprint(task, { image: image !== undefined });
    const resumed = await this.checkpoints.resume(task, ctx, fingerprint, total, x.length);
    if (resumed) x.set(resumed.latent);
    // Step caching (off unless the params ask): a resumed run starts with an empty cache.
    const cache = StepCache.of(p.stepCache, total - 1);
    const preview = new LoopPreviews(p.preview, manifestProjection(manifest.preview, shape[1]));
    for (let i = resumed?.step ?? start; i < total; i += 1) {
      ctx.signal.throwIfAborted();
      image?.hold();
      const item = (text: { data: Float32Array; shape: number[] }): StepItem => ({
        file: denoiser,
        sample: x,
        sampleShape: shape,
        timestep: sampler.timesteps[i],
        text: text.data,
        textShape: text.shape,
      });
      // One span per step: the wait for the shared batch and the run itself.
      await withSpan(
        SPAN.modelRun,
        { [ATTR.stage]: this.stage, [ATTR.model]: task.model, [ATTR.step]: i + 1, [ATTR.stepCount]: total },
        async (span) => {
          // step cache: a step whose input barely moved reuses the last output (no model run).
          const cached = cache?.lookup(x, i);
          if (cached) {
            span.setAttributes({ [ATTR.modelRuns]: 0, [ATTR.stepCached]: true });
            sampler.step(x, cached, i);
            return;
          }
          const [outCond, outUncond] = await Promise.all([
            this.batcher.submit(key, item(cond), ctx.signal),
            uncond ? this.batcher.submit(key, item(uncond), ctx.signal) : undefined,
          ]);
          span.setAttributes({
            [ATTR.batchSize]: Math.max(outCond.batchSize, outUncond?.batchSize ?? 0),
            [ATTR.modelRuns]: outUncond && outUncond.run !== outCond.run ? 2 : 1,
          });
          const out = outUncond ? applyGuidance(outUncond.out, outCond.out, p.guidanceScale) : outCond.out;
          cache?.store(out);
          sampler.step(x, out, i);
        },
      );
      const step = { step: i + 1 - start, totalSteps: total - start };
      if (this.checkpoints.preempting(ctx, i + 1, total)) {
        await this.checkpoints.yieldSlot(task, ctx, { step: i + 1, totalSteps: total, fingerprint, latent: x, rng: rng.getState() }, step);
      }
      // Live previews (params.preview): frame 0 copied at a due step, drawn while the next step runs.
      const previews = await preview.after(step.step, step.totalSteps, () => firstFrame(x, shape));
      const progress = previews.length > 0 ? { ...step, previews } : step;
      if (this.checkpoints.due(i + 1, total)) {
        await this.checkpoints.save(task, ctx, { step: i + 1, totalSteps: total, fingerprint, latent: x, rng: rng.getState() }, progress);
      } else {
        ctx.onProgress(progress);
      }
    }
    image?.hold();
    const latents = await this.opts.store.put({
      requestId: task.reqId,
      name: 'latents',
      data: toBytes(x),
      shape,
      dtype: 'float32',
    });
    const warning = cache && stepCacheWarning(cache, uncond ? 2 : 1);
    if (cache) this.opts.metrics?.stepCacheSkipped?.(cache.skipped * (uncond ? 2 : 1));
    return { outputs: { latents }, ...(warning ? { warnings: [warning] } : {}) };
  }

  /**
   * Image-to-video for built-in flow models: the first latent frame is the input image's latent
   * `z` (`image_latents` from the image_encoding stage, [1, C, 1, h, w]), held clean at every
   * step, the way I2V models take the clean first-frame latent as conditioning. The denoiser's
   * posterior over the whole clip sees that frame, so the frames after it follow the image
   * (shape, colours, place) as far as the prompt leaves them open; the clip opens on the image.
   * `strength` (default 0.8) is read as in img2img: every frame starts from `z` noised to the
   * step it picks, `(1 − σ)·z + σ·ε` (1 = from pure noise). Returns the first step and the
   * function that sets the first frame (before every step and after the last), or undefined
   * without an input image.
   */
  private async imageConditioning(
    task: StageTask,
    shape: number[],
    sampler: Sampler,
    x: Float32Array,
  ): Promise<{ start: number; hold(): void } | undefined> {
    const ref = task.inputs.image_latents;
    if (!ref) return undefined;
    if (!(sampler instanceof FlowEulerSampler)) {
      throw invalidParameter('input_image', `model "${task.model}" cannot be conditioned on an image (its sampler is not flow matching)`);
    }
    const [, C, F, h, w] = shape;
    if (ref.shape.join('x') !== [1, C, 1, h, w].join('x')) {
      throw invalidParameter('image_latents', `expected [1, ${C}, 1, ${h}, ${w}], got [${ref.shape.join(', ')}]`);
    }
    const z = float32View((await this.opts.store.get(ref)).data);
    const steps = sampler.timesteps.length;
    const strength = task.params.strength ?? DEFAULT_STRENGTH;
    // As the flow-matching img2img pipelines: t_start = int(max(steps − steps·strength, 0)).
    const start = Math.trunc(Math.max(steps - Math.min(steps * strength, steps), 0));
    if (start >= steps) throw invalidParameter('strength', `${strength} with ${steps} steps leaves no denoising step`);
    const plane = h * w;
    const s0 = sampler.sigmas[start];
    for (let c = 0; c < C; c += 1) {
      for (let f = 0; f < F; f += 1) {
        const at = (c * F + f) * plane;
        for (let k = 0; k < plane; k += 1) x[at + k] = (1 - s0) * z[c * plane + k] + s0 * x[at + k];
      }
    }
    return {
      start,
      hold: () => {
        for (let c = 0; c < C; c += 1) x.set(z.subarray(c * plane, (c + 1) * plane), c * F * plane);
      },
    };
  }

  private async embeds(task: StageTask, name: string): Promise<{ data: Float32Array; shape: number[] }> {
    const ref = task.inputs[name];
    if (!ref) throw invalidParameter(name, 'missing input from the text encoding stage');
    const { data } = await this.opts.store.get(ref);
    return { data: float32View(data), shape: ref.shape };
  }

  /** Stacks items along the batch axis, runs the denoiser once, splits the output. */
  private async runBatch(items: StepItem[]): Promise<StepOutput[]> {
    const first = items[0];
    const session = await this.opts.sessions.get(first.file, { rewrite: true });
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
    const started = performance.now();
    // The stacked inputs are this run's own: they move to the runner thread, not copied.
    const result = await session.run(
      {
        sample: new ort.Tensor('float32', sample, [n, ...first.sampleShape.slice(1)]),
        timestep: new ort.Tensor('float32', timestep, [n]),
        encoder_hidden_states: new ort.Tensor('float32', text, [n, ...first.textShape.slice(1)]),
      },
      { transfer: true },
    );
    const out = result.out.data as Float32Array;
    const ms = performance.now() - started;
    this.opts.metrics?.modelRun(ms / 1000);
    this.opts.metrics?.denoiseBatch?.(n);
    this.opts.onBatch?.(n, ms);
    const run = ++this.runs;
    return items.map((_, b) => ({ out: out.slice(b * sampleSize, (b + 1) * sampleSize), batchSize: n, run }));
  }
}

/** Frame 0 of a [1, C, F, h, w] latent as [C, h, w] (a copy). */
function firstFrame(x: Float32Array, shape: number[]): LatentFrame {
  const [, C, F, h, w] = shape;
  const plane = h * w;
  const data = new Float32Array(C * plane);
  for (let c = 0; c < C; c += 1) data.set(x.subarray(c * F * plane, c * F * plane + plane), c * plane);
  return { data, channels: C, height: h, width: w };
}
