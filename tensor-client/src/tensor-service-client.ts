import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { crc32c } from '@node-rs/crc32';
import {
  loadDiffmeshProtos,
  type PutObjectsRequest,
  type PutObjectsResponse__Output,
  type TensorGetResponse__Output as WireGetResponse,
  type ObjectRef as WireObjectRef,
  type PutHeader,
  type PutRequest,
  type TensorServiceClient as RawTensorClient,
} from '@diffmesh/protos';
import {
  type Dtype,
  type ObjectRef,
  Code,
  DiffmeshError,
  asDiffmeshError,
  cancelled,
  invalidParameter,
  channelOptions,
  clientCredentials,
  type TlsFiles,
  injectTraceContext,
  traceMetadata,
  dtypeToWire,
  objectRefFromWire,
  errorDetailFromWire,
  fromWire,
} from '@diffmesh/core';
import type { ObjectInfo } from './tensor-store.js';
import { ByteBudget } from './byte-budget.js';

/** Default bytes per chunk of a Put (and what tensor-svc uses for Get by default). */
export const DEFAULT_CHUNK_BYTES = 2 * 1024 * 1024;

/**
 * Trailing metadata key on Stat and Touch responses: when the object expires unless touched,
 * in milliseconds since the Unix epoch (the ObjectRef has no field for it).
 */
export const EXPIRES_AT_METADATA = 'diffmesh-expires-at-ms';

/** Options of {@link TensorServiceClient}. */
export interface TensorServiceClientOptions {
  /** TLS material; absent = plaintext. */
  tls?: TlsFiles;
  /** Extra gRPC channel options (over {@link channelOptions}). */
  channelOptions?: grpc.ChannelOptions;
  /** Bytes per Put chunk. Default 2 MiB. */
  chunkBytes?: number;
  /** Most Put bytes handed to gRPC and not yet flushed to the socket. Default 4 chunks. */
  maxInflightBytes?: number;
  /** Deadline of Stat, Delete and Touch calls. Default 10 s. */
  unaryTimeoutMs?: number;
}

/** Per-call options. */
export interface TensorCallOptions {
  /** Cancels the call (it then rejects with CANCELLED). */
  signal?: AbortSignal;
  /** Deadline from now in milliseconds; 0 or absent = none for streams, the client default for unary calls. */
  timeoutMs?: number;
  /** The object's capability, from its ObjectRef (Get, Stat, Delete, Touch; see `ObjectRef.capability`). */
  capability?: string;
}

/** What a Put stores: the header fields of `diffmesh.tensor.v1.PutHeader`. */
export interface PutObjectHeader {
  /** Empty or absent: the service assigns one. */
  objectId?: string;
  name: string;
  shape: readonly number[];
  dtype: Dtype;
  /** 0 or absent: the service's default TTL. */
  ttlMs?: number;
  /** `crc32c:<hex>`; absent = computed here, so the service verifies what it received. */
  checksum?: string;
  /** The object is a request's final result (see `PutOptions.finalResult`). */
  finalResult?: boolean;
}

/** Options of {@link TensorServiceClient.get}. */
export interface GetObjectOptions extends TensorCallOptions {
  /** First byte to read. Default 0. */
  offset?: number;
  /** Bytes to read; 0 or absent = to the end. */
  length?: number;
  /**
   * Where the bytes go: a buffer of at least the range's length, or a function returning one
   * for a length (called once, when the header arrives). Default: one new buffer of the
   * range's length. The bytes are copied into it chunk by chunk, never concatenated.
   */
  into?: Uint8Array | ((length: number) => Uint8Array);
  /** A checksum the object must have (e.g. from the caller's ref); mismatch → DATA_LOSS. */
  expectedChecksum?: string;
  /** Verify a whole-object read against its checksum. Default true. */
  verify?: boolean;
}

/** The result of {@link TensorServiceClient.get}. */
export interface GetObjectResult {
  /** The object's ref, as its owner reports it. */
  ref: ObjectRef;
  /** The bytes of the requested range (a view of the `into` buffer when one was given). */
  data: Uint8Array;
  /** Position of `data[0]` in the object. */
  offset: number;
}

