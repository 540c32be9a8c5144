import { realpath } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { Code, DiffmeshError, silentLogger, type Logger } from '@diffmesh/core';
import { describeMissing } from './cuda-libraries.js';
import {
  availableExecutionProviders,
  checkExecutionProviders,
  checkProviderNames,
  GPU_PROVIDERS,
  INSTALLABLE_PROVIDERS,
  installedFiles,
  onnxruntimeBinDir,
  providerStatuses,
  type ExecutionProvider,
  type InstallableProvider,
  type ProviderStatus,
} from './execution-providers.js';
import { OnnxRunner } from './onnx-runner.js';
import type { LoadResult, ProviderChoice, WireSessionOptions, WireTensor, WireValueMetadata } from './onnx-runner-protocol.js';
import { isMissingF16, probeProvider, type ProviderProbe } from './provider-probe.js';
import { InlineHost, type SessionHost } from './session-host.js';
import { firstLine } from './session-table.js';
import { graphPassesFor, rewriteModelFile, type GraphRewriteOptions, type RewrittenModel } from './graph-passes/graph-rewrites.js';
import type { PassReport } from './graph-passes/graph-pass.js';

/** Threading and execution providers of onnxruntime sessions. */
export interface OrtOptions {
  /** Threads used inside one operator; 0 = onnxruntime's default. */
  intraOpThreads: number;
  /** Threads running independent operators; 0 = default. */
  interOpThreads: number;
  /**
   * Execution providers in order of preference: a session is created with the first that
   * loads it, and the next is tried when one fails (onnxruntime itself runs the operators a
   * provider lacks on the CPU). Default `['cpu']`.
   */
  executionProviders?: readonly ExecutionProvider[];
  /** Options of each provider, given to onnxruntime as they are (e.g. `webgpu: { validationMode: 'disabled' }`). */
  providerOptions?: Partial<Record<ExecutionProvider, Record<string, unknown>>>;
  /** Further session options (`graphOptimizationLevel`, `enableGraphCapture`, `freeDimensionOverrides`, `extra`, …). */
  sessionOptions?: WireSessionOptions;
  /**
   * Runner threads per model file on the CPU, or per process for GPU providers (whose sessions
   * share the device): runs of one model on different threads overlap. 0 runs models on the
   * calling thread, which blocks it for each whole run: for measurements only. Default 1.
   */
  runnerThreads?: number;
  /**
   * How denoiser graphs are rewritten when their sessions are made (fused kernels, 4-bit
   * weights), for the provider each session gets; only {@link SessionCache.get} calls with
   * `rewrite` are. Default: as they are.
   */
  graphRewrites?: GraphRewriteOptions;
  /** Says which provider each session got. Default: silent. */
  log?: Logger;
}

/** Options of one {@link SessionCache.get}. */
export interface SessionGetOptions {
  /** Apply the cache's `graphRewrites` (a denoiser's graph). Default false. */
  rewrite?: boolean;
  /** A rewritten graph of the file to load instead (a LoRA-branched denoiser, say). Default none. */
  variant?: SessionVariant;
}

/** What the graph rewrites did to a session's model. */
export interface SessionRewrites {
  reports: PassReport[];
  /** Bytes of the graph's weights as the file has them, and as the session got them. */
  weightBytesBefore: number;
  weightBytesAfter: number;
}

/** A model's outputs by name. */
export type ModelOutputs = Record<string, ort.Tensor>;

/** Options of one {@link ModelSession.run}. */
export interface ModelRunOptions {
  /**
   * Aborting it drops a run that has not started and answers one that has with the abort
   * reason at once (the thread finishes that run and discards it).
   */
  signal?: AbortSignal;
  /**
   * The feeds' buffers are the caller's to give away: they move to the runner thread instead
   * of being copied (the caller's arrays are then empty). Default false.
   */
  transfer?: boolean;
}

/** A loaded ONNX model. Its runs happen off the caller's thread (unless `runnerThreads` is 0). */
export interface ModelSession {
  /** The model file's real path. */
  readonly file: string;
  /** The provider the session was created with. */
  readonly provider: ExecutionProvider;
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly WireValueMetadata[];
  readonly outputMetadata: readonly WireValueMetadata[];
  /** What the graph rewrites did, when any ran on this session's model. */
  readonly rewrites?: SessionRewrites;
  run(feeds: Record<string, ort.Tensor>, opts?: ModelRunOptions): Promise<ModelOutputs>;
}

