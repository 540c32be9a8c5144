import {
  ATTR,
  MicroBatcher,
  SPAN,
  NoiseRng,
  OnnxStage,
  float32View,
  invalidParameter,
  latentFrames,
  ort,
  toBytes,
  type StageContext,
  type StageResult,
  type StageTask,
  type OnnxStageDeps,
  withSpan,
} from '@diffmesh/runtime';
import { applyGuidance, samplerFor } from './samplers.js';

export interface DenoisingStageOptions extends OnnxStageDeps {
  /** Most latents in one denoiser run (a CFG request counts two). */
  maxBatch: number;
  /** Called after every denoiser run with its batch size (for metrics). */
  onBatch?: (size: number, ms: number) => void;
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
  private runs = 0;

  constructor(private readonly opts: DenoisingStageOptions) {
    super(opts);
    this.batcher = new MicroBatcher((_key, items) => this.runBatch(items), opts.maxBatch);
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const { manifest, file } = await this.opts.catalog.get(task.model);
    const p = task.params;
    const f = manifest.latent.spatialFactor;
    if (p.width % f !== 0) throw invalidParameter('width', `must be a multiple of ${f}`);
    if (p.height % f !== 0) throw invalidParameter('height', `must be a multiple of ${f}`);
    const shape = [
      1,
      manifest.latent.channels,
      latentFrames(p.numFrames, manifest.latent.temporalFactor),
      p.height / f,
      p.width / f,
    ];
    const cond = await this.embeds(task, 'prompt_embeds');
    const guided = p.guidanceScale !== 1;
    const uncond = guided ? await this.embeds(task, 'negative_prompt_embeds') : undefined;

    const x = new NoiseRng(p.seed).normals(shape.reduce((a, b) => a * b, 1));
    const sampler = samplerFor(manifest, p.numInferenceSteps);
    const denoiser = file('denoiser');
    const key = `${denoiser}|${shape.join('x')}|${cond.shape.join('x')}`;
    const total = sampler.timesteps.length;
    for (let i = 0; i < total; i += 1) {
      ctx.signal.throwIfAborted();
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
          const [outCond, outUncond] = await Promise.all([
            this.batcher.submit(key, item(cond), ctx.signal),
            uncond ? this.batcher.submit(key, item(uncond), ctx.signal) : undefined,
          ]);
          span.setAttributes({
            [ATTR.batchSize]: Math.max(outCond.batchSize, outUncond?.batchSize ?? 0),
            [ATTR.modelRuns]: outUncond && outUncond.run !== outCond.run ? 2 : 1,
          });
          const out = outUncond ? applyGuidance(outUncond.out, outCond.out, p.guidanceScale) : outCond.out;
          sampler.step(x, out, i);
        },
      );
      ctx.onProgress({ step: i + 1, totalSteps: total });
    }
    const latents = await this.opts.store.put({
      requestId: task.reqId,
      name: 'latents',
      data: toBytes(x),
      shape,
      dtype: 'float32',
    });
    return { outputs: { latents } };
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
    const session = await this.opts.sessions.get(first.file);
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
    const result = await session.run({
      sample: new ort.Tensor('float32', sample, [n, ...first.sampleShape.slice(1)]),
      timestep: new ort.Tensor('float32', timestep, [n]),
      encoder_hidden_states: new ort.Tensor('float32', text, [n, ...first.textShape.slice(1)]),
    });
    const out = result.out.data as Float32Array;
    const ms = performance.now() - started;
    this.opts.metrics?.modelRun(ms / 1000);
    this.opts.metrics?.denoiseBatch?.(n);
    this.opts.onBatch?.(n, ms);
    const run = ++this.runs;
    return items.map((_, b) => ({ out: out.slice(b * sampleSize, (b + 1) * sampleSize), batchSize: n, run }));
  }
}
