import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { crc32c } from '@node-rs/crc32';
import {
  SERVICE_NAMES,
  loadDiffmeshProtos,
  type DeleteRequest__Output,
  type DeleteResponse,
  type PutHeader__Output,
  type PutObjectsRequest__Output,
  type PutObjectsResponse,
  type PutRequest__Output,
  type PutResponse,
  type StatRequest__Output,
  type StatResponse,
  type TensorGetRequest__Output,
  type TensorGetResponse,
  type TensorServiceHandlers,
  type TouchRequest__Output,
  type TouchResponse,
} from '@diffmesh/protos';
import {
  ATTR,
  Code,
  SPAN,
  SpanKind,
  contextFromMetadata,
  diffmeshTracer,
  errorDetailToWire,
  extractTraceContext,
  recordError,
  spanLogFields,
  DTYPES,
  DiffmeshError,
  cancelled,
  invalidParameter,
  objectRefToWire,
  toWire,
  type Dtype,
  type Logger,
  type ObjectRef,
  type ServiceBinding,
  type Span,
} from '@diffmesh/core';
import { ByteBudget, EXPIRES_AT_METADATA, byteLengthOf, formatChecksum } from '@diffmesh/tensor-client';
import { ObjectCapabilities } from './capabilities.js';
import type { TensorMetrics, TensorMethod } from './metrics.js';
import { checkObjectId, type ObjectHeader } from './object-header.js';
import type { ObjectSource, ObjectStore, ObjectWriter, StoredObjectInfo } from './object-store.js';

/** Who owns the objects: written into every ref the service returns. */
export interface TensorOwner {
  /** `host:port` other nodes reach this service at. */
  address: string;
  nodeId: string;
}

/** Options of {@link TensorServiceImpl}. */
export interface TensorServiceOptions {
  store: ObjectStore;
  metrics: TensorMetrics;
  log: Logger;
  /** Bytes per Get chunk. */
  chunkBytes: number;
  /** Most bytes one stream holds in the heap before the transport flushes them. */
  maxStreamBufferedBytes: number;
  /** The owner written into refs; may be set after the server binds (see {@link TensorServiceImpl.owner}). */
  owner?: TensorOwner;
  /** HTTP/2 receive window offered to Put clients. Default 16 MiB, as clients' `channelOptions()`. */
  receiveWindowBytes?: number;
  /** Capabilities issued in refs and required to read, touch or delete; default off. */
  capabilities?: ObjectCapabilities;
}

const RECEIVE_WINDOW_BYTES = 16 * 1024 * 1024;
/**
 * What a PutObjects message costs beyond its bytes (header, trace context, its place in the
 * queue): counted against the stream's budget, so that header-only (`shm_file`) messages
 * are bounded in number too.
 */
const OBJECT_MESSAGE_OVERHEAD_BYTES = 1024;

const MAX_NAME_LENGTH = 256;

/** A non-negative safe integer from a uint64 decimal string, or INVALID_ARGUMENT naming the field. */
function uint64(value: string | number | undefined, field: string): number {
  const n = Number(value ?? 0);
  if (!Number.isSafeInteger(n) || n < 0)
    throw invalidParameter(field, `must be a non-negative integer below 2^53, got ${JSON.stringify(value)}`);
  return n;
}

/** Checks a Put header and converts it to the store's form. Every problem names its field. */
export function parsePutHeader(h: PutHeader__Output): ObjectHeader {
  if (h.objectId !== '') checkObjectId(h.objectId, 'header.object_id');
  if (h.name === '') throw invalidParameter('header.name', 'is required (the logical name of the tensor, e.g. latents)');
  // eslint-disable-next-line no-control-regex -- names with control characters are refused on purpose
  if (h.name.length > MAX_NAME_LENGTH || h.name.includes(':') || /[\u0000-\u001f\u007f]/.test(h.name)) {
    throw invalidParameter(
      'header.name',
      `must be at most ${MAX_NAME_LENGTH} characters, without ":" or control characters, got ${JSON.stringify(h.name.slice(0, 80))}`,
    );
  }
  const dtypeName = String(h.dtype);
  const dtype = dtypeName.startsWith('DTYPE_') ? (dtypeName.slice(6).toLowerCase() as Dtype) : undefined;
  if (!dtype || !DTYPES.includes(dtype)) {
    throw invalidParameter('header.dtype', `must be one of ${DTYPES.map((d) => `DTYPE_${d.toUpperCase()}`).join(', ')}, got ${dtypeName}`);
  }
  const shape = h.shape.map((d, i) => uint64(d, `header.shape[${i}]`));
  const sizeBytes = uint64(h.sizeBytes, 'header.size_bytes');
  const expected = byteLengthOf(shape, dtype);
  if (!Number.isSafeInteger(expected) || sizeBytes !== expected) {
    throw invalidParameter('header.size_bytes', `${sizeBytes} does not match shape [${shape.join(', ')}] of ${dtype} (${expected} bytes)`);
  }
  const checksum = h.checksum.toLowerCase();
  if (checksum !== '' && !/^crc32c:[0-9a-f]{8}$/.test(checksum)) {
    throw invalidParameter('header.checksum', `must be empty or crc32c:<8 hex digits>, got ${JSON.stringify(h.checksum.slice(0, 40))}`);
  }
  return {
    objectId: h.objectId,
    name: h.name,
    shape,
    dtype,
    sizeBytes,
    ttlMs: h.ttlMs,
    checksum,
    ...(h.finalResult ? { finalResult: true } : {}),
  };
}