/** `crc32c:<8 hex digits>` of a running CRC-32C value. */
export function formatChecksum(crc: number): string {
  return `crc32c:${(crc >>> 0).toString(16).padStart(8, '0')}`;
}

function transportError(address: string, message: string): DiffmeshError {
  return new DiffmeshError(Code.INTERNAL, 'TRANSPORT', `tensor-svc ${address}: ${message}`);
}

function checksumMismatch(objectId: string, expected: string, actual: string, where: string): DiffmeshError {
  return new DiffmeshError(
    Code.DATA_LOSS,
    'CHECKSUM_MISMATCH',
    `object ${objectId}: bytes ${where} do not match their checksum (expected ${expected}, got ${actual})`,
    { metadata: { object_id: objectId } },
  );
}

/** The wire header of an object about to be stored (the checksum is computed when not given). */
function putHeaderToWire(header: PutObjectHeader, data: Uint8Array): PutHeader {
  return wireHeader(header, data.byteLength, header.checksum ?? formatChecksum(crc32c(data)));
}

function wireHeader(header: PutObjectHeader, sizeBytes: number, checksum: string): PutHeader {
  return {
    objectId: header.objectId ?? '',
    name: header.name,
    shape: header.shape.map((d) => String(d)),
    dtype: dtypeToWire(header.dtype),
    ttlMs: header.ttlMs ?? 0,
    sizeBytes: String(sizeBytes),
    checksum,
    ...(header.finalResult ? { finalResult: true } : {}),
  };
}

function asBuffer(data: Uint8Array, offset: number, length: number): Buffer {
  return Buffer.from(data.buffer, data.byteOffset + offset, length);
}

/**
 * A typed client of one tensor-svc (`diffmesh.tensor.v1.TensorService`): chunked Put with
 * byte-bounded backpressure, Get into one preallocated buffer with checksum verification,
 * Stat, Delete and Touch. Errors are DiffmeshErrors (via `fromWire`). No retries here —
 * {@link RemoteTensorStore} adds retries and a breaker per owner.
 */
export class TensorServiceClient {
  readonly address: string;
  readonly chunkBytes: number;
  readonly maxInflightBytes: number;
  private readonly raw: RawTensorClient;
  private readonly unaryTimeoutMs: number;
  /** The open PutObjects stream, if any, and the objects sent on it and not yet answered. */
  private objects: grpc.ClientDuplexStream<PutObjectsRequest, PutObjectsResponse__Output> | undefined;
  private readonly pendingObjects = new Map<number, { resolve(ref: ObjectRef): void; reject(err: DiffmeshError): void }>();
  private nextSequence = 1;

  constructor(address: string, opts: TensorServiceClientOptions = {}) {
    this.address = address;
    this.chunkBytes = opts.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    this.maxInflightBytes = opts.maxInflightBytes ?? 4 * this.chunkBytes;
    this.unaryTimeoutMs = opts.unaryTimeoutMs ?? 10_000;
    if (!Number.isSafeInteger(this.chunkBytes) || this.chunkBytes <= 0) {
      throw new RangeError(`TensorServiceClient: chunkBytes must be a positive integer, got ${this.chunkBytes}`);
    }
    const Ctor = loadDiffmeshProtos().diffmesh.tensor.v1.TensorService;
    // grpc-js retries are off: they buffer written messages for replay, and RemoteTensorStore
    // retries whole transfers itself.
    this.raw = new Ctor(address, clientCredentials(opts.tls), channelOptions({ 'grpc.enable_retries': 0, ...opts.channelOptions }));
  }

