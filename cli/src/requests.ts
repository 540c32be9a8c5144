import type * as grpc from '@grpc/grpc-js';
import type { CancelResponse__Output, SchedulerGetResponse__Output, SubmitResponse__Output, WatchResponse__Output } from '@diffmesh/protos';
import {
  InlineTensorStore,
  RemoteTensorStore,
  fromWire,
  invalidParameter,
  paramsToWire,
  type GenerationParams,
  type Logger,
} from '@diffmesh/runtime';
import { checkOutputFolder, planOutput, writeResult, type GenerateOutcome } from './generate.js';
import type { Progress } from './progress.js';
import { followCall, listModels, schedulerClient, type SchedulerClient } from './remote.js';

/**
 * The subcommands that act on requests in a running mesh by id: `submit` starts one without
 * waiting, `watch` follows one (and writes its result), `cancel` stops one. Each opens its
 * own SchedulerService client on the scheduler's gRPC address.
 */

/** What `diffmesh submit` sends. */
export interface SubmitArgs {
  model: string;
  prompt: string;
  params: Partial<GenerationParams>;
  priority: number;
  /** 0 = the scheduler's default. */
  timeoutMs: number;
  /** '' = the scheduler picks one. */
  requestId: string;
}

type RequestClient = SchedulerClient & {
  Submit(req: object, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: SubmitResponse__Output) => void): grpc.ClientUnaryCall;
  Cancel(req: object, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: CancelResponse__Output) => void): grpc.ClientUnaryCall;
  Watch(req: object, options?: grpc.CallOptions): grpc.ClientReadableStream<WatchResponse__Output>;
  Get(req: object, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: SchedulerGetResponse__Output) => void): grpc.ClientUnaryCall;
};

const UNARY_TIMEOUT_MS = 10_000;

function unary<R>(start: (options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: R) => void) => grpc.ClientUnaryCall): Promise<R> {
  return new Promise((resolve, reject) => {
    start({ deadline: Date.now() + UNARY_TIMEOUT_MS }, (err, res) => (err ? reject(fromWire(err)) : resolve(res as R)));
  });
}

async function withClient<T>(address: string, fn: (client: RequestClient) => Promise<T>): Promise<T> {
  const client = schedulerClient(address) as RequestClient;
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

/** Starts a request and returns at once with its id (Submit). */
export function submitRemote(address: string, args: SubmitArgs): Promise<SubmitResponse__Output> {
  return withClient(address, (client) =>
    unary<SubmitResponse__Output>((o, cb) =>
      client.Submit(
        {
          model: args.model,
          params: paramsToWire({ ...args.params, prompt: args.prompt }),
          priority: args.priority,
          timeoutMs: args.timeoutMs,
          requestId: args.requestId,
        },
        o,
        cb,
      ),
    ),
  );
}

/** Cancels a request; returns its status afterwards (`REQUEST_STATUS_CANCELLED`, or how it had already ended). */
export function cancelRemote(address: string, reqId: string, reason: string): Promise<CancelResponse__Output> {
  return withClient(address, (client) => unary<CancelResponse__Output>((o, cb) => client.Cancel({ reqId, reason }, o, cb)));
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
export async function watchRemote(address: string, args: WatchArgs, progress: Progress, signal: AbortSignal, log: Logger): Promise<WatchOutcome> {
  const started = Date.now();
  // Only the folder can be checked now: the file's format depends on the result's frames.
  if (args.output !== undefined) await checkOutputFolder(args.output);
  return withClient(address, async (client) => {
    // An unknown id fails here, before anything is shown.
    const { model } = await unary<SchedulerGetResponse__Output>((o, cb) => client.Get({ reqId: args.reqId }, o, cb));
    // Cancelling the Watch call stops watching; the request goes on.
    const outputs = await followCall(client.Watch({ reqId: args.reqId }), progress, signal);
    if (args.output === undefined) return { reqId: args.reqId, ms: Date.now() - started };
    const pixels = outputs.pixels;
    const out = await planOutput(args.output, pixels.shape[0] ?? 1, args.ffmpegPath);
    const fps = args.fps ?? (await defaultFps(client, model));
    const store = new InlineTensorStore(new RemoteTensorStore({ address: '', nodeId: `client-${process.pid}`, log, sameNodeReads: false }));
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
  const models = await listModels(client).catch(() => undefined);
  return models?.models.find((m) => m.name === model && !m.pattern)?.defaults?.fps || 8;
}

/** Parses a request id given on the command line. */
export function parseReqId(raw: string): string {
  const id = raw.trim();
  if (id === '') throw invalidParameter('req_id', 'is required');
  return id;
}
