import { Code, DEFAULT_STRENGTH, DiffmeshError, invalidParameter, type StageTask } from '@diffmesh/core';
import type { DiffusersLayout, GraphValue } from '@diffmesh/model-layout';
import { feedTensor, type LoadedModelDirectory, type ort, type SessionCache } from '@diffmesh/stage-host';
import { float32View, type TensorStore } from '@diffmesh/tensor-client';
import type { AdapterUse } from '@diffmesh/adapters';
import type { DenoiserAdapters } from './denoiser-adapters.js';
import type { DenoisingRun } from './denoising-loop.js';
import { DirectoryRun, type DirectoryItem } from './directory-run.js';
import { familyOf, type Item, type LatentSize, type ModelFamily } from './families/index.js';
import { familyProjection } from './latent-preview.js';
import { NoiseRng } from './rng.js';
import { createScheduler, SchedulerError, type CreateSchedulerOptions, type DiffusionScheduler } from './schedulers/index.js';
import { StepBatcher, type BatchRun, type StepBatcherOptions } from './step-batcher.js';

export interface DirectoryDenoiserDeps extends StepBatcherOptions {
  sessions: SessionCache;
  store: TensorStore;
  /** LoRA adapters (`--lora-dir`); without, a request naming adapters is refused. */
  adapters?: DenoiserAdapters;
}

/** Names of the latent input of each denoiser kind. */
const SAMPLE_INPUT = { unet: 'sample', transformer: 'hidden_states' } as const;

/**
 * The denoiser of a diffusers/optimum model directory, as the diffusers pipelines run it: the
 * scheduler from `scheduler_config.json` (timesteps, `init_noise_sigma`, `scale_model_input`,
 * `step`; img2img starts from `add_noise` at the step `strength` picks), classifier-free
 * guidance only when the scale is above 1 (guidance-distilled models take it as an input
 * instead), every input fed with the element type and rank its graph declares (float16 models
 * included), and what the family does its own way (conditioning, latent packing, timestep
 * form: `families/`). Concurrent requests of the same shape at the same timestep share one
 * model run (the CFG pair always does); where the graph takes a timestep per batch item (FLUX
 * exports), requests at different steps share runs too.
 */
export class DirectoryDenoiser {
  private readonly batcher: StepBatcher<DirectoryItem>;

  constructor(private readonly deps: DirectoryDenoiserDeps) {
    this.batcher = new StepBatcher((items) => this.stack(items), deps);
  }

  /** Checks that the scheduler config builds (at load, not at the first request). */
  checkScheduler(directory: LoadedModelDirectory): void {
    const { layout } = directory;
    const f = layout.vae.scaleFactor;
    const size = { channels: layout.vae.latentChannels, height: layout.defaults.height / f, width: layout.defaults.width / f };
    schedulerFor(layout, runOptions(familyOf(layout.kind), layout, 2, size));
  }

  /** Sets up the run of `task` (its inputs read, its start latent made). */
  async prepare(task: StageTask, directory: LoadedModelDirectory): Promise<DenoisingRun> {
    const layout = directory.layout;
    const p = task.params;
    const m = layout.sizeMultiple;
    if (p.width % m !== 0) throw invalidParameter('width', `must be a multiple of ${m}`);
    if (p.height % m !== 0) throw invalidParameter('height', `must be a multiple of ${m}`);
    const f = layout.vae.scaleFactor;
    const size: LatentSize = { channels: layout.vae.latentChannels, height: p.height / f, width: p.width / f };
    const family = familyOf(layout.kind);
    const denoiser = layout.denoiser;
    const io = directory.io(denoiser.name);
    const inputs = new Map(io.inputs.map((i) => [i.name, i]));
    const cfg = layout.guidance === 'cfg' && p.guidanceScale > 1;
    const embeds = (name: string): Promise<Item> => this.embeds(task, name);
    const has = (name: string): boolean => task.inputs[name] !== undefined;
    const cond = await family.conditioning({ task, layout, inputs, cfg, latent: size, embeds, has });
    const imageLatents = task.inputs.image_latents;
    const strength = imageLatents ? (p.strength ?? DEFAULT_STRENGTH) : undefined;
    const scheduler = schedulerFor(layout, runOptions(family, layout, p.numInferenceSteps, size, strength));
    // Noise for the start latent, then (stochastic schedulers) for the steps, from one seeded stream.
    const rng = new NoiseRng(p.seed);
    const x = await this.startLatent(task, family, scheduler, size, rng);
    const sampleName = SAMPLE_INPUT[denoiser.name as 'unet' | 'transformer'];
    const lora = await this.adapters(task, directory);
    return new DirectoryRun({
      task,
      batcher: this.batcher,
      family,
      size,
      scheduler,
      rng,
      x,
      cond,
      sampleName,
      inputs,
      model: denoiser.model,
      output: io.outputs[0].name,
      session: () => directory.session(this.deps.sessions, denoiser.name, lora.variant),
      adapters: lora.uses,
      ...(lora.feeds ? { loraFeeds: lora.feeds } : {}),
      // An export with a fixed batch of 1 runs each item alone (the CFG pair included).
      staticBatch: [...inputs.values()].some(
        (v) => (v.name === sampleName || v.name in cond.cond) && typeof v.shape?.[0] === 'number' && v.shape[0] === 1,
      ),
      // A graph whose timestep runs along the batch axis takes one per item: requests at
      // different steps share a run. Otherwise only requests at the same timestep do.
      timestepPerItem: perItemTimestep(inputs),
      projection: familyProjection(layout.kind, size.channels),
    });
  }