  /**
   * Stores `data` under `header` in chunks of {@link chunkBytes}, never holding more than
   * {@link maxInflightBytes} unflushed bytes, and returns the ref the service assigned.
   */
  put(header: PutObjectHeader, data: Uint8Array, opts: TensorCallOptions = {}): Promise<ObjectRef> {
    return new Promise<ObjectRef>((resolve, reject) => {
      if (opts.signal?.aborted) return reject(cancelled('tensor put cancelled'));
      // Aborted when the call completes either way, so the writer loop stops at once.
      const done = new AbortController();
      const onAbort = (): void => call.cancel();
      let settled = false;
      const settle = (err: DiffmeshError | undefined, ref?: ObjectRef): void => {
        if (settled) return;
        settled = true;
        done.abort();
        opts.signal?.removeEventListener('abort', onAbort);
        budget.releaseAll();
        if (err) reject(err);
        else resolve(ref as ObjectRef);
      };
      const budget = new ByteBudget(this.maxInflightBytes);
      // The active trace context travels in the call's metadata (tensor-svc continues the trace).
      const call = this.raw.Put(traceMetadata(), this.callOptions(opts.timeoutMs ?? 0), (err, res) => {
        if (err) settle(opts.signal?.aborted ? cancelled('tensor put cancelled') : fromWire(err));
        else if (!res?.ref) settle(transportError(this.address, 'Put answered without a ref'));
        else {
          try {
            settle(undefined, objectRefFromWire(res.ref));
          } catch (e) {
            settle(asDiffmeshError(e));
          }
        }
      });
      // Failures arrive through the callback; a write after the end must not crash the process.
      call.on('error', () => undefined);
      opts.signal?.addEventListener('abort', onAbort, { once: true });

      const size = data.byteLength;
      const first: PutRequest = {
        header: putHeaderToWire(header, data),
      };
      const write = async (msg: PutRequest, n: number): Promise<void> => {
        await budget.acquire(n, done.signal);
        if (!call.write(msg, () => budget.release(n))) await once(call, 'drain', { signal: done.signal });
      };
      (async () => {
        await write(first, 0);
        for (let off = 0; off < size; off += this.chunkBytes) {
          const n = Math.min(this.chunkBytes, size - off);
          await write({ chunk: { offset: String(off), data: asBuffer(data, off, n) } }, n);
        }
        call.end();
      })().catch((err: unknown) => {
        if (done.signal.aborted) return; // the call already completed; its status wins
        call.cancel();
        settle(asDiffmeshError(err));
      });
    });
  }

  /**
   * Reads an object (or a range of it) into one buffer. A whole-object read is verified
   * against the object's checksum as the chunks arrive (DATA_LOSS / CHECKSUM_MISMATCH).
   */
  async get(objectId: string, opts: GetObjectOptions = {}): Promise<GetObjectResult> {
    const offset = opts.offset ?? 0;
    const length = opts.length ?? 0;
    const verify = opts.verify ?? true;
    if (opts.signal?.aborted) throw cancelled('tensor get cancelled');
    const call = this.raw.Get(
      { objectId, offset: String(offset), length: String(length), capability: opts.capability ?? '' },
      traceMetadata(),
      this.callOptions(opts.timeoutMs ?? 0),
    );
    const onAbort = (): void => call.cancel();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    let ref: ObjectRef | undefined;
    let data: Uint8Array | undefined;
    let expected = 0;
    let received = 0;
    let whole = false;
    let crc = 0;
    const fail = (err: DiffmeshError): never => {
      call.cancel();
      throw err;
    };
    try {
      for await (const msg of call as AsyncIterable<WireGetResponse>) {
        if (msg.kind === 'header' && msg.header) {
          if (ref) fail(transportError(this.address, `Get ${objectId}: a second header`));
          ref = objectRefFromWire(msg.header);
          expected = length === 0 ? ref.sizeBytes - offset : length;
          if (expected < 0 || offset + expected > ref.sizeBytes) {
            fail(transportError(this.address, `Get ${objectId}: header size ${ref.sizeBytes} does not cover the range`));
          }
          if (opts.expectedChecksum && opts.expectedChecksum !== ref.checksum) {
            fail(checksumMismatch(objectId, opts.expectedChecksum, ref.checksum, `held by ${this.address}`));
          }
          whole = offset === 0 && expected === ref.sizeBytes;
          data = allocate(opts.into, expected);
        } else if (msg.kind === 'chunk' && msg.chunk) {
          if (!ref || !data) return fail(transportError(this.address, `Get ${objectId}: a chunk before the header`));
          const bytes = msg.chunk.data;
          const at = Number(msg.chunk.offset) - offset;
          if (at !== received || received + bytes.byteLength > expected) {
            fail(transportError(this.address, `Get ${objectId}: chunk at offset ${msg.chunk.offset} out of order`));
          }
          data.set(bytes, received);
          received += bytes.byteLength;
          if (whole && verify) crc = crc32c(bytes, crc);
        }
      }
    } catch (err) {
      call.cancel();
      if (err instanceof DiffmeshError) throw err;
      if (opts.signal?.aborted) throw cancelled('tensor get cancelled');
      throw fromWire(err);
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
    }
    if (!ref || !data) throw transportError(this.address, `Get ${objectId}: the stream ended without a header`);
    if (received !== expected) {
      throw transportError(this.address, `Get ${objectId}: the stream ended after ${received} of ${expected} bytes`);
    }
    if (whole && verify) {
      const actual = formatChecksum(crc);
      if (actual !== ref.checksum) throw checksumMismatch(objectId, ref.checksum, actual, `received from ${this.address}`);
    }
    return { ref, data: data.subarray(0, expected), offset };
  }

