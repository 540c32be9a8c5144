import { SchedulerClient, describeWait, eventFromWire, type WaitNotice } from '@diffmesh/client';
import type { InlineTensorStore } from '@diffmesh/tensor-client';
import {
  DEFAULT_STRENGTH,
  invalidParameter,
  paramsToWire,
  timestampToWire,
  randomSeed,
  type GenerationParams,
  type Logger,
  type ObjectRef,
  type RequestEvent,
  type TlsFiles,
} from '@diffmesh/core/client';
import type { RequestEvent__Output } from '@diffmesh/protos';
import { follow, planOutput, writeResult, type GenerateArgs, type GenerateOutcome } from './generate.js';
import type { Progress } from './progress.js';

/** How long a command waits for a scheduler it cannot reach (restarting) unless `DIFFMESH_SCHEDULER_WAIT_MS` says otherwise. */
export const DEFAULT_SCHEDULER_WAIT_MS = 30_000;

/** `DIFFMESH_SCHEDULER_WAIT_MS`: ms to wait for an unreachable scheduler (0 = fail at once). */
export function schedulerWaitMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.DIFFMESH_SCHEDULER_WAIT_MS;
  if (raw === undefined || raw.trim() === '') return DEFAULT_SCHEDULER_WAIT_MS;
  const ms = Number(raw);
  if (!Number.isSafeInteger(ms) || ms < 0)
    throw invalidParameter('DIFFMESH_SCHEDULER_WAIT_MS', `must be a whole number of ms ≥ 0, got "${raw}"`);
  return ms;
}

/**
 * What a command prints while it waits for a scheduler: the first wait, then one line each
 * `everyMs` of waiting, so a restart of some seconds shows as one or two lines.
 */
export function waitNotices(write: (line: string) => void, everyMs = 10_000): (n: WaitNotice) => void {
  let shownAt = -Infinity;
  return (n) => {
    if (n.attempt > 1 && n.waitedMs - shownAt < everyMs) return;
    shownAt = n.waitedMs;
    write(`diffmesh: ${describeWait(n)}\n`);
  };
}

/**
 * A scheduler client over the given addresses (any of them may serve any call), on mutual TLS
 * with `tls`. With `DIFFMESH_API_KEY` set, every call carries it: a mesh with tenants scopes
 * the CLI's requests to that key's tenant. While no scheduler answers (one restarting), calls
 * wait for it for `DIFFMESH_SCHEDULER_WAIT_MS` (default 30 s), saying so on stderr.
 */
export function connectScheduler(
  addresses: readonly string[],
  log: Logger,
  tls?: TlsFiles,
  env: NodeJS.ProcessEnv = process.env,
  stderr: (line: string) => void = (line) => process.stderr.write(line),
): SchedulerClient {
  const client = new SchedulerClient({
    addresses,
    log,
    ...(tls ? { tls } : {}),
    waitForRestartMs: schedulerWaitMs(env),
    onWait: waitNotices(stderr),
  });
  return env.DIFFMESH_API_KEY ? client.withApiKey(env.DIFFMESH_API_KEY) : client;
}

/** The domain events of a wire event stream. */
export async function* domainEvents(events: AsyncIterable<RequestEvent__Output>): AsyncGenerator<RequestEvent> {
  for await (const wire of events) {
    const e = eventFromWire(wire);
    if (e) yield e;
  }
}

/** Shows a request's events until it ends; returns its outputs or throws its error. */
export function followEvents(
  events: AsyncIterable<RequestEvent__Output>,
  progress: Progress,
  previewDir?: string,
): Promise<Record<string, ObjectRef>> {
  return follow(domainEvents(events), progress, previewDir);
}

/**
 * A store that reads results from whichever tensor-svc owns them (never via shared memory),
 * or from their durable copy in redis/S3 (reached with `REDIS_URL` and `AWS_*`) when the
 * owner cannot serve them. The tensor clients (redis, S3) load only once there is a result to read.
 */
export async function resultStore(
  log: Logger,
  env: Record<string, string | undefined> = process.env,
  tls?: TlsFiles,
): Promise<InlineTensorStore> {
  const { DurableStores, InlineTensorStore, RemoteTensorStore, RoutedTensorStore, durableSettingsFromEnv } =
    await import('@diffmesh/tensor-client');
  return new InlineTensorStore(
    new RoutedTensorStore({
      remote: new RemoteTensorStore({ address: '', nodeId: `client-${process.pid}`, log, sameNodeReads: false, ...(tls ? { tls } : {}) }),
      durable: new DurableStores({ ...durableSettingsFromEnv(env), logger: log }),
      log,
    }),
  );
}

/**
 * Runs one generation through a running mesh: Generate on one of the schedulers with live
 * progress (re-attaching to another one by request id if its scheduler goes away), then the
 * pixels streamed from the tensor-svc that owns them. Ctrl-C cancels the request. With `tls`
 * every call (scheduler and tensor-svc) is on mutual TLS.
 */
export async function generateRemote(
  addresses: readonly string[],
  args: GenerateArgs,
  progress: Progress,
  signal: AbortSignal,
  log: Logger,
  tls?: TlsFiles,
): Promise<GenerateOutcome> {
  const started = Date.now();
  const client = connectScheduler(addresses, log, tls);
  try {
    // With --log-level debug: how long after the process started the first call leaves (and the CPU time spent until then).
    const cpu = process.cpuUsage();
    log.debug(
      { sinceStartMs: Math.round(performance.now()), cpuMs: Math.round((cpu.user + cpu.system) / 1000) },
      'first call to the scheduler',
    );
    const models = await client.listModels({ signal });
    const model = models.models.find((m) => m.name === args.model && !m.pattern);
    const d = model?.defaults;
    // The client picks the seed, and learns the defaults, so it can report what ran.
    const params: GenerationParams = {
      prompt: args.prompt,
      negativePrompt: args.params.negativePrompt ?? '',
      width: args.params.width ?? d?.width ?? 0,
      height: args.params.height ?? d?.height ?? 0,
      numFrames: args.params.numFrames ?? d?.numFrames ?? 1,
      numInferenceSteps: args.params.numInferenceSteps ?? d?.numInferenceSteps ?? 0,
      guidanceScale: args.params.guidanceScale ?? d?.guidanceScale ?? 0,
      seed: args.params.seed ?? randomSeed(),
      fps: args.params.fps ?? d?.fps ?? 8,
      // Set only with an image, as the scheduler does; a model that takes one lists its default.
      ...(args.image ? { strength: args.params.strength ?? d?.strength ?? DEFAULT_STRENGTH } : {}),
    };
    const out = await planOutput(args.output, params.numFrames, args.ffmpegPath);
    const events = client.generate(
      {
        model: args.model,
        params: paramsToWire({ ...args.params, prompt: args.prompt, seed: params.seed }, args.image),
        priority: args.priority,
        ...(args.deadline ? { deadline: timestampToWire(args.deadline) } : {}),
      },
      { signal },
    );
    const pixels = (await followEvents(events, progress, args.previewDir)).pixels;
    const store = await resultStore(log, process.env, tls);
    try {
      const file = await writeResult(store, pixels, out, params.fps, args.ffmpegPath, signal);
      return { ...file, params, ms: Date.now() - started };
    } finally {
      await store.delete(pixels).catch(() => undefined);
      await store.close();
    }
  } finally {
    await client.close();
  }
}
