import {
  ATTR,
  Code,
  DEFAULT_STRENGTH,
  DiffmeshError,
  SPAN,
  invalidParameter,
  withSpan,
  type StageContext,
  type StageResult,
  type StageTask,
} from '@diffmesh/core';
import type { DiffusersLayout, GraphValue } from '@diffmesh/model-layout';
import {
  feedTensor,
  floatOutput,
  ort,
  type LoadedModelDirectory,
  type ModelRunObserver,
  type ModelSession,
  type SessionCache,
} from '@diffmesh/stage-host';
import { float32View, toBytes, type TensorStore } from '@diffmesh/tensor-client';
import { MicroBatcher } from './batching.js';
import { guidanceScaleEmbedding, latentImageIds, packLatents, unpackLatents } from './latent-packing.js';
import { NoiseRng } from './rng.js';
import {
  createScheduler,
  decodeSchedulerState,
  encodeSchedulerState,
  fluxPipelineSigmas,
  SchedulerError,
  type DiffusionScheduler,
} from './schedulers/index.js';
import { runFingerprint, type Checkpointer, type DenoiseCheckpoint } from './checkpoint.js';
import { StepCache, stepCacheWarning } from './step-cache.js';
import { familyProjection, LoopPreviews } from './latent-preview.js';

/** A float tensor without its batch axis. */
interface Item {
  data: Float32Array;
  dims: number[];
}

/** The denoiser inputs of one batch item (latent excluded) and those all items share. */
interface Conditioning {
  cond: Record<string, Item>;
  /** The unconditional item of classifier-free guidance; undefined without CFG. */
  uncond?: Record<string, Item>;
  /** Inputs without a batch axis (FLUX `img_ids`, `txt_ids`). */
  shared: Record<string, Item>;
}

/** One denoiser call of one request (a CFG request makes two per step). */
interface StepItem {
  session: () => Promise<ModelSession>;
  inputs: Map<string, GraphValue>;
  batched: Record<string, Item>;
  shared: Record<string, Item>;
  timestep: number;
  output: string;
}

interface StepOutput {
  out: Float32Array;
  batchSize: number;
  run: number;
}

export interface DirectoryDenoiserDeps {
  sessions: SessionCache;
  store: TensorStore;
  maxBatch: number;
  /** Denoiser runs of one shape in flight at once (default 1). */
  runConcurrency?: number;
  metrics?: ModelRunObserver;
  onBatch?: (size: number, ms: number) => void;
  /** Stores and resumes step checkpoints (see {@link Checkpointer}). */
  checkpoints?: Checkpointer;
}

/** Names of the latent input of each denoiser kind. */
const SAMPLE_INPUT = { unet: 'sample', transformer: 'hidden_states' } as const;

/**
 * The denoising loop of a diffusers/optimum model directory, as the diffusers pipelines run it:
 * the scheduler from `scheduler_config.json` (timesteps, `init_noise_sigma`, `scale_model_input`,
 * `step`; img2img starts from `add_noise` at the step `strength` picks), classifier-free guidance
 * only when the scale is above 1 (guidance-distilled models take it as an input instead), every
 * input fed with the element type and rank its graph declares (float16 models included), and
 * the kind's own conditioning: SDXL's concatenated hidden states, pooled `text_embeds` and
 * `time_ids`; FLUX's 2×2 packed latents, `img_ids`, `txt_ids`, `guidance` and σ as timestep;
 * SD3's joint CLIP/T5 rows and pooled projections. Concurrent requests of the same shape at the
 * same timestep share one model run (the CFG pair always does); where the graph takes a timestep per
 * batch item (FLUX exports), requests at different steps share runs too.
 */
export class DirectoryDenoiser {
  private readonly batcher: MicroBatcher<StepItem, StepOutput>;
  private runs = 0;