/** A provider that could not take a model, and why. */
export interface SkippedProvider {
  provider: string;
  error: string;
}

/**
 * A rewritten graph of a model file (a graph pass run when the session is made): sessions
 * of the same file and key are shared; the file on disk is never changed.
 */
export interface SessionVariant {
  /** Names the variant among the file's sessions. */
  key: string;
  /** The graph to load, from the file's real path: the model's bytes, or the path of a rewritten copy. */
  source(file: string): Promise<string | Uint8Array>;
}

/**
 * Loads each ONNX file once per process and shares the session; creating a session costs
 * tens to hundreds of milliseconds (and the weights' memory), so stage handlers never do it
 * per request. Files are keyed by their real path, so a model reached through a symlink or
 * under two ids is loaded once. Sessions are created from the path, so external weights
 * (`model.onnx_data`) are read from beside the file.
 *
 * Sessions live in runner threads ({@link OnnxRunner}): onnxruntime-node's `run` blocks the
 * thread it runs on for the whole model run, and the stage's main thread must keep answering
 * gRPC, health checks, NATS and cancellations. On the CPU each file gets `runnerThreads`
 * threads of its own (different models run at once); GPU sessions share `runnerThreads`
 * threads per process, as they share the device.
 *
 * Providers are tried in the configured order, per session; each session says in the log
 * which one it got and why the ones before it were skipped. A float16 graph is not put on a
 * WebGPU adapter without `shader-f16`.
 */
export class SessionCache {
  private readonly sessions = new Map<string, Promise<PooledSession>>();
  private readonly lanes = new Map<string, SessionHost[]>();
  private readonly probes = new Map<string, Promise<ProviderProbe>>();
  private readonly providers: readonly ExecutionProvider[];
  private readonly installed: string[];
  private readonly threads: number;
  private readonly log: Logger;

  constructor(private readonly opts: OrtOptions = { intraOpThreads: 0, interOpThreads: 0 }) {
    this.providers = opts.executionProviders?.length ? opts.executionProviders : ['cpu'];
    // Unknown names are refused; providers missing here are skipped in favour of the next,
    // unless none is left.
    this.installed = availableExecutionProviders();
    checkProviderNames(this.providers);
    if (!this.providers.some((p) => this.installed.includes(p))) checkExecutionProviders(this.providers);
    this.threads = opts.runnerThreads ?? 1;
    if (!Number.isInteger(this.threads) || this.threads < 0) {
      throw new DiffmeshError(
        Code.INVALID_ARGUMENT,
        'INVALID_PARAMETER',
        `runnerThreads: must be a whole number ≥ 0, got ${this.threads}`,
        {
          metadata: { field: 'runner_threads' },
        },
      );
    }
    this.log = opts.log ?? silentLogger();
  }

  /** The execution providers sessions are created with, in order of preference. */
  get executionProviders(): readonly ExecutionProvider[] {
    return this.providers;
  }

  /** Runner threads started so far (0 when models run on the calling thread). */
  get runnerCount(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.filter((h) => h instanceof OnnxRunner).length;
    return n;
  }

