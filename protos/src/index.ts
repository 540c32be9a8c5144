/**
 * diffmesh's wire contracts: where the .proto files are, how to load them, and the
 * TypeScript types generated from them (src/generated, see README.md).
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

import type { ProtoGrpcType as ErrorDetailsProtoGrpcType } from './generated/error_details.js';
import type { ProtoGrpcType as SchedulerProtoGrpcType } from './generated/scheduler.js';
import type { ProtoGrpcType as StageProtoGrpcType } from './generated/stage.js';
import type { ProtoGrpcType as StatusProtoGrpcType } from './generated/status.js';
import type { ProtoGrpcType as TensorProtoGrpcType } from './generated/tensor.js';

/**
 * Absolute path of the proto root (`protos/proto`). Resolved from this module's URL, so it
 * holds from `src/` (tests) and from `dist/` (built code) alike.
 */
export const PROTO_ROOT: string = fileURLToPath(new URL('../proto/', import.meta.url));

/** Directories imports are resolved against: our files, then the vendored upstream ones. */
export const INCLUDE_DIRS: readonly string[] = [PROTO_ROOT, join(PROTO_ROOT, 'third_party')];

/**
 * Every .proto file the loader reads, relative to an include dir. google.rpc status and
 * error details are loaded too: runtime encodes them into gRPC error trailers.
 */
export const PROTO_FILES: readonly string[] = [
  'diffmesh/common/v1/error.proto',
  'diffmesh/common/v1/events.proto',
  'diffmesh/common/v1/object.proto',
  'diffmesh/common/v1/plan.proto',
  'diffmesh/common/v1/request.proto',
  'diffmesh/scheduler/v1/scheduler.proto',
  'diffmesh/stage/v1/stage.proto',
  'diffmesh/tensor/v1/tensor.proto',
  'google/rpc/status.proto',
  'google/rpc/error_details.proto',
];

/**
 * Absolute path of the compiled descriptor set (`protos/descriptors.binpb`): a binary
 * `google.protobuf.FileDescriptorSet` of every proto file of the package — diffmesh's,
 * google.api/google.rpc, grpc.health.v1, grpc.reflection.v1/v1alpha — with its imports
 * (google/protobuf/*) and source info, as buf compiles them. Servers serve it over gRPC
 * reflection; clients may read it instead (also exported as `@diffmesh/protos/descriptors.binpb`).
 */
export const DESCRIPTOR_SET_PATH: string = fileURLToPath(new URL('../descriptors.binpb', import.meta.url));

/**
 * Absolute path of the message root (`protos/descriptors.json`): every diffmesh proto file
 * ({@link PROTO_FILES}) as protobufjs parses it with camelCase fields, in protobufjs's JSON
 * form. Generated beside the descriptor set and checked against the .proto files; reading it
 * is several times faster than parsing the .proto files, which a client pays for at start-up.
 */
export const MESSAGE_ROOT_PATH: string = fileURLToPath(new URL('../descriptors.json', import.meta.url));

/** The bytes of the compiled descriptor set ({@link DESCRIPTOR_SET_PATH}). */
export function readDescriptorSet(): Buffer {
  return readFileSync(DESCRIPTOR_SET_PATH);
}

/** Fully qualified names of the services. */
export const SERVICE_NAMES = {
  scheduler: 'diffmesh.scheduler.v1.SchedulerService',
  stage: 'diffmesh.stage.v1.StageService',
  tensor: 'diffmesh.tensor.v1.TensorService',
} as const;

/**
 * How messages are converted to and from JS objects. The generated types assume exactly
 * these: camelCase fields, 64-bit integers as decimal strings, enums as their names,
 * default values filled in, and a virtual field naming the member set in each oneof.
 */
export const CONVERSION_OPTIONS = {
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
} as const;

/** Options for `@grpc/proto-loader` (the conversion options plus the include dirs). */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  ...CONVERSION_OPTIONS,
  includeDirs: [...INCLUDE_DIRS],
};

