import * as grpc from '@grpc/grpc-js';
import type {
  CancelResponse__Output,
  GenerateResponse__Output,
  SchedulerGetResponse__Output,
  SubmitResponse__Output,
} from '@diffmesh/protos';
import { defaultModelsRoot } from '@diffmesh/models';
export { rejection } from '@diffmesh/testing';
import { startEmbedded, startLocalMesh, type LocalMesh, type LocalMeshOptions } from '@diffmesh/cli';
import { schedulerStub, type SchedulerStub, eventFromWire } from '@diffmesh/client';
import {
  fromWire,
  loadTlsFiles,
  paramsToWire,
  silentLogger,
  timestampToWire,
  type GenerationParams,
  type RequestEvent,
} from '@diffmesh/core';
import { InlineTensorStore, RemoteTensorStore, type TensorStore } from '@diffmesh/tensor-client';
import type { ExecutionProvider, GraphRewriteOptions } from '@diffmesh/stage-host';

/** A mesh started for a test, with a scheduler client and a tensor reader. */
export interface TestMesh {
  mesh: LocalMesh;
  client: SchedulerStub;
  store: TensorStore;
  stop(): Promise<void>;
}

/** Starts nats-server and every service as separate processes on loopback. */
export async function startTestMesh(opts: Partial<LocalMeshOptions> = {}): Promise<TestMesh> {
  const mesh = await startLocalMesh({
    modelsDirs: [defaultModelsRoot()],
    models: ['diffmesh/tiny-shapes'],
    threads: 1,
    log: silentLogger(),
    ...opts,
  });
  const tls = opts.tls ? loadTlsFiles({ ...opts.tls, requireClientCert: false }) : undefined;
  const client = schedulerStub(mesh.schedulerAddress, tls);
  const store = new InlineTensorStore(
    new RemoteTensorStore({
      address: mesh.tensorAddress,
      nodeId: 'test-client',
      log: silentLogger(),
      sameNodeReads: false,
      ...(tls ? { tls } : {}),
    }),
  );
  return {
    mesh,
    client,
    store,
    async stop() {
      client.close();
      await store.close();
      await mesh.stop();
    },
  };
}

export interface RequestSpec {
  model?: string;
  params: Partial<GenerationParams> & { prompt: string };
  priority?: number;
  timeoutMs?: number;
  /** When it must be done by (ms since the epoch). */
  deadline?: number;
  requestId?: string;
  /** gRPC metadata sent with the call, e.g. a W3C `traceparent`. */
  metadata?: Record<string, string>;
}

function callMetadata(spec: RequestSpec): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(spec.metadata ?? {})) md.set(k, v);
  return md;
}

function wireRequest(spec: RequestSpec) {
  return {
    model: spec.model ?? 'diffmesh/tiny-shapes',
    params: paramsToWire(spec.params),
    priority: spec.priority ?? 0,
    timeoutMs: spec.timeoutMs ?? 0,
    ...(spec.deadline ? { deadline: timestampToWire(spec.deadline) } : {}),
    requestId: spec.requestId ?? '',
  };
}