function checkedId(id: string): string {
  checkObjectId(id, 'object_id');
  return id;
}

/**
 * The TensorService implementation: Put (client stream: a header, then chunks in order),
 * Get (server stream: the ref, then chunks of the requested range), Stat, Delete, Touch.
 *
 * Backpressure: a Get reads the next chunk from storage only when the stream's unflushed
 * bytes leave room under `maxStreamBufferedBytes` (a chunk counts from the moment it is read
 * until grpc-js reports it written to the socket), and waits for 'drain' whenever `write()`
 * returns false. A client that stops reading thus stops the server after its HTTP/2 window
 * and socket buffers fill, with at most `maxStreamBufferedBytes` of that stream in the heap.
 * A Put writes each chunk to its file while reading the next ones, and stops reading once
 * `maxStreamBufferedBytes` are received but not yet written; grpc-js then stops reading from
 * the connection and HTTP/2 flow control holds the client back (its window is at most the
 * 16 MiB this service offers per connection, see `widenReceiveWindow`). A PutObjects stream
 * likewise stops reading once the objects it received and has not yet stored and answered
 * reach `maxStreamBufferedBytes`, and goes on as they complete.
 */
export class TensorServiceImpl {
  /** The owner written into refs. Set it once the server is bound. */
  owner: TensorOwner;
  private readonly store: ObjectStore;
  private readonly metrics: TensorMetrics;
  private readonly log: Logger;
  private readonly chunkBytes: number;
  private readonly maxBuffered: number;
  private readonly receiveWindowBytes: number;
  private readonly capabilities: ObjectCapabilities;
  /** Open PutObjects streams: what each still has to answer, and how to end it. */
  private readonly objectStreams = new Set<{ queue: Promise<void>; end(): void }>();

  constructor(opts: TensorServiceOptions) {
    this.store = opts.store;
    this.metrics = opts.metrics;
    this.log = opts.log;
    this.chunkBytes = opts.chunkBytes;
    this.maxBuffered = Math.max(opts.maxStreamBufferedBytes, opts.chunkBytes);
    this.owner = opts.owner ?? { address: '', nodeId: '' };
    this.receiveWindowBytes = opts.receiveWindowBytes ?? RECEIVE_WINDOW_BYTES;
    this.capabilities = opts.capabilities ?? ObjectCapabilities.off();
  }

  /** The service for {@link GrpcServer.start}. */
  binding(): ServiceBinding {
    const handlers: TensorServiceHandlers = {
      Put: (call, callback) => this.put(call, callback),
      PutObjects: (call) => this.putObjects(call),
      Get: (call) => void this.get(call),
      Stat: (call, callback) => this.unary('Stat', callback, () => this.stat(call.request)),
      Delete: (call, callback) => this.unary('Delete', callback, () => this.delete(call.request)),
      Touch: (call, callback) => this.unary('Touch', callback, () => this.touch(call.request)),
    };
    return {
      name: SERVICE_NAMES.tensor,
      definition: loadDiffmeshProtos().diffmesh.tensor.v1.TensorService.service,
      implementation: handlers,
    };
  }

  // ---- PutObjects ----