  /** An object's ref and expiry, without its bytes. */
  async stat(objectId: string, opts: TensorCallOptions = {}): Promise<ObjectInfo> {
    const { response, trailer } = await this.unary<{ ref: WireObjectRef | null }>(
      (o, cb) => this.raw.Stat({ objectId, capability: opts.capability ?? '' }, traceMetadata(), o, cb),
      opts,
    );
    return this.info(response.ref, trailer, 'Stat');
  }

  /** Deletes an object; false when it did not exist. */
  async delete(objectId: string, opts: TensorCallOptions = {}): Promise<boolean> {
    const { response } = await this.unary<{ deleted: boolean }>(
      (o, cb) => this.raw.Delete({ objectId, capability: opts.capability ?? '' }, traceMetadata(), o, cb),
      opts,
    );
    return response.deleted;
  }

  /** Restarts an object's TTL, with `ttlMs` when given (0 or absent = keep its TTL). */
  async touch(objectId: string, ttlMs = 0, opts: TensorCallOptions = {}): Promise<ObjectInfo> {
    const { response, trailer } = await this.unary<{ ref: WireObjectRef | null }>(
      (o, cb) => this.raw.Touch({ objectId, ttlMs, capability: opts.capability ?? '' }, traceMetadata(), o, cb),
      opts,
    );
    return this.info(response.ref, trailer, 'Touch');
  }

  /** Closes the channel; calls in flight fail with UNAVAILABLE/CANCELLED. */
  /**
   * Stores a small object whole, as one message on this client's long-lived PutObjects
   * stream (opened on first use, reopened after it breaks): no call per object. The object
   * should fit comfortably in one message (see `RemoteTensorStore`'s `streamPutMaxBytes`).
   * A stream that breaks fails the objects waiting on it with UNAVAILABLE.
   */
  putObject(header: PutObjectHeader, data: Uint8Array, opts: Pick<TensorCallOptions, 'signal'> = {}): Promise<ObjectRef> {
    return this.sendObject({ header: putHeaderToWire(header, data), data: asBuffer(data, 0, data.byteLength) }, opts);
  }

  /**
   * Stores an object whose `sizeBytes` bytes this client wrote to `shmFile` in the
   * `.incoming` folder of the service's shared-memory directory (see `incomingPath`): only
   * the header and the file name travel, on the PutObjects stream. The service verifies the
   * bytes against `checksum` and takes the file over, whatever the outcome. NOT_FOUND with
   * field `shm_file` means the service cannot see the file: it is not on this node.
   */
  putObjectFile(
    header: PutObjectHeader & { checksum: string },
    sizeBytes: number,
    shmFile: string,
    opts: Pick<TensorCallOptions, 'signal'> = {},
  ): Promise<ObjectRef> {
    return this.sendObject({ header: wireHeader(header, sizeBytes, header.checksum), shmFile }, opts);
  }