  constructor(private readonly deps: DirectoryDenoiserDeps) {
    this.batcher = new MicroBatcher((_key, items) => this.runBatch(items), deps.maxBatch, deps.runConcurrency ?? 1);
  }

  /** Checks that the scheduler config builds (at load, not at the first request). */
  checkScheduler(directory: LoadedModelDirectory): void {
    const { layout } = directory;
    const f = layout.vae.scaleFactor;
    schedulerFor(layout, runOptions(layout, 2, layout.defaults.height / f, layout.defaults.width / f));
  }

  async run(task: StageTask, ctx: StageContext, directory: LoadedModelDirectory): Promise<StageResult> {
    const layout = directory.layout;
    const p = task.params;
    const m = layout.sizeMultiple;
    if (p.width % m !== 0) throw invalidParameter('width', `must be a multiple of ${m}`);
    if (p.height % m !== 0) throw invalidParameter('height', `must be a multiple of ${m}`);
    const f = layout.vae.scaleFactor;
    const h = p.height / f;
    const w = p.width / f;
    const C = layout.vae.latentChannels;
    const flux = layout.kind === 'flux';
    const denoiser = layout.denoiser;
    const sampleName = SAMPLE_INPUT[denoiser.name as 'unet' | 'transformer'];
    const io = directory.io(denoiser.name);
    const inputs = new Map(io.inputs.map((i) => [i.name, i]));
    const cfg = layout.guidance === 'cfg' && p.guidanceScale > 1;
    const cond = await this.conditioning(task, layout, inputs, cfg, h, w);

    const imageLatents = task.inputs.image_latents;
    const strength = imageLatents ? (p.strength ?? DEFAULT_STRENGTH) : undefined;
    const scheduler = schedulerFor(layout, runOptions(layout, p.numInferenceSteps, h, w, strength));

    // Noise for the start latent, then (stochastic schedulers) for the steps, from one seeded stream.
    let rng = new NoiseRng(p.seed);
    let noise = rng.normals(C * h * w);
    if (flux) noise = packLatents(noise, C, h, w);
    let x: Float32Array;
    if (imageLatents) {
      let init = await this.read(imageLatents, 'image_latents', [1, C, h, w]);
      if (flux) init = packLatents(init, C, h, w);
      x = scheduler.addNoise(init, noise, 0);
    } else {
      x = scheduler.initNoiseSigma === 1 ? noise : noise.map((v) => v * scheduler.initNoiseSigma);
    }
    const sampleDims = flux ? [(h / 2) * (w / 2), 4 * C] : [C, h, w];
    const output = io.outputs[0].name;
    const session = () => directory.session(this.deps.sessions, denoiser.name);
    // An export with a fixed batch of 1 runs each item alone (the CFG pair included).
    const batchedNames = new Set([sampleName, ...Object.keys(cond.cond)]);
    const staticBatch = [...inputs.values()].some((v) => batchedNames.has(v.name) && typeof v.shape?.[0] === 'number' && v.shape[0] === 1);
    // A graph whose timestep runs along the batch axis takes one per item: requests at
    // different steps share a run. Otherwise only requests at the same timestep do.
    const timestepPerItem = perItemTimestep(inputs);
    const total = scheduler.timesteps.length;
    // A retried task goes on from its last checkpoint: latent, noise stream and scheduler state.
    const fingerprint = runFingerprint(task, { directory: layout.kind, image: imageLatents !== undefined });
    const resumed = await this.deps.checkpoints?.resume(task, ctx, fingerprint, total, x.length);
    if (resumed) {
      x = resumed.latent;
      rng = NoiseRng.fromState(resumed.rng);
      if (resumed.scheduler) scheduler.restoreState(decodeSchedulerState(resumed.scheduler));
    }
    // Step caching (off unless the params ask): a resumed run starts with an empty cache.
    const cache = StepCache.of(p.stepCache, total - 1);
    const preview = new LoopPreviews(p.preview, familyProjection(layout.kind, C));
    for (let i = resumed?.step ?? 0; i < total; i += 1) {
      ctx.signal.throwIfAborted();
      const t = scheduler.timesteps[i];
      const modelInput = scheduler.scaleModelInput(x, i);
      const timestep = flux ? t / 1000 : t;
      const item = (c: Record<string, Item>): StepItem => ({
        session,
        inputs,
        batched: { ...c, [sampleName]: { data: modelInput, dims: sampleDims } },
        shared: cond.shared,
        timestep,
        output,
      });
      const key = `${denoiser.model}|${sampleDims.join('x')}|${JSON.stringify(Object.values(cond.cond).map((c) => c.dims))}|${
        timestepPerItem ? 'per-item' : timestep
      }${staticBatch ? `|${task.reqId}` : ''}`;
      await withSpan(
        SPAN.modelRun,
        { [ATTR.stage]: 'denoising', [ATTR.model]: task.model, [ATTR.step]: i + 1, [ATTR.stepCount]: total },
        async (span) => {
          // step cache: a step whose input barely moved reuses the last output (no model run).
          const cached = cache?.lookup(modelInput, i);
          if (cached) {
            span.setAttributes({ [ATTR.modelRuns]: 0, [ATTR.stepCached]: true });
            x = scheduler.step(cached, i, x, rng);
            return;
          }
          const [outCond, outUncond] = await Promise.all([
            this.batcher.submit(staticBatch ? `${key}|c` : key, item(cond.cond), ctx.signal),
            cond.uncond ? this.batcher.submit(staticBatch ? `${key}|u` : key, item(cond.uncond), ctx.signal) : undefined,
          ]);
          span.setAttributes({
            [ATTR.batchSize]: Math.max(outCond.batchSize, outUncond?.batchSize ?? 0),
            [ATTR.modelRuns]: outUncond && outUncond.run !== outCond.run ? 2 : 1,
          });
          let out = outCond.out;
          if (outUncond) {
            const u = outUncond.out;
            out = u.map((v, k) => v + p.guidanceScale * (out[k] - v));
          }
          cache?.store(out);
          x = scheduler.step(out, i, x, rng);
        },
      );
      const step = { step: i + 1, totalSteps: total };
      // Live previews (params.preview): the latent copied at a due step, drawn while the next step runs.
      const latent = x;
      const previews = await preview.after(i + 1, total, () => ({
        data: flux ? unpackLatents(latent, C, h, w) : latent.slice(0, C * h * w),
        channels: C,
        height: h,
        width: w,
      }));
      const progress = previews.length > 0 ? { ...step, previews } : step;
      const checkpoints = this.deps.checkpoints;
      const state = (): DenoiseCheckpoint => ({
        step: i + 1,
        totalSteps: total,
        fingerprint,
        latent: x,
        rng: rng.getState(),
        scheduler: encodeSchedulerState(scheduler.getState()),
      });
      if (checkpoints?.preempting(ctx, i + 1, total)) await checkpoints.yieldSlot(task, ctx, state(), progress);
      if (checkpoints?.due(i + 1, total)) await checkpoints.save(task, ctx, state(), progress);
      else ctx.onProgress(progress);
    }
    const latent = flux ? unpackLatents(x, C, h, w) : x;
    const latents = await this.deps.store.put({
      requestId: task.reqId,
      name: 'latents',
      data: toBytes(latent),
      shape: [1, C, h, w],
      dtype: 'float32',
    });
    const calls = cond.uncond ? 2 : 1;
    const warning = cache && stepCacheWarning(cache, calls);
    if (cache) this.deps.metrics?.stepCacheSkipped?.(cache.skipped * calls);
    return { outputs: { latents }, ...(warning ? { warnings: [warning] } : {}) };
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

  /** The denoiser inputs besides the latent and timestep, per pipeline kind. */
  private async conditioning(
    task: StageTask,
    layout: DiffusersLayout,
    inputs: Map<string, GraphValue>,
    cfg: boolean,
    h: number,
    w: number,
  ): Promise<Conditioning> {
    const p = task.params;
    const get = (name: string) => this.embeds(task, name);
    const has = (name: string) => task.inputs[name] !== undefined;
    switch (layout.kind) {
      case 'sd': {
        const cond: Record<string, Item> = { encoder_hidden_states: await get('prompt_embeds') };
        // LCM: the guidance scale goes in as an embedding, one pass per step.
        const tc = inputs.get('timestep_cond');
        if (tc) {
          const dim = typeof tc.shape?.[1] === 'number' ? tc.shape[1] : Number(layout.denoiser.config.time_cond_proj_dim);
          if (!Number.isInteger(dim) || dim < 2) {
            throw new DiffmeshError(
              Code.FAILED_PRECONDITION,
              'MODEL_LOAD_FAILED',
              'unet/model.onnx input "timestep_cond" has no fixed width and unet/config.json has no time_cond_proj_dim',
            );
          }
          cond.timestep_cond = { data: guidanceScaleEmbedding(p.guidanceScale - 1, dim), dims: [dim] };
        }
        const uncond = cfg ? { encoder_hidden_states: await get('negative_prompt_embeds') } : undefined;
        return { cond, ...(uncond ? { uncond } : {}), shared: {} };
      }
      case 'sdxl': {
        const timeIds: Item = { data: Float32Array.from([p.height, p.width, 0, 0, p.height, p.width]), dims: [6] };
        const build = async (prefix: string): Promise<Record<string, Item>> => ({
          encoder_hidden_states: concatLast(await get(`${prefix}prompt_embeds`), await get(`${prefix}prompt_embeds_2`)),
          text_embeds: await get(`${prefix}pooled_prompt_embeds_2`),
          time_ids: timeIds,
        });
        const cond = await build('');
        let uncond: Record<string, Item> | undefined;
        if (cfg) {
          // force_zeros_for_empty_prompt: no negative prompt → zero embeddings (the encoders made none).
          uncond = has('negative_prompt_embeds')
            ? await build('negative_')
            : {
                encoder_hidden_states: zerosLike(cond.encoder_hidden_states),
                text_embeds: zerosLike(cond.text_embeds),
                time_ids: timeIds,
              };
        }
        return { cond, ...(uncond ? { uncond } : {}), shared: {} };
      }
      case 'flux': {
        const t5 = await get('prompt_embeds_2');
        const cond: Record<string, Item> = { encoder_hidden_states: t5, pooled_projections: await get('pooled_prompt_embeds') };
        if (inputs.has('guidance')) cond.guidance = { data: Float32Array.of(p.guidanceScale), dims: [] };
        const T = t5.dims[0];
        const rank = (name: string) => inputs.get(name)?.shape?.length ?? 2;
        const shared: Record<string, Item> = {
          txt_ids: { data: new Float32Array(T * 3), dims: rank('txt_ids') === 3 ? [1, T, 3] : [T, 3] },
          img_ids: { data: latentImageIds(h, w), dims: rank('img_ids') === 3 ? [1, (h / 2) * (w / 2), 3] : [(h / 2) * (w / 2), 3] },
        };
        return { cond, shared };
      }
      case 'sd3': {
        const J = inputs.get('encoder_hidden_states')?.shape?.[2];
        const withT5 = layout.textEncoders.some((t) => t.component === 'text_encoder_3');
        const build = async (prefix: string): Promise<Record<string, Item>> => {
          const l = await get(`${prefix}prompt_embeds`);
          const g = await get(`${prefix}prompt_embeds_2`);
          const given = withT5 ? await get(`${prefix}prompt_embeds_3`) : undefined;
          const width = typeof J === 'number' ? J : given ? given.dims[1] : Number(layout.denoiser.config.joint_attention_dim);
          // Without T5, StableDiffusion3Pipeline uses zeros of [tokenizer_max_length (the CLIP rows), joint_attention_dim].
          const t5 = given ?? { data: new Float32Array(l.dims[0] * width), dims: [l.dims[0], width] };
          return {
            encoder_hidden_states: sd3Rows(concatLast(l, g), t5, width),
            pooled_projections: concatLast(await get(`${prefix}pooled_prompt_embeds`), await get(`${prefix}pooled_prompt_embeds_2`)),
          };
        };
        const cond = await build('');
        const uncond = cfg ? await build('negative_') : undefined;
        return { cond, ...(uncond ? { uncond } : {}), shared: {} };
      }
    }
  }

  /** Stacks items along the batch axis, runs the denoiser once, splits the output. */
  private async runBatch(items: StepItem[]): Promise<StepOutput[]> {
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
    const started = performance.now();
    const result = await session.run(feeds);
    const out = floatOutput(result[first.output]);
    const ms = performance.now() - started;
    this.deps.metrics?.modelRun(ms / 1000);
    this.deps.metrics?.denoiseBatch?.(n);
    this.deps.onBatch?.(n, ms);
    const run = ++this.runs;
    const size = out.length / n;
    return items.map((_, b) => ({ out: out.slice(b * size, (b + 1) * size), batchSize: n, run }));
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
function schedulerFor(layout: DiffusersLayout, opts: Parameters<typeof createScheduler>[1]): DiffusionScheduler {
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

/**
 * The scheduler options the kind's pipeline passes: FLUX its `fluxPipelineSigmas` and the
 * packed token count (dynamic shifting); SD3 the patched token count (dynamic shifting only).
 */
function runOptions(
  layout: DiffusersLayout,
  steps: number,
  h: number,
  w: number,
  strength?: number,
): Parameters<typeof createScheduler>[1] {
  const patch = layout.sizeMultiple / layout.vae.scaleFactor;
  return {
    steps,
    ...(strength !== undefined ? { strength } : {}),
    ...(layout.kind === 'flux' ? { sigmas: fluxPipelineSigmas(steps), imageSeqLen: (h / 2) * (w / 2) } : {}),
    ...(layout.kind === 'sd3' ? { imageSeqLen: (h / patch) * (w / patch) } : {}),
  };
}

/** Two [L, A] and [L, B] tensors side by side → [L, A + B] (SDXL, SD3 pooled). */
function concatLast(a: Item, b: Item): Item {
  const A = a.dims[a.dims.length - 1];
  const B = b.dims[b.dims.length - 1];
  const rows = a.data.length / A;
  if (b.data.length / B !== rows) throw invalidParameter('prompt_embeds_2', `has ${b.data.length / B} rows, prompt_embeds ${rows}`);
  const out = new Float32Array(rows * (A + B));
  for (let r = 0; r < rows; r += 1) {
    out.set(a.data.subarray(r * A, (r + 1) * A), r * (A + B));
    out.set(b.data.subarray(r * B, (r + 1) * B), r * (A + B) + A);
  }
  return { data: out, dims: [...a.dims.slice(0, -1), A + B] };
}

/** SD3's joint rows: the CLIP rows zero-padded to the T5 width, then the T5 rows. */
function sd3Rows(clip: Item, t5: Item, width: number): Item {
  const [L, D] = clip.dims;
  const [T, J] = t5.dims;
  if (J !== width) throw invalidParameter('prompt_embeds_3', `has width ${J}, the transformer takes ${width}`);
  const out = new Float32Array((L + T) * J);
  for (let r = 0; r < L; r += 1) out.set(clip.data.subarray(r * D, (r + 1) * D), r * J);
  out.set(t5.data, L * J);
  return { data: out, dims: [L + T, J] };
}

function zerosLike(x: Item): Item {
  return { data: new Float32Array(x.data.length), dims: x.dims };
}
