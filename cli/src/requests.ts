import type { CancelResponse__Output, SubmitResponse__Output } from '@diffmesh/protos';
import {
  invalidParameter,
  paramsToWire,
  timestampToWire,
  type GenerationParams,
  type InputImageSource,
  type Logger,
  type TlsFiles,
} from '@diffmesh/core/client';
import type { SchedulerClient } from '@diffmesh/client';
import { checkOutputFolder, planOutput, writeResult, type GenerateOutcome } from './generate.js';
import type { Progress } from './progress.js';
import { connectScheduler, followEvents, resultStore } from './remote.js';

/**
 * The subcommands that act on requests in a running mesh by id: `submit` starts one without
 * waiting, `watch` follows one (and writes its result), `cancel` stops one. Any scheduler of
 * the mesh answers for any request; a call moves on to the next address when one is gone.
 */

/** What `diffmesh submit` sends. */
export interface SubmitArgs {
  model: string;
  prompt: string;
  params: Partial<GenerationParams>;
  priority: number;
  /** 0 = the scheduler's default. */
  timeoutMs: number;
  /** When it must be done by (ms since the epoch); absent = none. */
  deadline?: number;
  /** '' = a fresh one (so that a retry on another scheduler cannot start it twice). */
  requestId: string;
  /** The input image (`--image`), for a model that takes one. */
  image?: InputImageSource;
}

const UNARY_TIMEOUT_MS = 10_000;

async function withClient<T>(
  addresses: readonly string[],
  log: Logger,
  tls: TlsFiles | undefined,
  fn: (client: SchedulerClient) => Promise<T>,
): Promise<T> {
  const client = connectScheduler(addresses, log, tls);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/** Starts a request and returns at once with its id (Submit). */
export function submitRemote(addresses: readonly string[], args: SubmitArgs, log: Logger, tls?: TlsFiles): Promise<SubmitResponse__Output> {
  return withClient(addresses, log, tls, (client) =>
    client.submit(
      {
        model: args.model,
        params: paramsToWire({ ...args.params, prompt: args.prompt }, args.image),
        priority: args.priority,
        timeoutMs: args.timeoutMs,
        ...(args.deadline ? { deadline: timestampToWire(args.deadline) } : {}),
        requestId: args.requestId,
      },
      { timeoutMs: UNARY_TIMEOUT_MS },
    ),
  );
}

/** Cancels a request; returns its status afterwards (`REQUEST_STATUS_CANCELLED`, or how it had already ended). */
export function cancelRemote(
  addresses: readonly string[],
  reqId: string,
  reason: string,
  log: Logger,
  tls?: TlsFiles,
): Promise<CancelResponse__Output> {
  return withClient(addresses, log, tls, (client) => client.cancel(reqId, reason, { timeoutMs: UNARY_TIMEOUT_MS }));
}

/** What `diffmesh watch` was asked for. */
export interface WatchArgs {
  reqId: string;
  /** Write the result here once the request completes; undefined = only follow it. */
  output: string | undefined;
  /** Frames per second of a video file; undefined = the model's default. */
  fps: number | undefined;
  ffmpegPath: string;
}

/** What `diffmesh watch` saw: the request's outputs and, with an output file, what was written. */
export interface WatchOutcome {
  reqId: string;
  file?: Omit<GenerateOutcome, 'params' | 'ms'>;
  ms: number;
}

/**
 * Follows a request from its first event (Watch replays what already happened) until it
 * ends, showing progress; with an output file, reads the pixels from the tensor-svc that owns
 * them and writes the file. Throws the request's error when it failed or was cancelled.
 * Aborting `signal` stops watching; the request goes on.
 */
export async function watchRemote(
  addresses: readonly string[],
  args: WatchArgs,
  progress: Progress,
  signal: AbortSignal,
  log: Logger,
  tls?: TlsFiles,
): Promise<WatchOutcome> {
  const started = Date.now();
  // Only the folder can be checked now: the file's format depends on the result's frames.
  if (args.output !== undefined) await checkOutputFolder(args.output);
  return withClient(addresses, log, tls, async (client) => {
    // An unknown id fails here, before anything is shown.
    const { model } = await client.get(args.reqId, { timeoutMs: UNARY_TIMEOUT_MS, signal });
    const outputs = await followEvents(client.watch(args.reqId, { signal }), progress);
    if (args.output === undefined) return { reqId: args.reqId, ms: Date.now() - started };
    const pixels = outputs.pixels;
    const out = await planOutput(args.output, pixels.shape[0] ?? 1, args.ffmpegPath);
    const fps = args.fps ?? (await defaultFps(client, model));
    const store = await resultStore(log, process.env, tls);
    try {
      const file = await writeResult(store, pixels, out, fps, args.ffmpegPath, signal);
      return { reqId: args.reqId, file, ms: Date.now() - started };
    } finally {
      await store.close();
    }
  });
}

/** The fps a model uses by default (8 when the scheduler does not say). */
async function defaultFps(client: SchedulerClient, model: string): Promise<number> {
  const models = await client.listModels({ timeoutMs: UNARY_TIMEOUT_MS }).catch(() => undefined);
  return models?.models.find((m) => m.name === model && !m.pattern)?.defaults?.fps || 8;
}

/** Parses a request id given on the command line. */
export function parseReqId(raw: string): string {
  const id = raw.trim();
  if (id === '') throw invalidParameter('req_id', 'is required');
  return id;
}