  /**
   * The session of `file` (one per process), with the cache's graph rewrites when `rewrite`
   * asks, or of a variant of its graph: `variant.source` gives the graph to load instead (a
   * rewritten copy, as bytes or a path; the rewrites then run on it), made once and kept under
   * `variant.key` beside the file's own session.
   */
  async get(file: string, opts: SessionGetOptions = {}): Promise<ModelSession> {
    const real = await realpath(file).catch(() => file);
    const rewrite = opts.rewrite === true && this.rewritesAsked();
    const { variant } = opts;
    // A rewritten graph, or a variant, is another session than the file's own.
    const key = `${real}${rewrite ? '#rewritten' : ''}${variant ? `#${variant.key}` : ''}`;
    let s = this.sessions.get(key);
    if (!s) {
      s = this.create(real, rewrite, variant);
      // A failed load is not cached, so a fixed file can be retried.
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    const session = await s;
    // A runner thread that died took its sessions with it: load them again.
    if (!session.usable) {
      if (this.sessions.get(key) === s) this.sessions.delete(key);
      return this.get(file, opts);
    }
    return session;
  }

  /** Number of sessions created (or being created). */
  get size(): number {
    return this.sessions.size;
  }

  /**
   * Runs the probe graphs on every configured provider (once per process, in the thread that
   * would run its sessions): whether it works here and whether float16 runs on it. A stage
   * calls it at start and fails when no provider works.
   */
  probe(): Promise<ProviderProbe[]> {
    return Promise.all(this.providers.map((p) => this.probeOf(p)));
  }

  /**
   * Fails with FAILED_PRECONDITION when none of the configured providers works here, naming
   * each and why (for CUDA/TensorRT, the missing files and libraries); logs the ones skipped.
   * Returns the provider sessions will get first.
   */
  async checkStart(): Promise<ExecutionProvider> {
    const probes = await this.probe();
    const first = probes.find((p) => p.works);
    for (const p of probes) {
      if (p === first) break;
      this.log.warn({ provider: p.provider, error: p.error }, `execution provider ${p.provider} does not work here; falling back`);
    }
    if (!first) {
      throw new DiffmeshError(
        Code.FAILED_PRECONDITION,
        'MODEL_LOAD_FAILED',
        `no execution provider works here: ${probes.map((p) => `${p.provider}: ${p.error ?? 'unknown'}${missingOf(p.provider)}`).join('; ')}`,
        { metadata: { field: 'execution_providers' } },
      );
    }
    this.log.info({ provider: first.provider, ...(first.f16 === false ? { f16: false } : {}) }, `execution provider ${first.provider}`);
    return first.provider as ExecutionProvider;
  }

  private probeOf(provider: ExecutionProvider): Promise<ProviderProbe> {
    let p = this.probes.get(provider);
    if (!p && !this.installed.includes(provider)) {
      p = Promise.resolve({ provider, works: false, error: notInstalled(provider) });
      this.probes.set(provider, p);
    }
    if (!p) {
      const host = this.hostsFor(provider)[0];
      p = probeProvider(host, this.choice(provider), this.sessionOptions()).finally(() => {
        // GPU probes ran on the device thread the sessions will use; the CPU probe's own
        // thread has no further work.
        if (this.lanes.get('probe:cpu')?.includes(host)) {
          this.lanes.delete('probe:cpu');
          void host.close();
        }
      });
      this.probes.set(provider, p);
    }
    return p;
  }

  private choice(name: ExecutionProvider): ProviderChoice {
    const options = this.opts.providerOptions?.[name];
    return options ? { name, options } : { name };
  }

  private sessionOptions(): WireSessionOptions {
    const options: WireSessionOptions = { graphOptimizationLevel: 'all', ...this.opts.sessionOptions };
    if (this.opts.intraOpThreads > 0) options.intraOpNumThreads = this.opts.intraOpThreads;
    if (this.opts.interOpThreads > 0) options.interOpNumThreads = this.opts.interOpThreads;
    return options;
  }

  /**
   * The hosts a session of `file` on `provider` lives in: GPU sessions share the process's
   * device threads, CPU sessions get threads of their own per file. Without `file`, the host a
   * probe runs in (one is enough).
   */
  private hostsFor(provider: ExecutionProvider, file?: string): SessionHost[] {
    const gpu = GPU_PROVIDERS.includes(provider);
    const key = gpu ? `gpu:${provider}` : file === undefined ? 'probe:cpu' : `cpu:${file}`;
    let lane = this.lanes.get(key)?.filter((h) => h.usable);
    const want = Math.max(1, this.threads);
    if (!lane || lane.length < want) {
      const name = gpu ? provider : (file ?? 'probe').split('/').slice(-2).join('/');
      lane = [...(lane ?? [])];
      while (lane.length < want) lane.push(this.threads === 0 ? new InlineHost(name) : new OnnxRunner(`${name}#${lane.length + 1}`));
      this.lanes.set(key, lane);
    }
    return file === undefined ? lane.slice(0, 1) : lane;
  }

  private rewritesAsked(): boolean {
    const r = this.opts.graphRewrites;
    return r !== undefined && (r.kernels === 'fused' || r.weights === 'int4');
  }

  /** The model a session on `provider` loads: the file, or its graph rewritten for the provider. */
  private async sourceFor(
    file: string,
    base: string | Uint8Array,
    provider: ExecutionProvider,
    rewrite: boolean,
  ): Promise<RewrittenModel | undefined> {
    const passes = rewrite ? graphPassesFor(this.opts.graphRewrites ?? {}, provider) : [];
    if (passes.length === 0) return undefined;
    const r = await rewriteModelFile(base, passes);
    for (const rep of r.reports) {
      if (rep.refused.length > 0)
        this.log.warn({ file, pass: rep.pass, refused: rep.refused.slice(0, 20) }, `graph pass ${rep.pass} left nodes as they were`);
    }
    this.log.info(
      {
        file,
        provider,
        passes: r.reports.map((x) => `${x.pass}:${x.rewritten}`),
        weightBytes: r.weightBytesAfter,
        fileWeightBytes: r.weightBytesBefore,
      },
      'graph rewritten for its session',
    );
    return r;
  }

  private async create(file: string, rewrite = false, variant?: SessionVariant): Promise<PooledSession> {
    // A variant's graph (as bytes, or a path) is what the rewrites, if any, start from.
    const base = variant ? await variant.source(file) : file;
    const skipped: SkippedProvider[] = [];
    const options = this.sessionOptions();
    for (const provider of this.providers) {
      if (!this.installed.includes(provider)) {
        skipped.push({ provider, error: notInstalled(provider) });
        continue;
      }
      const hosts = this.hostsFor(provider, file);
      let first: LoadResult;
      let rewritten: RewrittenModel | undefined;
      let source: string | Uint8Array = base;
      try {
        rewritten = await this.sourceFor(file, base, provider, rewrite);
        source = rewritten?.source ?? base;
        first = await hosts[0].loadSession(source, this.choice(provider), options);
      } catch (err) {
        await rewritten?.dispose();
        skipped.push({ provider, error: firstLine((err as Error)?.message ?? String(err)) });
        continue;
      }
      // A float16 graph on an adapter without shader-f16 fails at its first run: not here.
      if (provider === 'webgpu' && hasFloat16(first) && (await this.probeOf('webgpu')).f16 === false) {
        await hosts[0].release(first.session).catch(() => undefined);
        await rewritten?.dispose();
        skipped.push({ provider, error: 'the graph takes or gives float16 and the WebGPU adapter has no shader-f16' });
        continue;
      }
      try {
        const rest = await Promise.all(hosts.slice(1).map((h) => h.loadSession(source, this.choice(provider), options)));
        const copies = [{ host: hosts[0], result: first }, ...hosts.slice(1).map((host, i) => ({ host, result: rest[i] }))];
        const rewrites = rewritten
          ? { reports: rewritten.reports, weightBytesBefore: rewritten.weightBytesBefore, weightBytesAfter: rewritten.weightBytesAfter }
          : undefined;
        const session = new PooledSession(file, provider, copies, rewrites);
        for (const s of skipped)
          this.log.warn({ file, provider: s.provider, error: s.error }, `execution provider ${s.provider} could not load the model`);
        this.log.info(
          { file, provider, runnerThreads: this.threads, ...(skipped.length ? { skipped: skipped.map((s) => s.provider) } : {}) },
          `model session on ${provider}`,
        );
        return session;
      } catch (err) {
        await hosts[0].release(first.session).catch(() => undefined);
        skipped.push({ provider, error: firstLine((err as Error)?.message ?? String(err)) });
      } finally {
        // onnxruntime has read the temporary copy (if one was written) once the sessions exist.
        await rewritten?.dispose();
      }
    }
    const gpu = this.providers.some((p) => p !== 'cpu');
    const why =
      skipped.length === 1
        ? `${skipped[0].error}${missingOf(skipped[0].provider)}`
        : skipped.map((s) => `${s.provider}: ${s.error}${missingOf(s.provider)}`).join('; ');
    // UNAVAILABLE: this instance cannot run the model (a corrupt copy, missing GPU libraries);
    // the task is retried elsewhere and the instance's breaker counts it.
    throw new DiffmeshError(
      Code.UNAVAILABLE,
      'MODEL_LOAD_FAILED',
      `${file}: onnxruntime could not load the model${gpu ? ` with execution providers ${this.providers.join(', ')}` : ''}: ${why}`,
      { metadata: { file } },
    );
  }

  /**
   * Stops every runner thread (runs still waiting fail with UNAVAILABLE; one in progress is
   * abandoned, not waited for) and frees the sessions with them.
   */
  async close(): Promise<void> {
    this.sessions.clear();
    this.probes.clear();
    const hosts = [...this.lanes.values()].flat();
    this.lanes.clear();
    await Promise.all(hosts.map((h) => h.close()));
  }
}

/**
 * Every provider onnxruntime-node knows here ({@link providerStatuses}), and for each installed
 * one the probe of a session of its own (whether it works, and runs float16).
 */
export async function probeInstalledProviders(): Promise<Array<ProviderStatus & { probe?: ProviderProbe }>> {
  const out: Array<ProviderStatus & { probe?: ProviderProbe }> = [];
  for (const s of providerStatuses()) {
    if (!s.installed) {
      out.push(s);
      continue;
    }
    const sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1, executionProviders: [s.provider] });
    const [probe] = await sessions.probe().finally(() => sessions.close());
    out.push({ ...s, probe });
  }
  return out;
}

