import * as grpc from '@grpc/grpc-js';
import {
  loadDiffmeshProtos,
  type GenerateRequest,
  type GenerateResponse__Output,
  type ListModelsResponse__Output,
} from '@diffmesh/protos';
import {
  InlineTensorStore,
  RemoteTensorStore,
  channelOptions,
  clientCredentials,
  fromWire,
  paramsToWire,
  randomSeed,
  type GenerationParams,
  type Logger,
  type ObjectRef,
  type TlsFiles,
} from '@diffmesh/runtime';
import { eventFromWire, type RequestEvent } from '@diffmesh/scheduler';
import { follow, planOutput, writeResult, type GenerateArgs, type GenerateOutcome } from './generate.js';
import type { Progress } from './progress.js';

/** The typed SchedulerService client. */
export interface SchedulerClient extends grpc.Client {
  Generate(req: GenerateRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<GenerateResponse__Output>;
  ListModels(
    req: object,
    options: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, res?: ListModelsResponse__Output) => void,
  ): grpc.ClientUnaryCall;
  [method: string]: unknown;
}

/** A SchedulerService client; `tls` for a mesh that serves TLS (plaintext otherwise). */
export function schedulerClient(address: string, tls?: TlsFiles): SchedulerClient {
  const Ctor = loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService as unknown as new (
    address: string,
    creds: grpc.ChannelCredentials,
    options: grpc.ChannelOptions,
  ) => SchedulerClient;
  return new Ctor(address, clientCredentials(tls), channelOptions());
}

export function listModels(client: SchedulerClient, timeoutMs = 10_000): Promise<ListModelsResponse__Output> {
  return new Promise((resolve, reject) => {
    client.ListModels({}, { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(fromWire(err)) : resolve(res!)));
  });
}

/** The request events of a Generate or Watch stream, in order; a failed call throws its DiffmeshError. */
async function* streamEvents(call: grpc.ClientReadableStream<Pick<GenerateResponse__Output, 'events'>>): AsyncGenerator<RequestEvent> {
  try {
    for await (const msg of call as AsyncIterable<Pick<GenerateResponse__Output, 'events'>>) {
      for (const wire of msg.events) {
        const e = eventFromWire(wire);
        if (e) yield e;
      }
    }
  } catch (err) {
    throw fromWire(err);
  }
}

/**
 * Shows the events of a Generate or Watch call until the request ends; returns its outputs or
 * throws its error. Aborting `signal` cancels the call.
 */
export async function followCall(
  call: grpc.ClientReadableStream<Pick<GenerateResponse__Output, 'events'>>,
  progress: Progress,
  signal: AbortSignal,
): Promise<Record<string, ObjectRef>> {
  const onAbort = (): void => call.cancel();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await follow(streamEvents(call), progress);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Runs one generation through a running mesh: Generate on the scheduler at `address` with
 * live progress, then the pixels streamed from the tensor-svc that owns them. Ctrl-C
 * cancels the call, which cancels the request in the mesh.
 */
export async function generateRemote(
  address: string,
  args: GenerateArgs,
  progress: Progress,
  signal: AbortSignal,
  log: Logger,
): Promise<GenerateOutcome> {
  const started = Date.now();
  const client = schedulerClient(address);
  const store = new InlineTensorStore(new RemoteTensorStore({ address: '', nodeId: `client-${process.pid}`, log, sameNodeReads: false }));
  try {
    const models = await listModels(client);
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
    };
    const out = await planOutput(args.output, params.numFrames, args.ffmpegPath);
    const call = client.Generate({
      model: args.model,
      params: paramsToWire({ ...args.params, prompt: args.prompt, seed: params.seed }),
      priority: args.priority,
    });
    const pixels = (await followCall(call, progress, signal)).pixels;
    try {
      const file = await writeResult(store, pixels, out, params.fps, args.ffmpegPath, signal);
      return { ...file, params, ms: Date.now() - started };
    } finally {
      await store.delete(pixels).catch(() => undefined);
    }
  } finally {
    client.close();
    await store.close();
  }
}