  /**
   * Small objects, each whole in one message, on a long-lived stream. Objects are stored
   * one after another in arrival order; each is answered with its ref or its error, and a
   * failed object never ends the stream. Each object gets its own server span, a child of
   * the trace context it carries.
   */
  private putObjects(call: grpc.ServerDuplexStream<PutObjectsRequest__Output, PutObjectsResponse>): void {
    limitReadAhead(call);
    widenReceiveWindow(call, this.receiveWindowBytes);
    let ended = false;
    /** Bytes of objects received and not yet stored and answered; reading pauses while it is at the budget. */
    let unstored = 0;
    const stream = {
      queue: Promise.resolve(),
      end: (): void => {
        if (ended) return;
        ended = true;
        void stream.queue.then(() => call.end());
      },
    };
    this.objectStreams.add(stream);
    call.on('data', (msg: PutObjectsRequest__Output) => {
      // A slow store (a busy spill disk) must not make the stream hold every object sent:
      // past the budget, grpc-js stops reading and HTTP/2 flow control holds the client back.
      const held = msg.data.byteLength + OBJECT_MESSAGE_OVERHEAD_BYTES;
      unstored += held;
      this.metrics.buffer(msg.data.byteLength);
      if (unstored >= this.maxBuffered) call.pause();
      stream.queue = stream.queue
        .then(() => this.putObject(call, msg))
        .catch((err: unknown) => this.log.error({ err }, 'tensor PutObjects: could not answer an object'))
        .finally(() => {
          unstored -= held;
          this.metrics.buffer(-msg.data.byteLength);
          if (unstored < this.maxBuffered) call.resume();
        });
    });
    const gone = (): void => {
      this.objectStreams.delete(stream);
    };
    call.on('end', () => {
      gone();
      stream.end();
    });
    call.on('error', gone);
    call.on('cancelled', gone);
  }

  /**
   * Ends every open PutObjects stream once the objects it has received are answered (for a
   * drain: those streams stay open for as long as their clients live). An object still on its
   * way is not answered; its client fails it with UNAVAILABLE and retries. Resolves then.
   */
  async endObjectStreams(): Promise<void> {
    const streams = [...this.objectStreams];
    this.objectStreams.clear();
    for (const s of streams) s.end();
    await Promise.all(streams.map((s) => s.queue));
  }

  private async putObject(
    call: grpc.ServerDuplexStream<PutObjectsRequest__Output, PutObjectsResponse>,
    msg: PutObjectsRequest__Output,
  ): Promise<void> {
    this.metrics.call('Put');
    const span = diffmeshTracer().startSpan(
      SPAN.tensorServerPut,
      { kind: SpanKind.SERVER, attributes: { 'rpc.system': 'grpc', 'rpc.service': SERVICE_NAMES.tensor, 'rpc.method': 'PutObjects' } },
      extractTraceContext(msg.traceContext),
    );
    let answer: PutObjectsResponse;
    try {
      if (!msg.header) throw invalidParameter('header', 'is required');
      const header = parsePutHeader(msg.header);
      span.setAttributes({
        [ATTR.tensorObjectId]: header.objectId,
        [ATTR.tensorName]: header.name,
        'diffmesh.tensor.size_bytes': header.sizeBytes,
      });
      let ref: ObjectRef;
      if (msg.shmFile !== '') {
        if (msg.data.byteLength > 0) throw invalidParameter('data', 'must be empty when shm_file names the bytes');
        span.setAttribute(ATTR.tensorPath, 'shm');
        ref = await this.store.adopt(header, msg.shmFile);
      } else {
        ref = await this.store.putWhole(header, msg.data);
      }
      this.metrics.stored(ref.sizeBytes);
      span.setAttribute(ATTR.tensorBytes, ref.sizeBytes);
      answer = { sequence: msg.sequence, ref: objectRefToWire(this.withOwner(ref)) };
    } catch (err) {
      recordError(span, err);
      this.metrics.error('Put');
      this.logFailure('Put', err, span);
      answer = { sequence: msg.sequence, error: errorDetailToWire(err) };
    } finally {
      span.end();
    }
    if (call.writable && !call.write(answer)) await once(call, 'drain').catch(() => undefined);
  }

  // ---- Put ----

