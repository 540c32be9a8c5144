import { DenoiserAdapters, DenoisingStage } from '@diffmesh/dit-svc';
import { TextEncoderAdapters, TextEncodingStage } from '@diffmesh/encoder-svc';
import { ModelCatalog, SessionCache, type ExecutionProvider, type GraphRewriteOptions } from '@diffmesh/stage-host';
import { loadPlanRegistry, type PlanRegistry, LocalInstance, Scheduler, type SchedulerLimits } from '@diffmesh/scheduler';
import { createTensorStore, type TensorStore } from '@diffmesh/tensor-client';
import { type Logger, type StageHandler, type StageName } from '@diffmesh/core';
import { ImageEncodingStage, VaeDecodingStage } from '@diffmesh/vae-svc';

export interface EmbeddedOptions {
  /** Directories holding `<org>/<name>/model.json`. */
  modelRoots: string[];
  /**
   * Model directories (diffusers/optimum ONNX layout) to serve besides the plan file's
   * models, each under its absolute real path.
   */
  modelDirectories?: string[];
  /** ExecutionPlan registry file; default: the one shipped with runtime. */
  plansFile?: string;
  /** onnxruntime intra-op threads; 0 = its default. */
  intraOpThreads: number;
  /** onnxruntime execution providers in order of preference; default `['cpu']`. */
  executionProviders?: readonly ExecutionProvider[];
  /** Most latents in one denoiser run. */
  maxBatch: number;
  /** Folder of the LoRA adapters requests name; none without. */
  loraDir?: string;
  /** How denoiser graphs are rewritten at load (fused kernels, 4-bit weights); default: as they are. */
  graphRewrites?: GraphRewriteOptions;
  log: Logger;
  limits?: Partial<SchedulerLimits>;
}

/** Everything the embedded runtime runs in one process. */
export interface Embedded {
  scheduler: Scheduler;
  store: TensorStore;
  registry: PlanRegistry;
  catalog: ModelCatalog;
  /** Models with plans whose files are installed, i.e. what this process can serve. */
  servable: string[];
  close(): Promise<void>;
}

export const EMBEDDED_LIMITS: SchedulerLimits = {
  maxQueueLength: 256,
  maxInFlight: 1024,
  maxAttempts: 3,
  retryBackoffMs: 100,
  defaultTimeoutMs: 0,
  stageTimeoutMs: 0,
  retentionMs: 10 * 60_000,
};

/** Tasks one in-process instance of a stage runs at once. */
const LOCAL_CAPACITY: Partial<Record<StageName, number>> = {
  text_encoding: 4,
  text_encoding_2: 4,
  image_encoding: 2,
  denoising: 8,
  vae_decoding: 2,
};

/**
 * Starts the whole pipeline in this process on the in-memory backends: the scheduler with
 * its per-pool queues, and one in-process instance of each stage for every pool of every
 * installed model's plan. Nothing external is needed.
 */
export async function startEmbedded(opts: EmbeddedOptions): Promise<Embedded> {
  const store = createTensorStore({ backend: 'memory' });
  const sessions = new SessionCache({
    intraOpThreads: opts.intraOpThreads,
    interOpThreads: 1,
    ...(opts.executionProviders ? { executionProviders: opts.executionProviders } : {}),
    ...(opts.graphRewrites ? { graphRewrites: opts.graphRewrites } : {}),
    log: opts.log,
  });
  const registry = await loadPlanRegistry(opts.plansFile, { directories: opts.modelDirectories ?? [] });
  // Model ids that name a directory (entries with `directory:` under an id of their own).
  const directories: Record<string, string> = {};
  for (const e of registry.entries) if (e.model && e.directory && e.model !== e.directory) directories[e.model] = e.directory;
  const catalog = new ModelCatalog(opts.modelRoots, { directories });
  const scheduler = new Scheduler({
    registry,
    store,
    log: opts.log,
    limits: { ...EMBEDDED_LIMITS, ...opts.limits },
  });
  const deps = { catalog, sessions, store, models: [] };
  // Both text-encoding stages apply the text-encoder part of the adapters (one store: keys name the stage).
  const textAdapters = opts.loraDir ? { adapters: new TextEncoderAdapters({ dir: opts.loraDir, log: opts.log }) } : {};
  const handlers: Partial<Record<StageName, StageHandler>> = {
    text_encoding: new TextEncodingStage({ ...deps, ...textAdapters }),
    text_encoding_2: new TextEncodingStage({ ...deps, stage: 'text_encoding_2', ...textAdapters }),
    denoising: new DenoisingStage({
      ...deps,
      maxBatch: opts.maxBatch,
      ...(opts.loraDir ? { adapters: new DenoiserAdapters({ dir: opts.loraDir, log: opts.log }) } : {}),
    }),
    image_encoding: new ImageEncodingStage(deps),
    vae_decoding: new VaeDecodingStage(deps),
  };
  const installed = new Set(await catalog.list());
  const servable: string[] = [];
  const added = new Set<string>();
  for (const model of registry.entries.flatMap((e) => (e.model ? [e.model] : []))) {
    if (!installed.has(model) && registry.lookup(model).directory === undefined) continue;
    const plan = registry.lookup(model);
    if (!plan.stages.every((s) => handlers[s.name])) continue;
    servable.push(model);
    for (const s of plan.stages) {
      if (added.has(s.pool)) continue;
      added.add(s.pool);
      const handler = handlers[s.name] as StageHandler;
      scheduler.addInstance(new LocalInstance(`${s.pool}/embedded`, s.pool, handler, LOCAL_CAPACITY[s.name] ?? 1, opts.log));
    }
  }
  return {
    scheduler,
    store,
    registry,
    catalog,
    servable,
    async close() {
      await scheduler.stop();
      await sessions.close();
      await store.close();
    },
  };
}
