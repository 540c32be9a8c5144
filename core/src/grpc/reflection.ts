/**
 * Standard gRPC server reflection — `grpc.reflection.v1.ServerReflection` and its older
 * twin `grpc.reflection.v1alpha.ServerReflection` — answered from a compiled
 * FileDescriptorSet (by default `descriptors.binpb` of `@diffmesh/protos`, built by buf).
 * Clients get the real files: their import paths, declared dependencies, fully qualified
 * type names, snake_case fields with json names, and options such as `google.api.http`, so
 * grpcurl, Postman and reflection clients in any language resolve them the standard way.
 *
 * Behaviour follows grpc-go's server: a file request answers with the file and those of its
 * transitive dependencies not yet sent on the stream; unknown names answer NOT_FOUND in an
 * ErrorResponse and the stream goes on; a request that sets no known field ends the stream
 * with INVALID_ARGUMENT.
 */
import * as grpc from '@grpc/grpc-js';
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type FileRegistry, type Message } from '@bufbuild/protobuf';
import {
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
  type FileDescriptorProto,
} from '@bufbuild/protobuf/wkt';
import { readDescriptorSet } from '@diffmesh/protos';
import { invalidParameter } from '../errors/index.js';
import { toWire } from '../wire/errors.js';

/** The reflection services a {@link ReflectionService} adds, newest first. */
export const REFLECTION_SERVICE_NAMES = ['grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection'] as const;

export interface ReflectionServiceOptions {
  /**
   * Fully qualified names of the other services the server hosts (e.g. `grpc.health.v1.Health`,
   * `diffmesh.scheduler.v1.SchedulerService`). `list_services` answers these plus the two
   * reflection services. Each must be defined in the descriptor set.
   */
  services: readonly string[];
  /** A binary `google.protobuf.FileDescriptorSet`; default: the protos package's `descriptors.binpb`. */
  descriptorSet?: Uint8Array;
}

/**
 * The reflection service of one server. Construction fails when a listed service, or the
 * reflection protocol itself, is missing from the descriptor set: reflection never lists a
 * service a client could not resolve.
 */
export class ReflectionService {
  /** What `list_services` answers, sorted. */
  readonly services: readonly string[];
  private readonly index: DescriptorIndex;

  constructor(opts: ReflectionServiceOptions) {
    this.index = opts.descriptorSet ? new DescriptorIndex(opts.descriptorSet) : defaultIndex();
    const names = [...new Set([...opts.services, ...REFLECTION_SERVICE_NAMES])].sort();
    for (const name of names) {
      if (!this.index.hasService(name)) {
        throw new Error(
          `reflection: service ${name} is not in the descriptor set (add its .proto to protos/ and run \`npm run gen -w @diffmesh/protos\`)`,
        );
      }
    }
    this.services = names;
  }

  /** Adds `grpc.reflection.v1` and `v1alpha` to `server`. */
  addToServer(server: grpc.Server): void {
    for (const name of REFLECTION_SERVICE_NAMES) {
      const pkg = name.slice(0, name.lastIndexOf('.'));
      const request = this.index.message(`${pkg}.ServerReflectionRequest`);
      const response = this.index.message(`${pkg}.ServerReflectionResponse`);
      const definition: grpc.ServiceDefinition = {
        ServerReflectionInfo: {
          path: `/${name}/ServerReflectionInfo`,
          requestStream: true,
          responseStream: true,
          requestSerialize: (message: Message) => asBuffer(toBinary(request, message)),
          requestDeserialize: (bytes: Buffer) => fromBinary(request, bytes),
          responseSerialize: (message: Message) => asBuffer(toBinary(response, message)),
          responseDeserialize: (bytes: Buffer) => fromBinary(response, bytes),
        },
      };
      server.addService(definition, {
        ServerReflectionInfo: (call: grpc.ServerDuplexStream<Message, Message>) => this.serve(call, response),
      });
    }
  }