/** A session loaded in one or more hosts; each run goes to the least busy. */
class PooledSession implements ModelSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly WireValueMetadata[];
  readonly outputMetadata: readonly WireValueMetadata[];

  constructor(
    readonly file: string,
    readonly provider: ExecutionProvider,
    private readonly copies: Array<{ host: SessionHost; result: LoadResult }>,
    readonly rewrites?: SessionRewrites,
  ) {
    const first = copies[0].result;
    this.inputMetadata = first.inputMetadata;
    this.outputMetadata = first.outputMetadata;
    this.inputNames = first.inputMetadata.map((m) => m.name);
    this.outputNames = first.outputMetadata.map((m) => m.name);
  }

  get usable(): boolean {
    return this.copies.every((c) => c.host.usable);
  }

  async run(feeds: Record<string, ort.Tensor>, opts: ModelRunOptions = {}): Promise<ModelOutputs> {
    let best = this.copies[0];
    for (const c of this.copies) if (c.host.pendingRuns < best.host.pendingRuns) best = c;
    const wire: Record<string, WireTensor> = {};
    const transfer: ArrayBuffer[] = [];
    for (const [name, t] of Object.entries(feeds)) {
      const data = t.data as ArrayBufferView;
      wire[name] = { type: t.type, dims: [...t.dims], data };
      if (opts.transfer && data.buffer instanceof ArrayBuffer && !transfer.includes(data.buffer)) transfer.push(data.buffer);
    }
    let out: Record<string, WireTensor>;
    try {
      out = await best.host.run(best.result.session, wire, { ...(opts.signal ? { signal: opts.signal } : {}), transfer });
    } catch (err) {
      if (opts.signal?.aborted && err === opts.signal.reason) throw err;
      throw runError(this, err);
    }
    const result: ModelOutputs = {};
    for (const [name, t] of Object.entries(out)) result[name] = new ort.Tensor(t.type as 'float32', t.data as Float32Array, t.dims);
    return result;
  }
}