type Unary<Res> = (req: unknown, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown;

function call<Res>(client: SchedulerStub, method: string, req: unknown, timeoutMs = 30_000): Promise<Res> {
  const fn = client[method] as Unary<Res>;
  return new Promise((resolve, reject) => {
    fn.call(client, req, { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(fromWire(err)) : resolve(res as Res)));
  });
}

export const submit = (c: SchedulerStub, spec: RequestSpec, timeoutMs?: number) =>
  call<SubmitResponse__Output>(c, 'Submit', wireRequest(spec), timeoutMs);
export const get = (c: SchedulerStub, reqId: string) => call<SchedulerGetResponse__Output>(c, 'Get', { reqId });
export const cancel = (c: SchedulerStub, reqId: string) => call<CancelResponse__Output>(c, 'Cancel', { reqId });

/** Runs Generate to the end; `onEvent` may act on each event (e.g. cancel). Rejects with the call's error. */
export async function generate(
  c: SchedulerStub,
  spec: RequestSpec,
  onEvent?: (e: RequestEvent, call: grpc.ClientReadableStream<GenerateResponse__Output>) => void,
): Promise<RequestEvent[]> {
  // The generated client takes metadata before the options (the typed interface omits it).
  const start = c.Generate as unknown as (req: unknown, md: grpc.Metadata) => grpc.ClientReadableStream<GenerateResponse__Output>;
  const stream = start.call(c, wireRequest(spec), callMetadata(spec));
  const events: RequestEvent[] = [];
  try {
    for await (const msg of stream as AsyncIterable<GenerateResponse__Output>) {
      for (const wire of msg.events) {
        const e = eventFromWire(wire);
        if (!e) continue;
        events.push(e);
        onEvent?.(e, stream);
      }
    }
  } catch (err) {
    throw fromWire(err);
  }
  return events;
}

/** Follows an existing request with Watch until it ends. */
export async function watch(c: SchedulerStub, reqId: string): Promise<RequestEvent[]> {
  const stream = (c.Watch as (req: { reqId: string }) => grpc.ClientReadableStream<GenerateResponse__Output>).call(c, { reqId });
  const events: RequestEvent[] = [];
  try {
    for await (const msg of stream as AsyncIterable<GenerateResponse__Output>) {
      for (const wire of msg.events) {
        const e = eventFromWire(wire);
        if (e) events.push(e);
      }
    }
  } catch (err) {
    throw fromWire(err);
  }
  return events;
}

/** What {@link embeddedPixels} runs: a model (default tiny-shapes), its directories, the providers (default the CPU). */
export interface EmbeddedRun {
  model?: string;
  modelDirectories?: string[];
  executionProviders?: ExecutionProvider[];
  /** How the denoiser's graph is rewritten at load (`--kernels`, `--weights`). */
  graphRewrites?: GraphRewriteOptions;
}

/**
 * The pixels the embedded runtime (every stage in this one process) makes for each of
 * `params`, the reference a mesh must match byte for byte for the same seed.
 */
export async function embeddedPixels(
  params: Array<Partial<GenerationParams> & { prompt: string }>,
  run: EmbeddedRun = {},
): Promise<Buffer[]> {
  const embedded = await startEmbedded({
    modelRoots: [defaultModelsRoot()],
    intraOpThreads: 1,
    maxBatch: 8,
    log: silentLogger(),
    ...(run.modelDirectories ? { modelDirectories: run.modelDirectories } : {}),
    ...(run.executionProviders ? { executionProviders: run.executionProviders } : {}),
    ...(run.graphRewrites ? { graphRewrites: run.graphRewrites } : {}),
  });
  const model = run.model ?? 'diffmesh/tiny-shapes';
  try {
    const out: Buffer[] = [];
    for (const p of params) {
      const { context } = await embedded.scheduler.submit({ model, params: p });
      const events: RequestEvent[] = [];
      for await (const e of embedded.scheduler.watch(context.reqId)) events.push(e);
      const end = last(events);
      if (end.type !== 'completed') throw new Error(`embedded ${model} request ended with ${JSON.stringify(end)}`);
      out.push(Buffer.from((await embedded.store.get(end.outputs.pixels)).data));
    }
    return out;
  } finally {
    await embedded.close();
  }
}

export function last(events: RequestEvent[]): RequestEvent {
  const e = events.at(-1);
  if (!e) throw new Error('no events');
  return e;
}

/** Polls `fn` until it returns a value (bounded); for state only visible by asking. */
export async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * `diffmesh_tensor_calls_total{method="Get"}` and the Get bytes sent, from one tensor-svc's
 * /metrics at `host:port` (9464: where the image and the multinode test serve it).
 */
export async function tensorGets(host: string, port = 9464): Promise<{ gets: number; getBytes: number }> {
  const page = await (await fetch(`http://${host}:${port}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const sample = (re: RegExp): number => Number(re.exec(page)?.[1] ?? NaN);
  return {
    gets: sample(/^diffmesh_tensor_calls_total\{[^}]*method="Get"[^}]*\} (\d+)$/m),
    getBytes: sample(/^diffmesh_tensor_get_sent_bytes_total(?:\{[^}]*\})? (\d+)$/m),
  };
}
