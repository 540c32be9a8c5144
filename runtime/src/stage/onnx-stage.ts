import type { StageName } from '../domain.js';
import type { ModelRunObserver } from '../metrics/stage.js';
import type { ModelCatalog } from '../models/catalog.js';
import type { ModelManifest } from '../models/manifest.js';
import type { SessionCache } from '../onnx/sessions.js';
import { ATTR, SPAN, withSpan, type Attributes } from '../telemetry/spans.js';
import type { TensorStore } from '../tensor-store/types.js';
import type { StageContext, StageHandler, StageResult, StageTask } from './types.js';

/** What every ONNX-backed stage needs. */
export interface OnnxStageDeps {
  catalog: ModelCatalog;
  sessions: SessionCache;
  store: TensorStore;
  /** Models this instance serves; empty = every model in the catalog. */
  models: string[];
  /** Observes model run times (and denoiser batch sizes); absent = not measured. */
  metrics?: ModelRunObserver;
}

/** Base of the stages that run one of a model's ONNX files. */
export abstract class OnnxStage implements StageHandler {
  abstract readonly stage: StageName;
  /** The manifest file this stage runs. */
  protected abstract readonly modelFile: keyof ModelManifest['files'];

  constructor(protected readonly deps: OnnxStageDeps) {}

  models(): string[] {
    return this.deps.models;
  }

  /** Loads the model's session ahead of the first task. */
  async warm(model: string): Promise<void> {
    const m = await this.deps.catalog.get(model);
    await this.deps.sessions.get(m.file(this.modelFile));
  }

  abstract execute(task: StageTask, ctx: StageContext): Promise<StageResult>;

  /**
   * Runs one model run in a `diffmesh.model.run` span (with the stage and `attributes`, e.g.
   * the batch size) and reports its duration to `diffmesh_model_run_seconds`.
   */
  protected runModel<T>(attributes: Attributes, run: () => Promise<T>): Promise<T> {
    return withSpan(SPAN.modelRun, { [ATTR.stage]: this.stage, ...attributes }, async () => {
      const started = performance.now();
      try {
        return await run();
      } finally {
        this.deps.metrics?.modelRun((performance.now() - started) / 1000);
      }
    });
  }
}