  private put(call: grpc.ServerReadableStream<PutRequest__Output, PutResponse>, callback: grpc.sendUnaryData<PutResponse>): void {
    this.metrics.call('Put');
    this.metrics.streamOpened();
    const span = serverSpan(SPAN.tensorServerPut, 'Put', call.metadata);
    /** Object bytes received on this stream. */
    let received = 0;
    limitReadAhead(call);
    widenReceiveWindow(call, this.receiveWindowBytes);
    let writer: ObjectWriter | undefined;
    let creating: Promise<ObjectWriter> | undefined;
    let finished = false;
    /** Bytes received and not yet on disk; reading pauses while it is at the budget. */
    let unwritten = 0;
    let waitingForHeader = false;

    const finish = (err: unknown, ref?: ObjectRef): void => {
      if (finished) {
        // A commit that completed after the call ended: the client cancelled after its last
        // byte (grpc-js reads the reset as the end of the stream, then as a cancellation), so
        // it was told CANCELLED and holds no ref. Keeping the object would leak it until its TTL.
        if (ref) this.discardPut(ref);
        return;
      }
      finished = true;
      this.metrics.streamClosed();
      span.setAttribute(ATTR.tensorBytes, ref?.sizeBytes ?? received);
      if (err !== undefined) recordError(span, err);
      span.end();
      if (err !== undefined) {
        // Frees the reservation and the temporary file (a no-op after a commit).
        if (creating)
          void creating.then(
            (w) => w.abort(),
            () => undefined,
          );
        if (!call.cancelled) {
          this.metrics.error('Put');
          this.logFailure('Put', err, span);
          callback(toWire(err));
        }
        // Whatever else the client sends is read and dropped, so the call can complete.
        call.removeAllListeners('data');
        call.on('data', () => undefined);
        call.resume();
      } else if (call.cancelled) {
        this.discardPut(ref as ObjectRef);
      } else {
        callback(null, { ref: objectRefToWire(this.withOwner(ref as ObjectRef)) });
      }
    };
    const maybeResume = (): void => {
      if (!finished && !waitingForHeader && unwritten < this.maxBuffered) call.resume();
    };

    call.on('data', (msg: PutRequest__Output) => {
      if (finished) return;
      try {
        if (msg.kind === 'header' && msg.header) {
          if (creating) throw invalidParameter('header', 'a Put carries exactly one header, as its first message');
          const header = parsePutHeader(msg.header);
          span.setAttributes({
            [ATTR.tensorObjectId]: header.objectId,
            [ATTR.tensorName]: header.name,
            'diffmesh.tensor.size_bytes': header.sizeBytes,
          });
          // Chunks wait until the file exists and the bytes are reserved.
          waitingForHeader = true;
          call.pause();
          creating = this.store.beginPut(header);
          creating.then(
            (w) => {
              writer = w;
              waitingForHeader = false;
              if (finished) void w.abort();
              else maybeResume();
            },
            (err: unknown) => finish(err),
          );
        } else if (msg.kind === 'chunk' && msg.chunk) {
          if (!writer) throw invalidParameter('header', 'the first message of a Put must be a header; got a chunk');
          const data = msg.chunk.data;
          const n = data.byteLength;
          received += n;
          const written = writer.write(uint64(msg.chunk.offset, 'chunk.offset'), data);
          unwritten += n;
          this.metrics.buffer(n);
          // Writes overlap with reading the next chunks, up to the stream's byte budget.
          if (unwritten >= this.maxBuffered) call.pause();
          written.then(
            () => {
              unwritten -= n;
              this.metrics.buffer(-n);
              maybeResume();
            },
            (err: unknown) => {
              unwritten -= n;
              this.metrics.buffer(-n);
              finish(err);
            },
          );
        } else {
          throw invalidParameter('kind', 'each PutRequest must carry a header or a chunk');
        }
      } catch (err) {
        finish(err);
      }
    });
    call.on('end', () => {
      if (finished) return;
      (async () => {
        if (!creating) throw invalidParameter('header', 'the Put stream ended without a header');
        const w = await creating;
        const ref = await w.commit();
        this.metrics.stored(ref.sizeBytes);
        return ref;
      })().then(
        (ref) => finish(undefined, ref),
        (err: unknown) => finish(err),
      );
    });
    call.on('error', (err: unknown) => finish(err));
    call.on('cancelled', () => finish(cancelled('Put cancelled by the client')));
  }

  /** Deletes the object of a put whose client is gone before it learnt of it. */
  private discardPut(ref: ObjectRef): void {
    this.store
      .delete(ref.objectId)
      .catch((err: unknown) => this.log.warn({ err, objectId: ref.objectId }, 'Put: could not delete the object of a cancelled put'));
  }

  // ---- Get ----