  /** Sends one object on the PutObjects stream (opened on first use) and waits for its answer. */
  private sendObject(
    body: Omit<PutObjectsRequest, 'sequence' | 'traceContext'>,
    opts: Pick<TensorCallOptions, 'signal'>,
  ): Promise<ObjectRef> {
    if (opts.signal?.aborted) return Promise.reject(cancelled('tensor put cancelled'));
    const stream = (this.objects ??= this.openObjects());
    const sequence = this.nextSequence++;
    return new Promise<ObjectRef>((resolve, reject) => {
      // A cancelled caller stops waiting; the object may still be stored (its TTL reaps it).
      const onAbort = (): void => {
        if (this.pendingObjects.delete(sequence)) reject(cancelled('tensor put cancelled'));
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      const done = (): void => opts.signal?.removeEventListener('abort', onAbort);
      this.pendingObjects.set(sequence, {
        resolve: (ref) => {
          done();
          resolve(ref);
        },
        reject: (err) => {
          done();
          reject(err);
        },
      });
      stream.write({
        sequence,
        ...body,
        // The active trace context: tensor-svc's span of this object continues it.
        traceContext: injectTraceContext(),
      });
    });
  }

  private openObjects(): grpc.ClientDuplexStream<PutObjectsRequest, PutObjectsResponse__Output> {
    const stream = this.raw.PutObjects();
    const broken = (err: DiffmeshError): void => {
      if (this.objects === stream) this.objects = undefined;
      const waiting = [...this.pendingObjects.values()];
      this.pendingObjects.clear();
      for (const p of waiting) p.reject(err);
    };
    stream.on('data', (msg: PutObjectsResponse__Output) => {
      const sequence = Number(msg.sequence);
      const p = this.pendingObjects.get(sequence);
      if (!p) return;
      this.pendingObjects.delete(sequence);
      if (msg.ref) {
        try {
          p.resolve(objectRefFromWire(msg.ref));
        } catch (e) {
          p.reject(asDiffmeshError(e));
        }
      } else {
        p.reject(
          msg.error ? errorDetailFromWire(msg.error) : transportError(this.address, 'PutObjects answered without a ref or an error'),
        );
      }
    });
    stream.on('error', (err) => broken(fromWire(err)));
    stream.on('end', () => broken(transportError(this.address, 'the PutObjects stream ended')));
    return stream;
  }

  close(): void {
    this.objects?.end();
    this.objects = undefined;
    this.raw.close();
  }

  private info(wire: WireObjectRef | null | undefined, trailer: grpc.Metadata, method: string): ObjectInfo {
    if (!wire) throw transportError(this.address, `${method} answered without a ref`);
    const ref = objectRefFromWire(wire);
    const raw = trailer.get(EXPIRES_AT_METADATA)[0];
    const expiresAt = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : ref.createdAt + ref.ttlMs;
    return { ref, expiresAt };
  }

  private callOptions(timeoutMs: number): grpc.CallOptions {
    return timeoutMs > 0 ? { deadline: Date.now() + timeoutMs } : {};
  }

  /** A unary call that also yields the trailing metadata. */
  private unary<R>(
    start: (o: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: R) => void) => grpc.ClientUnaryCall,
    opts: TensorCallOptions,
  ): Promise<{ response: R; trailer: grpc.Metadata }> {
    return new Promise((resolve, reject) => {
      if (opts.signal?.aborted) return reject(cancelled());
      let response: R | undefined;
      const onAbort = (): void => call.cancel();
      const call = start(this.callOptions(opts.timeoutMs ?? this.unaryTimeoutMs), (err, res) => {
        opts.signal?.removeEventListener('abort', onAbort);
        if (err) reject(opts.signal?.aborted ? cancelled() : fromWire(err));
        else response = res;
      });
      // grpc-js calls back first, then emits the status with the trailers.
      call.on('status', (status: grpc.StatusObject) => {
        if (status.code !== grpc.status.OK) return;
        if (response === undefined) reject(transportError(this.address, 'empty response'));
        else resolve({ response, trailer: status.metadata });
      });
      opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function allocate(into: GetObjectOptions['into'], length: number): Uint8Array {
  const buf = typeof into === 'function' ? into(length) : (into ?? Buffer.allocUnsafe(length));
  if (buf.byteLength < length) throw invalidParameter('into', `holds ${buf.byteLength} bytes; the range is ${length} bytes`);
  return buf;
}
