import type { AdapterReport, StageContext, StageResult, StageTask } from '@diffmesh/core';
import type { OnnxComponentName } from '@diffmesh/model-layout';
import {
  defaultLatentSize,
  OnnxStage,
  type LoadedModelDirectory,
  type OnnxStageDeps,
  type ResolvedModel,
  type SessionVariant,
} from '@diffmesh/stage-host';
import { BuiltinDenoiser } from './builtin-denoiser.js';
import { Checkpointer } from './checkpoint.js';
import { DenoisingLoop } from './denoising-loop.js';
import type { DenoiserAdapters } from './denoiser-adapters.js';
import { DirectoryDenoiser } from './directory-denoiser.js';

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
  /** LoRA adapters of model directories' denoisers (`--lora-dir`); none without. */
  adapters?: DenoiserAdapters;
}

/**
 * The `denoising` stage: starts from seeded noise and runs the model's sampler for
 * `num_inference_steps`, with classifier-free guidance against the negative prompt. A built-in
 * model ({@link BuiltinDenoiser}) or a model directory ({@link DirectoryDenoiser}) sets up the
 * run; one {@link DenoisingLoop} runs it. Every step goes through a batcher, so concurrent
 * requests of the same shape share one denoiser run, whatever step each is at.
 */
export class DenoisingStage extends OnnxStage {
  readonly stage = 'denoising' as const;
  protected readonly modelFile = 'denoiser' as const;
  private readonly builtins: BuiltinDenoiser;
  private readonly directories: DirectoryDenoiser;
  private readonly loop: DenoisingLoop;

  constructor(private readonly opts: DenoisingStageOptions) {
    super(opts);
    const { sessions, store, metrics, onBatch, maxBatch } = opts;
    const batching = { maxBatch, runConcurrency: opts.runConcurrency ?? 1, metrics, onBatch };
    this.builtins = new BuiltinDenoiser({ sessions, store, ...batching });
    this.directories = new DirectoryDenoiser({ sessions, store, ...batching, adapters: opts.adapters });
    const checkpoints = new Checkpointer({ store, every: opts.checkpointEvery ?? 0 });
    this.loop = new DenoisingLoop({ store, checkpoints, metrics });
  }

  override async warm(model: string, opts: { run?: boolean } = {}): Promise<void> {
    const m = await this.opts.catalog.resolve(model);
    if (m.kind === 'directory') this.directories.checkScheduler(m.directory);
    await super.warm(model, opts);
  }

  /** With adapters, a directory's denoiser session is its LoRA-branched graph (the one tasks run): warming loads that one. */
  protected override sessionVariant(directory: LoadedModelDirectory, component: OnnxComponentName): SessionVariant | undefined {
    return component === directory.layout.denoiser.name ? this.opts.adapters?.variant(directory) : undefined;
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
    const batch = layout.guidance === 'cfg' && layout.defaults.guidanceScale > 1 ? 2 : 1;
    return {
      batch,
      // LoRA branches (with --lora-dir) warm at rank 1, as a batch without adapters runs them.
      lora_batch: batch,
      lora_rank: 1,
      height: h,
      width: w,
      sequence_length: tokens,
      packed_height_width: (h / 2) * (w / 2),
    };
  }

  /**
   * The LoRA adapters this stage holds and can load (`--lora-dir`): none without a folder (it
   * refuses every adapter); undefined until the folder was first listed.
   */
  adapters(): AdapterReport | undefined {
    return this.opts.adapters ? this.opts.adapters.report() : { held: [], available: [] };
  }

  onAdaptersChange(listener: () => void): () => void {
    return this.opts.adapters?.onChange(listener) ?? (() => undefined);
  }

  async execute(task: StageTask, ctx: StageContext): Promise<StageResult> {
    const resolved = await this.opts.catalog.resolve(task.model);
    const run =
      resolved.kind === 'directory'
        ? await this.directories.prepare(task, resolved.directory)
        : await this.builtins.prepare(task, resolved.manifest);
    return this.loop.run(task, ctx, run);
  }
}