/** A failed run as the stage reports it: a float16 program on an adapter without f16 is the model's placement, not a bug. */
function runError(session: PooledSession, err: unknown): unknown {
  if (err instanceof DiffmeshError) return err;
  const message = (err as Error)?.message ?? String(err);
  if (isMissingF16(message)) {
    return new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'MODEL_LOAD_FAILED',
      `${session.file}: the model runs float16 operators and the ${session.provider} adapter has no shader-f16: run it on another provider (e.g. --execution-providers ${session.provider},cpu) or a GPU with f16`,
      { cause: err, metadata: { file: session.file } },
    );
  }
  return err;
}

function hasFloat16(r: LoadResult): boolean {
  return [...r.inputMetadata, ...r.outputMetadata].some((m) => m.type === 'float16');
}

/** Why a provider is not installed here: absent, or (CUDA/TensorRT) its files are of another onnxruntime release. */
function notInstalled(provider: ExecutionProvider): string {
  if (!(INSTALLABLE_PROVIDERS as readonly string[]).includes(provider)) return 'not installed here';
  const m = installedFiles(provider as InstallableProvider, onnxruntimeBinDir()).versionMismatch;
  return m ? `refused: its provider files are of onnxruntime ${m.files} and onnxruntime-node is ${m.core}` : 'not installed here';
}

/** For CUDA/TensorRT: the files and libraries this machine lacks, as a suffix of an error. */
function missingOf(provider: string): string {
  if (!(INSTALLABLE_PROVIDERS as readonly string[]).includes(provider)) return '';
  const s = providerStatuses().find((x) => x.provider === provider);
  if (!s) return '';
  const parts: string[] = [];
  if (s.versionMismatch) {
    parts.push(
      `its provider files are of onnxruntime ${s.versionMismatch.files} and onnxruntime-node is ${s.versionMismatch.core} (a provider runs only with the core of its exact release)`,
    );
  }
  if (s.missingFiles.length > 0)
    parts.push(`provider files not installed (\`npx diffmesh gpu install ${provider}\`): ${s.missingFiles.join(', ')}`);
  if (s.missingLibraries.length > 0) parts.push(`missing libraries: ${describeMissing(s.missingLibraries)}`);
  return parts.length > 0 ? ` [${parts.join('; ')}]` : '';
}

export { ort };