  private async get(call: grpc.ServerWritableStream<TensorGetRequest__Output, TensorGetResponse>): Promise<void> {
    this.metrics.call('Get');
    this.metrics.streamOpened();
    const span = serverSpan(SPAN.tensorServerGet, 'Get', call.metadata);
    /** Object bytes handed to the transport. */
    let sent = 0;
    const abort = new AbortController();
    const onCancel = (): void => abort.abort(cancelled('Get cancelled by the client'));
    call.on('cancelled', onCancel);
    call.on('error', () => undefined);
    const budget = new ByteBudget(this.maxBuffered, (d) => this.metrics.buffer(d));
    let reader: ObjectSource | undefined;
    try {
      const req = call.request;
      span.setAttribute(ATTR.tensorObjectId, req.objectId);
      const id = this.permitted(req);
      const offset = uint64(req.offset, 'offset');
      const length = uint64(req.length, 'length');
      reader = await this.store.openRead(id);
      const size = reader.ref.sizeBytes;
      span.setAttributes({ [ATTR.tensorName]: reader.ref.name, 'diffmesh.tensor.size_bytes': size });
      if (offset > size) throw invalidParameter('offset', `${offset} is past the end of object ${id} (${size} bytes)`);
      const end = length === 0 ? size : offset + length;
      if (end > size)
        throw invalidParameter('length', `offset ${offset} + length ${length} is past the end of object ${id} (${size} bytes)`);

      // Chunk buffers are reused once written: the transport is done with a chunk when its
      // write callback runs (grpc-js serialises a message before writing it).
      const pool: Buffer[] = [];
      const take = (): Buffer => pool.pop() ?? Buffer.allocUnsafe(this.chunkBytes);
      const write = async (msg: TensorGetResponse, n: number, buf?: Buffer): Promise<void> => {
        const ok = call.write(msg, () => {
          budget.release(n);
          this.metrics.sent(n);
          if (buf) pool.push(buf);
        });
        if (!ok) await once(call, 'drain', { signal: abort.signal });
      };
      await write({ header: objectRefToWire(this.withOwner(reader.ref)) }, 0);

      // The checksum covers the whole object: bytes outside the range are read and checked
      // too, in chunk-sized pieces that count against the stream's budget like sent ones.
      let crc = 0;
      const scan = async (from: number, to: number): Promise<void> => {
        for (let pos = from; pos < to;) {
          const n = Math.min(this.chunkBytes, to - pos);
          await budget.acquire(n, abort.signal);
          const buf = take();
          try {
            await reader!.readExactly(buf, n, pos);
            crc = crc32c(buf.subarray(0, n), crc);
          } finally {
            budget.release(n);
            pool.push(buf);
          }
          pos += n;
        }
      };
      await scan(0, offset);
      for (let pos = offset; pos < end;) {
        const n = Math.min(this.chunkBytes, end - pos);
        await budget.acquire(n, abort.signal);
        const buf = take();
        await reader.readExactly(buf, n, pos);
        const data = n === buf.byteLength ? buf : buf.subarray(0, n);
        crc = crc32c(data, crc);
        await write({ chunk: { offset: String(pos), data } }, n, buf);
        sent += n;
        pos += n;
      }
      await scan(end, size);
      const actual = formatChecksum(crc);
      if (actual !== reader.ref.checksum) {
        throw new DiffmeshError(
          Code.DATA_LOSS,
          'CHECKSUM_MISMATCH',
          `object ${id}: stored bytes do not match their checksum (expected ${reader.ref.checksum}, got ${actual})`,
          { metadata: { object_id: id } },
        );
      }
      call.end();
    } catch (err) {
      recordError(span, abort.signal.aborted ? cancelled('Get cancelled by the client') : err);
      if (abort.signal.aborted) return; // the client is gone; nobody to tell
      this.metrics.error('Get');
      this.logFailure('Get', err, span);
      call.emit('error', toWire(err));
    } finally {
      span.setAttribute(ATTR.tensorBytes, sent);
      span.end();
      call.off('cancelled', onCancel);
      budget.releaseAll();
      this.metrics.streamClosed();
      await reader?.close();
    }
  }

  // ---- unary ----

  private async stat(req: StatRequest__Output): Promise<{ response: StatResponse; trailer: grpc.Metadata }> {
    const info = await this.store.stat(this.permitted(req));
    return { response: { ref: objectRefToWire(this.withOwner(info.ref)) }, trailer: expiryTrailer(info) };
  }

  private async delete(req: DeleteRequest__Output): Promise<{ response: DeleteResponse }> {
    return { response: { deleted: await this.store.delete(this.permitted(req)) } };
  }

  private async touch(req: TouchRequest__Output): Promise<{ response: TouchResponse; trailer: grpc.Metadata }> {
    const info = await this.store.touch(this.permitted(req), req.ttlMs);
    return { response: { ref: objectRefToWire(this.withOwner(info.ref)) }, trailer: expiryTrailer(info) };
  }