  private serve(call: grpc.ServerDuplexStream<Message, Message>, responseSchema: DescMessage): void {
    // Files already sent on this stream, by name: each goes out once, like grpc-go.
    const sent = new Set<string>();
    let ended = false;
    call.on('data', (message: Message) => {
      if (ended) return;
      const request = message as ReflectionRequest;
      const answer = this.answer(request.messageRequest, sent);
      if (!answer) {
        ended = true;
        // A diffmesh error, so that the field travels in ErrorInfo and BadRequest as on every method.
        call.emit('error', toWire(invalidParameter('message_request', 'the reflection request sets no known message_request field')));
        return;
      }
      call.write(create(responseSchema, { validHost: request.host, originalRequest: request, messageResponse: answer }));
    });
    call.on('end', () => {
      if (!ended) call.end();
      ended = true;
    });
  }

  private answer(request: MessageRequest, sent: Set<string>): MessageResponse | undefined {
    switch (request.case) {
      case 'fileByFilename':
        return this.files(this.index.fileByName(request.value), `file not found: ${request.value}`, sent);
      case 'fileContainingSymbol':
        return this.files(this.index.fileContainingSymbol(request.value), `symbol not found: ${request.value}`, sent);
      case 'fileContainingExtension': {
        const { containingType, extensionNumber } = request.value;
        const file = this.index.fileContainingExtension(containingType, extensionNumber);
        return this.files(file, `extension not found: ${containingType} field ${extensionNumber}`, sent);
      }
      case 'allExtensionNumbersOfType': {
        const numbers = this.index.extensionNumbersOf(request.value);
        if (!numbers) return notFound(`type not found: ${request.value}`);
        return { case: 'allExtensionNumbersResponse', value: { baseTypeName: request.value, extensionNumber: numbers } };
      }
      case 'listServices':
        return { case: 'listServicesResponse', value: { service: this.services.map((name) => ({ name })) } };
      default:
        return undefined;
    }
  }

  /** The file first, then its transitive dependencies not sent yet (breadth first). */
  private files(fileName: string | undefined, missing: string, sent: Set<string>): MessageResponse {
    if (fileName === undefined) return notFound(missing);
    const out: Uint8Array[] = [];
    const queue = [fileName];
    const seen = new Set<string>();
    for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
      if (seen.has(name)) continue;
      seen.add(name);
      const file = this.index.file(name);
      if (!file) continue;
      if (out.length === 0 || !sent.has(name)) out.push(file.bytes);
      sent.add(name);
      queue.push(...file.dependencies);
    }
    return { case: 'fileDescriptorResponse', value: { fileDescriptorProto: out } };
  }
}

/** The `message_request` oneof of a ServerReflectionRequest (v1 and v1alpha alike), as @bufbuild/protobuf decodes it. */
type MessageRequest =
  | { case: 'fileByFilename' | 'fileContainingSymbol' | 'allExtensionNumbersOfType' | 'listServices'; value: string }
  | { case: 'fileContainingExtension'; value: { containingType: string; extensionNumber: number } }
  | { case: undefined; value?: undefined };

type ReflectionRequest = Message & { host: string; messageRequest: MessageRequest };

/** The `message_response` oneof of a ServerReflectionResponse, as given to `create`. */
type MessageResponse =
  | { case: 'fileDescriptorResponse'; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: 'allExtensionNumbersResponse'; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: 'listServicesResponse'; value: { service: Array<{ name: string }> } }
  | { case: 'errorResponse'; value: { errorCode: number; errorMessage: string } };

