import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

import {
  create,
  createFileRegistry,
  fromBinary,
  fromJson,
  getExtension,
  toBinary,
  type DescMessage,
  type FileRegistry,
} from '@bufbuild/protobuf';
import {
  FieldDescriptorProto_Label,
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
  MethodOptionsSchema,
  type FileDescriptorProto,
} from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  PROTO_ROOT,
  SERVICE_NAMES,
  loadDiffmeshProtos,
  messageCodec,
  readDescriptorSet,
  type GenerateRequest,
  type GenerateRequest__Output,
  type SchedulerServiceHandlers,
} from '@diffmesh/protos';
import { silentLogger } from '../logging/index.js';
import { fromWire } from '../wire/errors.js';
import { REFLECTION_SERVICE_NAMES, ReflectionService } from './reflection.js';
import { GrpcServer } from './server.js';

type Api = 'v1' | 'v1alpha';

/** A ServerReflectionRequest as proto-loader takes it (original field names). */
interface ReflectionRequest {
  host?: string;
  file_by_filename?: string;
  file_containing_symbol?: string;
  file_containing_extension?: { containing_type: string; extension_number: number };
  all_extension_numbers_of_type?: string;
  list_services?: string;
}

/** A ServerReflectionResponse as proto-loader decodes it (`message_response` names the member set). */
interface ReflectionResponse {
  valid_host: string;
  original_request: ReflectionRequest | null;
  message_response?: 'file_descriptor_response' | 'all_extension_numbers_response' | 'list_services_response' | 'error_response';
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  all_extension_numbers_response?: { base_type_name: string; extension_number: number[] };
  list_services_response?: { service: Array<{ name: string }> };
  error_response?: { error_code: number; error_message: string };
}

/**
 * A reflection client as grpcurl has one: the protocol compiled from the upstream
 * reflection.proto (here with proto-loader, not from what the server sends), one stream,
 * one answer per question.
 */
class ReflectionClient {
  private readonly call: grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse>;
  private readonly waiting: Array<{ resolve: (r: ReflectionResponse) => void; reject: (e: Error) => void }> = [];
  private failure: Error | undefined;

  constructor(address: string, api: Api) {
    const def = protoLoader.loadSync(`grpc/reflection/${api}/reflection.proto`, {
      keepCase: true,
      defaults: true,
      oneofs: true,
      includeDirs: [join(PROTO_ROOT, 'third_party')],
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      grpc: { reflection: Record<Api, { ServerReflection: grpc.ServiceClientConstructor }> };
    };
    const Client = pkg.grpc.reflection[api].ServerReflection;
    const client = new Client(address, grpc.credentials.createInsecure());
    this.call = (
      client as unknown as { ServerReflectionInfo(): grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse> }
    ).ServerReflectionInfo();
    this.call.on('data', (r: ReflectionResponse) => this.waiting.shift()?.resolve(r));
    this.call.on('error', (err: Error) => {
      this.failure = err;
      for (const w of this.waiting.splice(0)) w.reject(err);
    });
  }

  ask(request: ReflectionRequest): Promise<ReflectionResponse> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.call.write(request);
    });
  }

  /** The files of a file_descriptor_response, decoded; fails on any other answer. */
  async files(request: ReflectionRequest): Promise<FileDescriptorProto[]> {
    const r = await this.ask(request);
    expect(r.message_response, JSON.stringify(r.error_response)).toBe('file_descriptor_response');
    return (r.file_descriptor_response?.file_descriptor_proto ?? []).map((b) => fromBinary(FileDescriptorProtoSchema, b));
  }

  close(): void {
    this.call.end();
  }
}

/**
 * Resolves `symbol` the strict way: the first file of the answer, then each declared
 * dependency by file name (again only the first file of each answer), into a registry
 * that resolves every type reference.
 */