/** The typed object `grpc.loadPackageDefinition` returns for diffmesh's protos. */
export type ProtoGrpcType = SchedulerProtoGrpcType &
  StageProtoGrpcType &
  TensorProtoGrpcType &
  StatusProtoGrpcType &
  ErrorDetailsProtoGrpcType;

/**
 * `@grpc/proto-loader`, loaded on first use: only servers (and tools that need the package
 * definition or the .proto sources) pay for it; a client encodes with {@link messageCodec}.
 * Loading it also registers `google/protobuf/descriptor.proto` with protobufjs, which the
 * `google.api.http` annotations import.
 */
function protoLoaderModule(): typeof protoLoader {
  return createRequire(import.meta.url)('@grpc/proto-loader') as typeof protoLoader;
}

let packageDefinition: protoLoader.PackageDefinition | undefined;
let grpcObject: ProtoGrpcType | undefined;

/**
 * The proto-loader package definition of every diffmesh file (loaded once). Every method's
 * serializers also take a message already encoded (a Buffer, see {@link MessageCodec.encodeReady}),
 * which they send as it is: hot paths encode without the object conversion.
 */
export function loadDiffmeshPackageDefinition(): protoLoader.PackageDefinition {
  if (packageDefinition) return packageDefinition;
  const def = protoLoaderModule().loadSync([...PROTO_FILES], LOADER_OPTIONS);
  for (const entry of Object.values(def)) {
    if (!isServiceDefinition(entry)) continue;
    for (const method of Object.values(entry)) {
      method.requestSerialize = passEncoded(method.requestSerialize);
      method.responseSerialize = passEncoded(method.responseSerialize);
    }
  }
  packageDefinition = def;
  return def;
}

function isServiceDefinition(entry: unknown): entry is protoLoader.ServiceDefinition {
  if (!entry || typeof entry !== 'object' || 'format' in entry) return false;
  return Object.values(entry).every((m) => typeof (m as { path?: unknown }).path === 'string');
}

function passEncoded(serialize: (value: object) => Buffer): (value: object) => Buffer {
  return (value) => (Buffer.isBuffer(value) ? value : serialize(value));
}

/**
 * A message already encoded by {@link MessageCodec.encodeReady}, typed as the message a
 * call's `write` expects (the serializer passes the bytes through).
 */
export function preEncoded<T>(bytes: Buffer): T {
  return bytes as unknown as T;
}

/**
 * The typed gRPC object: service constructors (clients) and `.service` definitions for
 * `server.addService`, e.g. `loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService`.
 */
export function loadDiffmeshProtos(): ProtoGrpcType {
  grpcObject ??= grpc.loadPackageDefinition(loadDiffmeshPackageDefinition()) as unknown as ProtoGrpcType;
  return grpcObject;
}

let root: protobuf.Root | undefined;

/**
 * A protobufjs Root holding every diffmesh message type (loaded once, from
 * {@link MESSAGE_ROOT_PATH}: the same types {@link newDiffmeshRoot} parses, with camelCase fields).
 */
export function loadDiffmeshRoot(): protobuf.Root {
  if (root) return root;
  const r = protobuf.Root.fromJSON(JSON.parse(readFileSync(MESSAGE_ROOT_PATH, 'utf8')) as protobuf.INamespace);
  r.resolveAll();
  root = r;
  return r;
}

/**
 * A new protobufjs Root of every diffmesh proto file, parsed with `options` (e.g. original
 * field names and comments for documentation), imports resolved against the include dirs.
 */
export function newDiffmeshRoot(options: protobuf.IParseOptions): protobuf.Root {
  // google/protobuf/* are bundled with protobufjs (descriptor.proto is registered by
  // @grpc/proto-loader).
  protoLoaderModule();
  const r = new protobuf.Root();
  r.resolvePath = (origin: string, target: string): string => {
    if (isAbsolute(target)) return target;
    for (const dir of INCLUDE_DIRS) {
      const candidate = join(dir, target);
      if (existsSync(candidate)) return candidate;
    }
    return protobuf.util.path.resolve(origin, target);
  };
  r.loadSync([...PROTO_FILES], options);
  r.resolveAll();
  return r;
}