  /** A task's adapters, and the session variant and branch inputs every request of the directory then shares. */
  private async adapters(task: StageTask, directory: LoadedModelDirectory) {
    const adapters = this.deps.adapters;
    if (!adapters) {
      if (task.params.adapters?.length)
        throw invalidParameter('adapters[0].name', 'this denoising stage serves no adapters (start it with --lora-dir)');
      return { uses: [] as AdapterUse[] };
    }
    return {
      uses: await adapters.resolve(task.params, directory),
      variant: adapters.variant(directory),
      feeds: (rows: AdapterUse[][]) => adapters.feeds(directory, rows),
    };
  }

  /** The start latent in the denoiser's form: scaled noise, or (img2img) the image's latent noised to the first step. */
  private async startLatent(
    task: StageTask,
    family: ModelFamily,
    scheduler: DiffusionScheduler,
    size: LatentSize,
    rng: NoiseRng,
  ): Promise<Float32Array> {
    const { channels: C, height: h, width: w } = size;
    const noise = family.pack(rng.normals(C * h * w), size);
    const imageLatents = task.inputs.image_latents;
    if (!imageLatents) return scheduler.initNoiseSigma === 1 ? noise : noise.map((v) => v * scheduler.initNoiseSigma);
    const init = await this.read(imageLatents, 'image_latents', [1, C, h, w]);
    return scheduler.addNoise(family.pack(init, size), noise, 0);
  }

  /** Reads a float32 object of the request, checking its size. */
  private async read(ref: StageTask['inputs'][string], name: string, shape?: number[]): Promise<Float32Array> {
    if (ref.dtype !== 'float32') throw invalidParameter(name, `expected float32, got ${ref.dtype}`);
    if (shape && ref.shape.join('x') !== shape.join('x')) {
      throw invalidParameter(name, `expected shape [${shape.join(', ')}], got [${ref.shape.join(', ')}]`);
    }
    const { data } = await this.deps.store.get(ref);
    return float32View(data);
  }

  private async embeds(task: StageTask, name: string): Promise<Item> {
    const ref = task.inputs[name];
    if (!ref) throw invalidParameter(name, 'missing input from the text encoding stages');
    return { data: await this.read(ref, name), dims: ref.shape.slice(1) };
  }

  /** Stacks items along the batch axis into the graph's feeds, in the types and ranks it declares. */
  private async stack(items: DirectoryItem[]): Promise<BatchRun> {
    const first = items[0];
    const session = await first.session();
    const n = items.length;
    const feeds: Record<string, ort.Tensor> = {};
    for (const [name, v] of first.inputs) {
      const type = v.type;
      if (name === 'timestep') {
        // Rank 0 (current optimum UNets), or [1] broadcast over the batch (older exports, `steps`);
        // a graph whose timestep shares the latent's batch axis (FLUX exports) gets one per item.
        const rank = v.shape?.length ?? 0;
        feeds.timestep = perItemTimestep(first.inputs)
          ? feedTensor(
              type,
              items.map((it) => it.timestep),
              [n],
            )
          : feedTensor(type, [first.timestep], rank === 0 ? [] : [1]);
      } else if (name in first.batched) {
        const dims = first.batched[name].dims;
        const size = first.batched[name].data.length;
        const data = new Float32Array(n * size);
        items.forEach((it, b) => data.set(it.batched[name].data, b * size));
        feeds[name] = feedTensor(type, data, [n, ...dims]);
      } else if (name in first.shared) {
        feeds[name] = feedTensor(type, first.shared[name].data, first.shared[name].dims);
      } else {
        throw new DiffmeshError(Code.FAILED_PRECONDITION, 'MODEL_LOAD_FAILED', `denoiser input "${name}" is not one the pipeline feeds`);
      }
    }
    // The LoRA branches' inputs: each item's adapters along the batch axis (zeros for none).
    if (first.loraFeeds) Object.assign(feeds, await first.loraFeeds(items.map((it) => it.adapters)));
    return { session, feeds, output: first.output };
  }
}

/** True when the graph's timestep is a vector along the latent's batch axis: one timestep per item. */
function perItemTimestep(inputs: Map<string, GraphValue>): boolean {
  const v = inputs.get('timestep');
  const rank = v?.shape?.length ?? 0;
  return rank === 1 && typeof v?.shape?.[0] === 'string' && v.shape[0] === batchAxis(inputs);
}

/** The symbolic batch axis of the denoiser's latent input (`batch_size`), if it has one. */
function batchAxis(inputs: Map<string, GraphValue>): string | undefined {
  const sample = inputs.get('sample') ?? inputs.get('hidden_states');
  const d = sample?.shape?.[0];
  return typeof d === 'string' ? d : undefined;
}

/** A scheduler for one run; a bad scheduler config is the model's fault, a bad option the request's. */
function schedulerFor(layout: DiffusersLayout, opts: CreateSchedulerOptions): DiffusionScheduler {
  try {
    return createScheduler(layout.schedulerConfig, opts);
  } catch (err) {
    if (!(err instanceof SchedulerError)) throw err;
    if (err.field === 'strength' || err.field === 'steps')
      throw invalidParameter(err.field === 'steps' ? 'num_inference_steps' : 'strength', err.message);
    throw new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'MODEL_LOAD_FAILED',
      `model directory ${layout.dir}: scheduler/scheduler_config.json: ${err.message}`,
      { metadata: { model_dir: layout.dir, file: 'scheduler/scheduler_config.json', ...(err.field ? { input: err.field } : {}) } },
    );
  }
}

/** The scheduler options of a run: steps, strength (img2img) and what the family's pipeline adds. */
function runOptions(
  family: ModelFamily,
  layout: DiffusersLayout,
  steps: number,
  size: LatentSize,
  strength?: number,
): CreateSchedulerOptions {
  return { steps, ...(strength !== undefined ? { strength } : {}), ...family.schedulerOptions(layout, steps, size) };
}