async function resolveStrictly(client: ReflectionClient, symbol: string): Promise<{ registry: FileRegistry; fetched: string[] }> {
  const files = new Map<string, FileDescriptorProto>();
  const fetched: string[] = [];
  const fetch = async (name: string, known?: FileDescriptorProto): Promise<void> => {
    if (files.has(name)) return;
    const file = known ?? (await client.files({ file_by_filename: name }))[0];
    expect(file?.name).toBe(name);
    files.set(name, file);
    for (const dep of file.dependency) await fetch(dep);
    fetched.push(name); // after its dependencies
  };
  const [root] = await client.files({ file_containing_symbol: symbol });
  await fetch(root.name, root);
  // A set in dependency order: createFileRegistry(file, resolve) of @bufbuild/protobuf 2.17
  // adds files in an order that fails on shared imports (request.proto before error.proto).
  const registry = createFileRegistry(
    create(FileDescriptorSetSchema, { file: fetched.map((name) => files.get(name) as FileDescriptorProto) }),
  );
  return { registry, fetched };
}

const HOSTED = [
  'diffmesh.scheduler.v1.SchedulerService',
  'grpc.health.v1.Health',
  'grpc.reflection.v1.ServerReflection',
  'grpc.reflection.v1alpha.ServerReflection',
];

let server: GrpcServer;
/** The GenerateRequests the scheduler stand-in received. */
const received: GenerateRequest__Output[] = [];

beforeAll(async () => {
  const handlers: Partial<SchedulerServiceHandlers> = {
    Generate: (call) => {
      received.push(call.request);
      call.write({ events: [{ reqId: call.request.requestId, sequence: 1, completed: { mediaType: 'image/png' } }] });
      call.end();
    },
  };
  server = await GrpcServer.start({
    address: '127.0.0.1:0',
    log: silentLogger(),
    services: [
      {
        name: SERVICE_NAMES.scheduler,
        definition: loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService.service,
        implementation: handlers as grpc.UntypedServiceImplementation,
      },
    ],
  });
});

afterAll(() => server?.forceStop());