/** Encodes and decodes one message type exactly as gRPC calls do. */
export interface MessageCodec<TIn, TOut> {
  /** Fully qualified message name, e.g. `diffmesh.common.v1.ObjectRef`. */
  readonly fullName: string;
  /** `type.googleapis.com/<fullName>`, for google.protobuf.Any. */
  readonly typeUrl: string;
  encode(message: TIn): Uint8Array;
  /**
   * Encodes a message that is already in the encoder's form, without converting it: enums
   * as numbers, 64-bit integers as numbers or decimal strings, Timestamps with numeric
   * seconds, bytes as Buffers, nested messages as plain objects. The `…ToWire` converters of
   * the runtime build such messages. About half the cost of `encode`; nothing is checked,
   * so an enum given by name would be encoded as 0.
   */
  encodeReady(message: TIn): Buffer;
  decode(bytes: Uint8Array): TOut;
}

const codecs = new Map<string, MessageCodec<unknown, unknown>>();

/**
 * A codec for a message type, using the same conversions as the gRPC loader (so
 * `decode` returns the generated `__Output` shape). Throws when the type does not exist.
 */
export function messageCodec<TIn extends object, TOut = unknown>(fullName: string): MessageCodec<TIn, TOut> {
  const cached = codecs.get(fullName);
  if (cached) return cached as MessageCodec<TIn, TOut>;
  const type = loadDiffmeshRoot().lookupType(fullName);
  const codec: MessageCodec<TIn, TOut> = {
    fullName,
    typeUrl: `type.googleapis.com/${fullName}`,
    encode: (message) => type.encode(type.fromObject(message)).finish(),
    encodeReady: (message) => {
      const bytes = type.encode(message).finish();
      return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    decode: (bytes) => type.toObject(type.decode(bytes), CONVERSION_OPTIONS) as TOut,
  };
  codecs.set(fullName, codec);
  return codec;
}

/** The names of an enum's values in declaration order, e.g. of `diffmesh.common.v1.ErrorReason`. */
export function enumValueNames(fullName: string): string[] {
  return Object.keys(loadDiffmeshRoot().lookupEnum(fullName).values);
}

/** One HTTP binding of an RPC, read from its `google.api.http` annotation. */
export interface HttpBinding {
  /** Fully qualified service name, e.g. `diffmesh.scheduler.v1.SchedulerService`. */
  service: string;
  /** RPC name, e.g. `Submit`. */
  method: string;
  /** gRPC path, e.g. `/diffmesh.scheduler.v1.SchedulerService/Submit`. */
  grpcPath: string;
  /** HTTP method in upper case (`GET`, `POST`, …, or a custom kind). */
  httpMethod: string;
  /** Path template, e.g. `/api/v1/requests/{req_id}:cancel`. */
  pathTemplate: string;
  /** `*`, a request field name, or '' for no body. */
  body: string;
  /** A response field name, or '' for the whole response. */
  responseBody: string;
  /** True for server-streaming RPCs (Generate, Watch, tensor Get). */
  responseStream: boolean;
}

type RawHttpRule = Record<string, unknown>;

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

function bindingsOf(rule: RawHttpRule, base: Omit<HttpBinding, 'httpMethod' | 'pathTemplate' | 'body' | 'responseBody'>): HttpBinding[] {
  const out: HttpBinding[] = [];
  const body = typeof rule.body === 'string' ? rule.body : '';
  const responseBody = typeof rule.response_body === 'string' ? rule.response_body : '';
  for (const m of HTTP_METHODS) {
    const template = rule[m];
    if (typeof template === 'string') {
      out.push({ ...base, httpMethod: m.toUpperCase(), pathTemplate: template, body, responseBody });
    }
  }
  const custom = rule.custom as { kind?: unknown; path?: unknown } | undefined;
  if (custom && typeof custom.kind === 'string' && typeof custom.path === 'string') {
    out.push({ ...base, httpMethod: custom.kind.toUpperCase(), pathTemplate: custom.path, body, responseBody });
  }
  const extra = rule.additional_bindings;
  for (const nested of Array.isArray(extra) ? extra : extra ? [extra] : []) {
    out.push(...bindingsOf(nested as RawHttpRule, base));
  }
  return out;
}

/**
 * Every HTTP binding declared with `google.api.http` on the loaded services, in
 * declaration order. The gateway builds its routes from this list.
 */
export function httpBindings(definition: protoLoader.PackageDefinition = loadDiffmeshPackageDefinition()): HttpBinding[] {
  const out: HttpBinding[] = [];
  for (const [service, entry] of Object.entries(definition)) {
    if ('format' in entry) continue; // a message or enum, not a service
    for (const [method, def] of Object.entries(entry)) {
      const rule = (def.options as Record<string, unknown>)['(google.api.http)'];
      if (!rule || typeof rule !== 'object') continue;
      out.push(
        ...bindingsOf(rule as RawHttpRule, {
          service,
          method,
          grpcPath: def.path,
          responseStream: def.responseStream,
        }),
      );
    }
  }
  return out;
}

// Generated types. Names follow the protos; the two `Get` pairs that exist in two
// packages carry their service's prefix.
export type { CancelledEvent, CancelledEvent__Output } from './generated/diffmesh/common/v1/CancelledEvent.js';
export type { CompletedEvent, CompletedEvent__Output } from './generated/diffmesh/common/v1/CompletedEvent.js';
export { Dtype } from './generated/diffmesh/common/v1/Dtype.js';
export type { Dtype__Output } from './generated/diffmesh/common/v1/Dtype.js';
export type { ErrorDetail, ErrorDetail__Output } from './generated/diffmesh/common/v1/ErrorDetail.js';
export { ErrorReason } from './generated/diffmesh/common/v1/ErrorReason.js';
export type { ErrorReason__Output } from './generated/diffmesh/common/v1/ErrorReason.js';
export type { ExecutionPlan, ExecutionPlan__Output } from './generated/diffmesh/common/v1/ExecutionPlan.js';
export type { FailedEvent, FailedEvent__Output } from './generated/diffmesh/common/v1/FailedEvent.js';
export type { GenerationParams, GenerationParams__Output } from './generated/diffmesh/common/v1/GenerationParams.js';
export type { InputImage, InputImage__Output } from './generated/diffmesh/common/v1/InputImage.js';
export type { ObjectRef, ObjectRef__Output } from './generated/diffmesh/common/v1/ObjectRef.js';
export type { PlanStage, PlanStage__Output } from './generated/diffmesh/common/v1/PlanStage.js';
export type { QueuedEvent, QueuedEvent__Output } from './generated/diffmesh/common/v1/QueuedEvent.js';
export type { RequestContext, RequestContext__Output } from './generated/diffmesh/common/v1/RequestContext.js';
export type { RequestEvent, RequestEvent__Output } from './generated/diffmesh/common/v1/RequestEvent.js';
export { RequestStatus } from './generated/diffmesh/common/v1/RequestStatus.js';
export type { RequestStatus__Output } from './generated/diffmesh/common/v1/RequestStatus.js';
export type { StageFinishedEvent, StageFinishedEvent__Output } from './generated/diffmesh/common/v1/StageFinishedEvent.js';
export { StageName } from './generated/diffmesh/common/v1/StageName.js';
export type { StageName__Output } from './generated/diffmesh/common/v1/StageName.js';
export type { StageStartedEvent, StageStartedEvent__Output } from './generated/diffmesh/common/v1/StageStartedEvent.js';
export type { StageTiming, StageTiming__Output } from './generated/diffmesh/common/v1/StageTiming.js';
export type { StepProgressEvent, StepProgressEvent__Output } from './generated/diffmesh/common/v1/StepProgressEvent.js';

export { BreakerState } from './generated/diffmesh/scheduler/v1/BreakerState.js';
export type { BreakerState__Output } from './generated/diffmesh/scheduler/v1/BreakerState.js';
export type { CancelRequest, CancelRequest__Output } from './generated/diffmesh/scheduler/v1/CancelRequest.js';
export type { CancelResponse, CancelResponse__Output } from './generated/diffmesh/scheduler/v1/CancelResponse.js';
export type { GenerateRequest, GenerateRequest__Output } from './generated/diffmesh/scheduler/v1/GenerateRequest.js';
export type { GenerateResponse, GenerateResponse__Output } from './generated/diffmesh/scheduler/v1/GenerateResponse.js';
export type {
  GetRequest as SchedulerGetRequest,
  GetRequest__Output as SchedulerGetRequest__Output,
} from './generated/diffmesh/scheduler/v1/GetRequest.js';
export type {
  GetResponse as SchedulerGetResponse,
  GetResponse__Output as SchedulerGetResponse__Output,
} from './generated/diffmesh/scheduler/v1/GetResponse.js';
export type { GetStatusRequest, GetStatusRequest__Output } from './generated/diffmesh/scheduler/v1/GetStatusRequest.js';
export type { GetStatusResponse, GetStatusResponse__Output } from './generated/diffmesh/scheduler/v1/GetStatusResponse.js';
export type { ListModelsRequest, ListModelsRequest__Output } from './generated/diffmesh/scheduler/v1/ListModelsRequest.js';
export type { ListModelsResponse, ListModelsResponse__Output } from './generated/diffmesh/scheduler/v1/ListModelsResponse.js';
export { Modality } from './generated/diffmesh/scheduler/v1/Modality.js';
export type { Modality__Output } from './generated/diffmesh/scheduler/v1/Modality.js';
export type { ModelInfo, ModelInfo__Output } from './generated/diffmesh/scheduler/v1/ModelInfo.js';
export type { PoolInstance, PoolInstance__Output } from './generated/diffmesh/scheduler/v1/PoolInstance.js';
export type { PoolStatus, PoolStatus__Output } from './generated/diffmesh/scheduler/v1/PoolStatus.js';
export type { RecentRequest, RecentRequest__Output } from './generated/diffmesh/scheduler/v1/RecentRequest.js';
export type {
  SchedulerServiceClient,
  SchedulerServiceDefinition,
  SchedulerServiceHandlers,
} from './generated/diffmesh/scheduler/v1/SchedulerService.js';
export type { SessionAnswer, SessionAnswer__Output } from './generated/diffmesh/scheduler/v1/SessionAnswer.js';
export type { SessionRequest, SessionRequest__Output } from './generated/diffmesh/scheduler/v1/SessionRequest.js';
export type { SessionResponse, SessionResponse__Output } from './generated/diffmesh/scheduler/v1/SessionResponse.js';
export type { SubmitRequest, SubmitRequest__Output } from './generated/diffmesh/scheduler/v1/SubmitRequest.js';
export type { SubmitResponse, SubmitResponse__Output } from './generated/diffmesh/scheduler/v1/SubmitResponse.js';
export type { GetResultRequest, GetResultRequest__Output } from './generated/diffmesh/scheduler/v1/GetResultRequest.js';
export type { GetResultResponse, GetResultResponse__Output } from './generated/diffmesh/scheduler/v1/GetResultResponse.js';
export type { ResultHeader, ResultHeader__Output } from './generated/diffmesh/scheduler/v1/ResultHeader.js';
export type { WatchRequest, WatchRequest__Output } from './generated/diffmesh/scheduler/v1/WatchRequest.js';
export type { WatchResponse, WatchResponse__Output } from './generated/diffmesh/scheduler/v1/WatchResponse.js';

export type { AdapterReport, AdapterReport__Output } from './generated/diffmesh/stage/v1/AdapterReport.js';
export type { CancelTask, CancelTask__Output } from './generated/diffmesh/stage/v1/CancelTask.js';
export type { DescribeRequest, DescribeRequest__Output } from './generated/diffmesh/stage/v1/DescribeRequest.js';
export type { DescribeResponse, DescribeResponse__Output } from './generated/diffmesh/stage/v1/DescribeResponse.js';
export type { ExecuteRequest, ExecuteRequest__Output } from './generated/diffmesh/stage/v1/ExecuteRequest.js';
export type { ExecuteResponse, ExecuteResponse__Output } from './generated/diffmesh/stage/v1/ExecuteResponse.js';
export type { InstanceStatus, InstanceStatus__Output } from './generated/diffmesh/stage/v1/InstanceStatus.js';
export type { StageServiceClient, StageServiceDefinition, StageServiceHandlers } from './generated/diffmesh/stage/v1/StageService.js';
export type { Task, Task__Output } from './generated/diffmesh/stage/v1/Task.js';
export type { TaskAssignment, TaskAssignment__Output } from './generated/diffmesh/stage/v1/TaskAssignment.js';
export type { TaskFailed, TaskFailed__Output } from './generated/diffmesh/stage/v1/TaskFailed.js';
export type { TaskProgress, TaskProgress__Output } from './generated/diffmesh/stage/v1/TaskProgress.js';
export type { TaskResult, TaskResult__Output } from './generated/diffmesh/stage/v1/TaskResult.js';
export type { WorkRequest, WorkRequest__Output } from './generated/diffmesh/stage/v1/WorkRequest.js';
export type { WorkResponse, WorkResponse__Output } from './generated/diffmesh/stage/v1/WorkResponse.js';

export type { Chunk, Chunk__Output } from './generated/diffmesh/tensor/v1/Chunk.js';
export type { DeleteRequest, DeleteRequest__Output } from './generated/diffmesh/tensor/v1/DeleteRequest.js';
export type { DeleteResponse, DeleteResponse__Output } from './generated/diffmesh/tensor/v1/DeleteResponse.js';
export type {
  GetRequest as TensorGetRequest,
  GetRequest__Output as TensorGetRequest__Output,
} from './generated/diffmesh/tensor/v1/GetRequest.js';
export type {
  GetResponse as TensorGetResponse,
  GetResponse__Output as TensorGetResponse__Output,
} from './generated/diffmesh/tensor/v1/GetResponse.js';
export type { PutHeader, PutHeader__Output } from './generated/diffmesh/tensor/v1/PutHeader.js';
export type { PutRequest, PutRequest__Output } from './generated/diffmesh/tensor/v1/PutRequest.js';
export type { PutObjectsRequest, PutObjectsRequest__Output } from './generated/diffmesh/tensor/v1/PutObjectsRequest.js';
export type { PutObjectsResponse, PutObjectsResponse__Output } from './generated/diffmesh/tensor/v1/PutObjectsResponse.js';
export type { PutResponse, PutResponse__Output } from './generated/diffmesh/tensor/v1/PutResponse.js';
export type { StatRequest, StatRequest__Output } from './generated/diffmesh/tensor/v1/StatRequest.js';
export type { StatResponse, StatResponse__Output } from './generated/diffmesh/tensor/v1/StatResponse.js';
export type { TensorServiceClient, TensorServiceDefinition, TensorServiceHandlers } from './generated/diffmesh/tensor/v1/TensorService.js';
export type { TouchRequest, TouchRequest__Output } from './generated/diffmesh/tensor/v1/TouchRequest.js';
export type { TouchResponse, TouchResponse__Output } from './generated/diffmesh/tensor/v1/TouchResponse.js';

export type { HttpRule, HttpRule__Output } from './generated/google/api/HttpRule.js';
export type { Any, Any__Output } from './generated/google/protobuf/Any.js';
export type { Duration, Duration__Output } from './generated/google/protobuf/Duration.js';
export type { Timestamp, Timestamp__Output } from './generated/google/protobuf/Timestamp.js';
export type { BadRequest, BadRequest__Output } from './generated/google/rpc/BadRequest.js';
export type { ErrorInfo, ErrorInfo__Output } from './generated/google/rpc/ErrorInfo.js';
export type { RetryInfo, RetryInfo__Output } from './generated/google/rpc/RetryInfo.js';
export type { Status as RpcStatus, Status__Output as RpcStatus__Output } from './generated/google/rpc/Status.js';
export type { Code as RpcCode, Code__Output as RpcCode__Output } from './generated/google/rpc/Code.js';