function notFound(errorMessage: string): MessageResponse {
  return { case: 'errorResponse', value: { errorCode: grpc.status.NOT_FOUND, errorMessage } };
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

interface IndexedFile {
  /** The serialized FileDescriptorProto, as sent to clients. */
  bytes: Uint8Array;
  dependencies: readonly string[];
}

/** Every file of a descriptor set by name, and the file that defines each symbol and extension. */
class DescriptorIndex {
  private readonly files = new Map<string, IndexedFile>();
  private readonly symbols = new Map<string, string>();
  private readonly services = new Set<string>();
  private readonly messages = new Set<string>();
  /** Extendee full name → extension number → file name. */
  private readonly extensions = new Map<string, Map<number, string>>();
  /** Every message, enum and service of the set, resolved. */
  readonly registry: FileRegistry;

  constructor(descriptorSet: Uint8Array) {
    const set = fromBinary(FileDescriptorSetSchema, descriptorSet);
    // Resolves every reference (a missing dependency or type throws here, not on a client).
    this.registry = createFileRegistry(set);
    for (const file of set.file) {
      if (this.files.has(file.name)) throw new Error(`reflection: the descriptor set holds ${file.name} twice`);
      this.files.set(file.name, { bytes: toBinary(FileDescriptorProtoSchema, file), dependencies: file.dependency });
      this.indexFile(file);
    }
  }

  file(name: string): IndexedFile | undefined {
    return this.files.get(name);
  }

  fileByName(name: string): string | undefined {
    return this.files.has(name) ? name : undefined;
  }

  /** Services, methods, messages (nested too), fields, oneofs, enums, enum values and extensions. */
  fileContainingSymbol(symbol: string): string | undefined {
    return this.symbols.get(stripDot(symbol));
  }

  fileContainingExtension(extendee: string, number: number): string | undefined {
    return this.extensions.get(stripDot(extendee))?.get(number);
  }

  /** The extension numbers of a message type (sorted; maybe none), undefined for an unknown type. */
  extensionNumbersOf(typeName: string): number[] | undefined {
    const name = stripDot(typeName);
    if (!this.messages.has(name)) return undefined;
    return [...(this.extensions.get(name)?.keys() ?? [])].sort((a, b) => a - b);
  }

  hasService(name: string): boolean {
    return this.services.has(name);
  }

  /** A message schema of the set (the reflection protocol's own messages, for the codec). */
  message(typeName: string): DescMessage {
    const desc = this.registry.getMessage(typeName);
    if (!desc) throw new Error(`reflection: the descriptor set lacks ${typeName} (grpc/reflection/*/reflection.proto)`);
    return desc;
  }

  // Full names follow protobuf's scoping (as grpc-go resolves them): `pkg.Message.field`,
  // `pkg.Service.Method`, and enum values beside their enum (`pkg.ENUM_VALUE`).
  private indexFile(file: FileDescriptorProto): void {
    const scope = file.package;
    const add = (symbol: string): void => {
      if (!this.symbols.has(symbol)) this.symbols.set(symbol, file.name);
    };
    for (const service of file.service) {
      const name = join(scope, service.name);
      add(name);
      this.services.add(name);
      for (const method of service.method) add(join(name, method.name));
    }
    for (const message of file.messageType) this.indexMessage(file.name, scope, message, add);
    for (const e of file.enumType) indexEnum(scope, e, add);
    for (const extension of file.extension) this.indexExtension(file.name, scope, extension, add);
  }

  private indexMessage(fileName: string, scope: string, message: DescriptorProto, add: (symbol: string) => void): void {
    const name = join(scope, message.name);
    add(name);
    this.messages.add(name);
    for (const field of message.field) add(join(name, field.name));
    for (const oneof of message.oneofDecl) add(join(name, oneof.name));
    for (const nested of message.nestedType) this.indexMessage(fileName, name, nested, add);
    for (const e of message.enumType) indexEnum(name, e, add);
    for (const extension of message.extension) this.indexExtension(fileName, name, extension, add);
  }

  private indexExtension(fileName: string, scope: string, extension: FieldDescriptorProto, add: (symbol: string) => void): void {
    add(join(scope, extension.name));
    const extendee = stripDot(extension.extendee);
    let numbers = this.extensions.get(extendee);
    if (!numbers) this.extensions.set(extendee, (numbers = new Map()));
    numbers.set(extension.number, fileName);
  }
}

function indexEnum(scope: string, e: EnumDescriptorProto, add: (symbol: string) => void): void {
  add(join(scope, e.name));
  for (const value of e.value) add(join(scope, value.name));
}

function join(scope: string, name: string): string {
  return scope ? `${scope}.${name}` : name;
}

function stripDot(name: string): string {
  return name.startsWith('.') ? name.slice(1) : name;
}

let defaultDescriptorIndex: DescriptorIndex | undefined;

/** The index of the protos package's descriptor set, built once per process. */
function defaultIndex(): DescriptorIndex {
  defaultDescriptorIndex ??= new DescriptorIndex(readDescriptorSet());
  return defaultDescriptorIndex;
}

/**
 * Every type and service of the protos package's descriptor set (diffmesh's, health,
 * reflection, google.rpc), resolved once per process: what request messages are checked against.
 */
export function defaultDescriptorRegistry(): FileRegistry {
  return defaultIndex().registry;
}