describe.each<Api>(['v1', 'v1alpha'])('server reflection %s', (api) => {
  let client: ReflectionClient;
  beforeAll(() => {
    client = new ReflectionClient(server.address, api);
  });
  afterAll(() => client.close());

  it('lists the services the server hosts, reflection included', async () => {
    const r = await client.ask({ host: 'h', list_services: '*' });
    expect(r.message_response).toBe('list_services_response');
    expect(r.list_services_response?.service.map((s) => s.name)).toEqual(HOSTED);
    expect(r.valid_host).toBe('h');
    expect(r.original_request).toMatchObject({ host: 'h', list_services: '*' });
  });

  it('resolves every service by declared dependencies alone and builds every message type', async () => {
    const strict = new ReflectionClient(server.address, api);
    try {
      for (const service of HOSTED) {
        const { registry, fetched } = await resolveStrictly(strict, service);
        const desc = registry.getService(service);
        expect(desc, service).toBeDefined();
        for (const method of desc?.methods ?? []) {
          expect(registry.getMessage(method.input.typeName), `${service}.${method.name}`).toBe(method.input);
          expect(registry.getMessage(method.output.typeName)).toBe(method.output);
        }
        let messages = 0;
        for (const type of registry) {
          if (type.kind !== 'message') continue;
          const message = create(type);
          expect(message.$typeName).toBe(type.typeName);
          // An empty proto2 message with required fields (descriptor.proto's) cannot be encoded.
          if (type.fields.every((f) => f.proto.label !== FieldDescriptorProto_Label.REQUIRED)) {
            expect(fromBinary(type, toBinary(type, message))).toEqual(message);
          }
          messages++;
        }
        expect(messages, service).toBeGreaterThan(0);
        if (service === SERVICE_NAMES.scheduler) {
          expect(fetched).toEqual(
            expect.arrayContaining([
              'diffmesh/scheduler/v1/scheduler.proto',
              'diffmesh/common/v1/request.proto',
              'google/api/annotations.proto',
              'google/protobuf/descriptor.proto',
            ]),
          );
          checkScheduler(registry);
        }
      }
    } finally {
      strict.close();
    }
  });

  it.each([
    ['diffmesh.scheduler.v1.SchedulerService', 'diffmesh/scheduler/v1/scheduler.proto'],
    ['diffmesh.scheduler.v1.SchedulerService.Generate', 'diffmesh/scheduler/v1/scheduler.proto'],
    ['diffmesh.scheduler.v1.GenerateRequest', 'diffmesh/scheduler/v1/scheduler.proto'],
    ['diffmesh.scheduler.v1.GenerateRequest.timeout_ms', 'diffmesh/scheduler/v1/scheduler.proto'],
    ['diffmesh.scheduler.v1.SessionRequest.action', 'diffmesh/scheduler/v1/scheduler.proto'],
    ['diffmesh.scheduler.v1.SessionRequest.TraceContextEntry', 'diffmesh/scheduler/v1/scheduler.proto'],
    ['diffmesh.common.v1.RequestStatus', 'diffmesh/common/v1/request.proto'],
    ['diffmesh.common.v1.REQUEST_STATUS_COMPLETED', 'diffmesh/common/v1/request.proto'],
    ['grpc.health.v1.HealthCheckResponse.ServingStatus', 'grpc/health/v1/health.proto'],
    ['grpc.health.v1.HealthCheckResponse.SERVING', 'grpc/health/v1/health.proto'],
    ['google.api.http', 'google/api/annotations.proto'],
    ['google.rpc.ErrorInfo', 'google/rpc/error_details.proto'],
    [`grpc.reflection.${api}.ServerReflection.ServerReflectionInfo`, `grpc/reflection/${api}/reflection.proto`],
  ])('file_containing_symbol %s answers %s first', async (symbol, file) => {
    const [first] = await client.files({ file_containing_symbol: symbol });
    expect(first?.name).toBe(file);
  });

  it('sends a file with the dependencies not yet sent on the stream, each once', async () => {
    const fresh = new ReflectionClient(server.address, api);
    try {
      const first = (await fresh.files({ file_containing_symbol: SERVICE_NAMES.scheduler })).map((f) => f.name);
      expect(first[0]).toBe('diffmesh/scheduler/v1/scheduler.proto');
      expect(new Set(first).size).toBe(first.length);
      expect(first).toEqual(
        expect.arrayContaining([
          'diffmesh/common/v1/events.proto',
          'google/rpc/code.proto',
          'google/protobuf/timestamp.proto',
          'google/api/http.proto',
        ]),
      );
      // Asked again, the file itself comes back, its dependencies do not.
      expect((await fresh.files({ file_by_filename: 'diffmesh/scheduler/v1/scheduler.proto' })).map((f) => f.name)).toEqual([
        'diffmesh/scheduler/v1/scheduler.proto',
      ]);
      expect((await fresh.files({ file_by_filename: 'google/api/http.proto' })).map((f) => f.name)).toEqual(['google/api/http.proto']);
      // A file sharing some dependencies brings only the new ones.
      const tensor = (await fresh.files({ file_containing_symbol: SERVICE_NAMES.tensor })).map((f) => f.name);
      expect(tensor).toEqual(['diffmesh/tensor/v1/tensor.proto']);
    } finally {
      fresh.close();
    }
  });

  it('answers extension queries from the files that declare them', async () => {
    const [file] = await client.files({
      file_containing_extension: { containing_type: 'google.protobuf.MethodOptions', extension_number: 72295728 },
    });
    expect(file?.name).toBe('google/api/annotations.proto');
    const numbers = await client.ask({ all_extension_numbers_of_type: 'google.protobuf.MethodOptions' });
    expect(numbers.all_extension_numbers_response).toEqual({
      base_type_name: 'google.protobuf.MethodOptions',
      extension_number: [72295728],
    });
    const none = await client.ask({ all_extension_numbers_of_type: 'diffmesh.scheduler.v1.GenerateRequest' });
    expect(none.all_extension_numbers_response?.extension_number).toEqual([]);
  });

  it.each<[string, ReflectionRequest]>([
    ['file_by_filename', { file_by_filename: 'diffmesh/nope/v1/nope.proto' }],
    ['file_containing_symbol', { file_containing_symbol: 'diffmesh.scheduler.v1.Nope' }],
    ['file_containing_extension', { file_containing_extension: { containing_type: 'google.protobuf.MethodOptions', extension_number: 1 } }],
    ['all_extension_numbers_of_type', { all_extension_numbers_of_type: 'diffmesh.scheduler.v1.Nope' }],
  ])('answers NOT_FOUND for an unknown %s and goes on', async (_kind, request) => {
    const r = await client.ask(request);
    expect(r.message_response).toBe('error_response');
    expect(r.error_response?.error_code).toBe(grpc.status.NOT_FOUND);
    expect(r.error_response?.error_message).not.toBe('');
    expect((await client.ask({ list_services: '' })).message_response).toBe('list_services_response');
  });

  it('ends the stream with INVALID_ARGUMENT on a request that asks nothing', async () => {
    const fresh = new ReflectionClient(server.address, api);
    const err: unknown = await fresh.ask({ host: 'h' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    // The field at fault travels as on every diffmesh method (found by the fuzz suite: it had none).
    expect(fromWire(err)).toMatchObject({ reason: 'INVALID_PARAMETER', field: 'message_request' });
  });
});

/** What a client of SchedulerService sees in the resolved descriptors. */
function checkScheduler(registry: FileRegistry): void {
  const request = registry.getMessage('diffmesh.scheduler.v1.GenerateRequest') as DescMessage;
  const timeout = request.fields.find((f) => f.number === 4);
  expect(timeout?.proto.name).toBe('timeout_ms');
  expect(timeout?.proto.jsonName).toBe('timeoutMs');
  const params = registry.getMessage('diffmesh.common.v1.GenerationParams') as DescMessage;
  expect(params.fields.find((f) => f.number === 6)?.proto).toMatchObject({
    name: 'num_inference_steps',
    jsonName: 'numInferenceSteps',
    proto3Optional: true,
  });

  // A message built from the received descriptors is what diffmesh's own codec decodes.
  const built = fromJson(
    request,
    {
      model: 'tiny',
      requestId: 'r1',
      timeoutMs: 5000,
      params: { prompt: 'a red circle', width: 64, numInferenceSteps: 4, seed: '9007199254740993' },
    },
    { registry },
  );
  const decoded = messageCodec<GenerateRequest, GenerateRequest__Output>('diffmesh.scheduler.v1.GenerateRequest').decode(
    toBinary(request, built),
  );
  expect(decoded).toMatchObject({
    model: 'tiny',
    requestId: 'r1',
    timeoutMs: 5000,
    params: { prompt: 'a red circle', width: 64, numInferenceSteps: 4, seed: '9007199254740993' },
  });

  // google.api.http survives, readable through the fetched google/api/annotations.proto.
  const http = registry.getExtension('google.api.http');
  expect(http).toBeDefined();
  const generate = registry.getService(SERVICE_NAMES.scheduler)?.methods.find((m) => m.name === 'Generate');
  const options = generate?.proto.options ?? create(MethodOptionsSchema);
  if (!http) return;
  expect(getExtension(options, http)).toMatchObject({ pattern: { case: 'post', value: '/api/v1/generate' }, body: '*' });
  const get = registry.getService(SERVICE_NAMES.scheduler)?.methods.find((m) => m.name === 'Get');
  expect(getExtension(get?.proto.options ?? create(MethodOptionsSchema), http)).toMatchObject({
    pattern: { case: 'get', value: '/api/v1/requests/{req_id}' },
  });
}

describe('ReflectionService', () => {
  it('refuses to list a service the descriptor set does not define', () => {
    expect(() => new ReflectionService({ services: ['diffmesh.nope.v1.NopeService'] })).toThrow(
      /diffmesh\.nope\.v1\.NopeService is not in the descriptor set/,
    );
  });

  it('lists itself and the given services, sorted', () => {
    const reflection = new ReflectionService({
      services: [SERVICE_NAMES.tensor, 'grpc.health.v1.Health'],
      descriptorSet: readDescriptorSet(),
    });
    expect(reflection.services).toEqual([SERVICE_NAMES.tensor, 'grpc.health.v1.Health', ...REFLECTION_SERVICE_NAMES]);
  });
});

// A reflection-only client in another language: Python grpcio with no generated code.
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const pythonGrpc = spawnSync(PYTHON, ['-c', 'import grpc, google.protobuf'], { stdio: 'ignore' }).status === 0;
const PYTHON_MISSING =
  'python3-grpcio/python3-protobuf not installed: run `bash integration-tests/scripts/ensure-python-grpc.sh` (Debian: apt-get install python3-grpcio python3-protobuf)';
const CLIENT_SCRIPT = join(
  dirname(createRequire(import.meta.url).resolve('@diffmesh/protos/package.json')),
  'scripts',
  'reflection_client.py',
);

interface PythonClientOutput {
  services: string[];
  files: string[];
  methods: string[];
  request_type: string;
  json_names: Record<string, string>;
  request_bytes: string;
  http: Record<string, string>;
  responses: Array<{ events: Array<{ req_id: string; sequence: number; completed?: { media_type: string } }> }>;
}

describe.each<Api>(['v1', 'v1alpha'])('a Python reflection client (%s)', (api) => {
  it('discovers SchedulerService, builds a GenerateRequest and calls Generate', async (ctx) => {
    if (!pythonGrpc) ctx.skip(PYTHON_MISSING);
    const request = {
      model: 'tiny',
      requestId: `py-${api}`,
      timeout_ms: 5000,
      params: { prompt: 'a red circle on a blue background', width: 64, height: 64, seed: '42' },
    };
    const { stdout } = await promisify(execFile)(
      PYTHON,
      [CLIENT_SCRIPT, server.address, '--api', api, '--request', JSON.stringify(request), '--call'],
      { timeout: 60_000 },
    );
    const out = JSON.parse(stdout) as PythonClientOutput;
    expect(out.services).toEqual(HOSTED);
    expect(out.files).toEqual(
      expect.arrayContaining([
        'diffmesh/scheduler/v1/scheduler.proto',
        'google/api/annotations.proto',
        'grpc/health/v1/health.proto',
        `grpc/reflection/${api}/reflection.proto`,
      ]),
    );
    expect(out.request_type).toBe('diffmesh.scheduler.v1.GenerateRequest');
    expect(out.methods).toContain('Generate');
    expect(out.json_names).toMatchObject({ timeout_ms: 'timeoutMs', request_id: 'requestId' });
    expect(out.http).toEqual({ post: '/api/v1/generate', body: '*' });

    const expected = {
      model: 'tiny',
      requestId: `py-${api}`,
      timeoutMs: 5000,
      params: { prompt: 'a red circle on a blue background', width: 64, height: 64, seed: '42' },
    };
    const codec = messageCodec<GenerateRequest, GenerateRequest__Output>('diffmesh.scheduler.v1.GenerateRequest');
    expect(codec.decode(Buffer.from(out.request_bytes, 'base64'))).toMatchObject(expected);
    expect(received.find((r) => r.requestId === `py-${api}`)).toMatchObject(expected);
    expect(out.responses).toEqual([{ events: [{ req_id: `py-${api}`, sequence: 1, completed: { media_type: 'image/png' } }] }]);
  });
});