  private unary<R>(
    method: TensorMethod,
    callback: grpc.sendUnaryData<R>,
    fn: () => { response: R; trailer?: grpc.Metadata } | Promise<{ response: R; trailer?: grpc.Metadata }>,
  ): void {
    this.metrics.call(method);
    Promise.resolve()
      .then(fn)
      .then(
        ({ response, trailer }) => callback(null, response, trailer),
        (err: unknown) => {
          this.metrics.error(method);
          this.logFailure(method, err);
          callback(toWire(err));
        },
      );
  }

  /** The request's object id, once its capability is checked. */
  private permitted(req: { objectId: string; capability: string }): string {
    const id = checkedId(req.objectId);
    this.capabilities.check(id, req.capability);
    return id;
  }

  /** A ref as this service hands it out: its owner, and the object's capability. */
  private withOwner(ref: ObjectRef): ObjectRef {
    const capability = this.capabilities.issue(ref.objectId);
    return { ...ref, ownerAddress: this.owner.address, ownerNodeId: this.owner.nodeId, ...(capability ? { capability } : {}) };
  }

  private logFailure(method: TensorMethod, err: unknown, span?: Span): void {
    const trace = spanLogFields(span);
    if (err instanceof DiffmeshError && err.code !== Code.INTERNAL) {
      this.log.debug({ method, code: err.code, reason: err.reason, message: err.message, ...trace }, 'tensor call refused');
    } else {
      this.log.error({ method, err, ...trace }, 'tensor call failed');
    }
  }
}

/**
 * The server span of a Put or Get stream: a child of the trace context in the call's
 * metadata (the tensor client's span), so transfers show under the stage that made them.
 */
function serverSpan(name: string, method: string, metadata: grpc.Metadata): Span {
  return diffmeshTracer().startSpan(
    name,
    {
      kind: SpanKind.SERVER,
      attributes: { 'rpc.system': 'grpc', 'rpc.service': SERVICE_NAMES.tensor, 'rpc.method': method },
    },
    contextFromMetadata(metadata),
  );
}

function expiryTrailer(info: StoredObjectInfo): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(EXPIRES_AT_METADATA, String(Math.round(info.expiresAt)));
  return md;
}

/**
 * grpc-js hands a client stream to the handler as an object-mode Readable that reads ahead
 * up to 16 messages (64 MiB of 4 MiB chunks, more if a client sends larger ones). Lowering
 * its high-water mark to one message leaves the rest to HTTP/2 flow control, so a Put holds
 * at most one message beyond the chunk being written. Best effort: skipped if Node's stream
 * internals ever change shape.
 */
function limitReadAhead(call: object): void {
  const state = (call as { _readableState?: { highWaterMark?: unknown } })._readableState;
  if (state && typeof state.highWaterMark === 'number') state.highWaterMark = 1;
}

/** HTTP/2 sessions whose receive window has been widened. */
const widened = new WeakSet<object>();

/**
 * grpc-js applies `grpc-node.flow_control_window` to client channels only: a server keeps
 * HTTP/2's 64 KiB receive windows, so every 64 KiB of a Put waits for a WINDOW_UPDATE round
 * trip (a third of the loopback throughput). On the first Put of a connection this sends
 * SETTINGS_INITIAL_WINDOW_SIZE and widens the connection window to `bytes`, which the client
 * applies to open streams too (RFC 9113 §6.9.2). Memory stays bounded: the connection window
 * caps what a client may send ahead on all its streams together. Best effort: reaches the
 * session through grpc-js internals, and does nothing if they change shape.
 */
function widenReceiveWindow(call: object, bytes: number): void {
  try {
    let c = (call as { call?: unknown }).call as { stream?: { session?: unknown }; nextCall?: unknown } | undefined;
    for (let i = 0; c && !c.stream && i < 16; i++) c = c.nextCall as typeof c;
    const session = c?.stream?.session as
      { destroyed?: boolean; setLocalWindowSize?: (n: number) => void; settings?: (s: { initialWindowSize: number }) => void } | undefined;
    if (!session || session.destroyed || widened.has(session)) return;
    if (typeof session.setLocalWindowSize !== 'function' || typeof session.settings !== 'function') return;
    widened.add(session);
    session.setLocalWindowSize(bytes);
    session.settings({ initialWindowSize: bytes });
  } catch {
    // An optimisation only: the default windows still work.
  }
}
