import { randomBytes } from 'node:crypto';
import { existsSync, unlinkSync, writeFileSync } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { crc32c } from '@node-rs/crc32';
import { Metadata } from '@grpc/grpc-js';
import { trace, context as otelContext } from '@opentelemetry/api';
import {
  type ObjectRef,
  Code,
  DiffmeshError,
  asDiffmeshError,
  invalidParameter,
  createBreaker,
  type BreakerOptions,
  type CircuitBreaker,
  type TlsFiles,
  type Logger,
  ATTR,
  SPAN,
  SpanKind,
  withSpan,
  STATUS_DETAILS_KEY,
} from '@diffmesh/core';
import { checkPutInput, rangeOf } from './tensor-bytes.js';
import type {
  GetOptions,
  ObjectInfo,
  ObjectKey,
  PutOptions,
  PutTensorInput,
  StoredTensor,
  TensorStore,
  TensorStoreUsage,
} from './tensor-store.js';
import { scopedPutOptions } from './put-scope.js';
import { TensorServiceClient, formatChecksum, type PutObjectHeader } from './tensor-service-client.js';
import { defaultShmDir, incomingPath, objectPath } from './shm-paths.js';

/** Retry policy of transfers that fail transiently. */
export interface TensorRetryOptions {
  /** Attempts in all, the first included. Default 3. */
  attempts?: number;
  /** Delay before the second attempt; doubles each time, with ±20% jitter. Default 50 ms. */
  baseDelayMs?: number;
  /** Longest delay between attempts (also caps a server's Retry-After). Default 1000 ms. */
  maxDelayMs?: number;
}

/** Options of {@link RemoteTensorStore}. */
/** Default of {@link RemoteTensorStoreOptions.streamPutMaxBytes}. */
export const DEFAULT_STREAM_PUT_MAX_BYTES = 4 * 1024 * 1024;

export interface RemoteTensorStoreOptions {
  /**
   * `host:port` of this node's tensor-svc: puts go there, and reads of ids that come without
   * a ref. `''` for a read-only client that only follows refs (puts then fail with
   * FAILED_PRECONDITION).
   */
  address: string;
  /** This node's id. Refs whose `ownerNodeId` equals it are read from shared memory. */
  nodeId: string;
  log?: Logger;
  /** The local tensor-svc's shared-memory directory. Default `defaultShmDir(nodeId)`, as tensor-svc's default. */
  shmDir?: string;
  /** Read same-node objects from shared memory. Default true. */
  sameNodeReads?: boolean;
  /**
   * Put objects of at least `shmPutMinBytes` through shared memory when this node's
   * tensor-svc shares it (its `<shmDir>/.incoming` folder exists and is writable): the bytes
   * are written to a file there and only the header travels. Otherwise, or when the service
   * cannot take the file, the bytes go over gRPC. Default true.
   */
  sameNodeWrites?: boolean;
  /** Smallest object put through shared memory. Default 64 KiB. */
  shmPutMinBytes?: number;
  /** Bytes per Put chunk. Default 2 MiB. */
  chunkBytes?: number;
  /**
   * Objects up to this size go whole as one message on a long-lived PutObjects stream
   * (no call per object); larger ones by a chunked Put. Default 4 MiB; 0 = always Put.
   */
  streamPutMaxBytes?: number;
  /** Most Put bytes handed to gRPC and not yet flushed. Default 4 chunks. */
  maxInflightBytes?: number;
  retry?: TensorRetryOptions;
  /** Breaker tuning, one breaker per owner address (the name is `tensor-svc <address>`). */
  breaker?: Omit<BreakerOptions, 'name'>;
  tls?: TlsFiles;
  /** Deadline of Stat, Delete and Touch. Default 10 s. */
  unaryTimeoutMs?: number;
  /** Deadline of one Put or Get attempt; 0 = none (keepalive still detects dead peers). Default 0. */
  transferTimeoutMs?: number;
  /** Most request ids remembered for {@link RemoteTensorStore.deleteRequest}. Default 10,000. */
  maxTrackedRequests?: number;
  /** Clock used to tell an expired shared-memory file (its mtime is its expiry). Default `Date.now`. */
  now?: () => number;
}

/** Default of {@link RemoteTensorStoreOptions.shmPutMinBytes}. */
export const DEFAULT_SHM_PUT_MIN_BYTES = 64 * 1024;

/** Objects up to this size are written to shared memory with synchronous calls (a memory copy on tmpfs). */
const SYNC_WRITE_MAX_BYTES = 4 * 1024 * 1024;

/** Counters of a {@link RemoteTensorStore}, for metrics and tests. */
export interface RemoteTensorStoreStats {
  puts: number;
  /** Puts whose bytes went through shared memory instead of over gRPC. */
  shmWrites: number;
  /** Gets served from the same node's shared memory, without a network copy. */
  shmReads: number;
  /** Gets served by a Get stream from the owner. */
  remoteReads: number;
  /** Attempts repeated after a transient failure. */
  retries: number;
}

interface Owner {
  client: TensorServiceClient;
  breaker: CircuitBreaker<[() => Promise<unknown>], unknown>;
}

interface Tracked {
  objectId: string;
  address: string;
  sizeBytes: number;
  capability?: string;
}

/** Node file errors after which a same-node read falls back to the owner's Get. */
const FALLBACK_CODES = new Set(['ENOENT', 'EACCES', 'EPERM', 'ENOTDIR', 'ELOOP', 'EISDIR']);

/**
 * A {@link TensorStore} backed by tensor-svc instances. Puts stream to this node's service;
 * `get(ref)` reads a same-node object straight from shared memory (verifying its checksum)
 * and otherwise streams it from the owner named in the ref, into one buffer of the object's
 * size. Transient failures (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, RESOURCE_EXHAUSTED with
 * a Retry-After) are retried a bounded number of times with backoff, behind one circuit
 * breaker per owner; an open breaker fails at once with UNAVAILABLE / BREAKER_OPEN. The
 * breaker counts only failures to reach the owner ({@link isTransportFailure}): a full store
 * (STORE_FULL) or any other answer of the service never opens it, so reads and deletes of
 * that owner go on while it is full.
 *
 * `deleteRequest` deletes the objects this client put for the request (the protocol has no
 * per-request delete); `usage` reports those objects too, with `capacityBytes` 0 (unknown).
 */
export class RemoteTensorStore implements TensorStore {
  readonly address: string;
  readonly nodeId: string;
  readonly shmDir: string;
  private readonly opts: RemoteTensorStoreOptions;
  private readonly owners = new Map<string, Owner>();
  private readonly byRequest = new Map<string, Map<string, Tracked>>();
  private readonly counters: RemoteTensorStoreStats = { puts: 0, shmWrites: 0, shmReads: 0, remoteReads: 0, retries: 0 };
  /** Off once this node's tensor-svc could not see a file this client wrote (another node's directory). */
  private shmWritesOn: boolean;
  private readonly attempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => number;
  private closed = false;

  constructor(opts: RemoteTensorStoreOptions) {
    if (!opts.nodeId) throw new RangeError('RemoteTensorStore: nodeId is required');
    this.opts = opts;
    this.address = opts.address;
    this.nodeId = opts.nodeId;
    this.shmDir = opts.shmDir ?? defaultShmDir(opts.nodeId);
    this.shmWritesOn = opts.sameNodeWrites ?? true;
    this.attempts = Math.max(1, opts.retry?.attempts ?? 3);
    this.baseDelayMs = opts.retry?.baseDelayMs ?? 50;
    this.maxDelayMs = opts.retry?.maxDelayMs ?? 1000;
    this.now = opts.now ?? Date.now;
  }

  /** Counters since construction. */
  stats(): RemoteTensorStoreStats {
    return { ...this.counters };
  }

  /** Stores `input` in this node's tensor-svc, in a `diffmesh.tensor.put` span. */
  async put(input: PutTensorInput, putOpts?: PutOptions): Promise<ObjectRef> {
    this.checkOpen();
    checkPutInput(input);
    const opts = scopedPutOptions(putOpts);
    const ttlMs = opts.ttlMs ?? 0;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 0 || ttlMs > 0xffffffff) {
      throw invalidParameter('ttl_ms', `must be a non-negative integer number of milliseconds, got ${ttlMs}`);
    }
    if (!this.address) {
      throw new DiffmeshError(Code.FAILED_PRECONDITION, 'INVALID_PARAMETER', 'tensor put: this client has no local tensor-svc address', {
        metadata: { field: 'address' },
      });
    }
    // The id is chosen here so that a retried Put replaces, never duplicates, the object.
    const objectId = `${input.requestId}:${input.name}:${randomBytes(6).toString('hex')}`;
    const attributes = {
      [ATTR.requestId]: input.requestId,
      [ATTR.tensorName]: input.name,
      [ATTR.tensorObjectId]: objectId,
      [ATTR.tensorBytes]: input.data.byteLength,
      [ATTR.tensorOwnerAddress]: this.address,
      [ATTR.tensorPath]: 'grpc',
      'server.address': this.address,
    };
    return withSpan(
      SPAN.tensorPut,
      attributes,
      async (span) => {
        const checksum = formatChecksum(crc32c(input.data));
        const header = {
          objectId,
          name: input.name,
          shape: input.shape,
          dtype: input.dtype,
          ttlMs,
          checksum,
          ...(opts.finalResult ? { finalResult: true } : {}),
        };
        const size = input.data.byteLength;
        let ref =
          this.shmWritesOn && size >= (this.opts.shmPutMinBytes ?? DEFAULT_SHM_PUT_MIN_BYTES)
            ? await this.putThroughShm(header, input.data)
            : undefined;
        if (ref) {
          this.counters.shmWrites += 1;
          span.setAttribute(ATTR.tensorPath, 'shm');
        } else {
          const whole = size <= (this.opts.streamPutMaxBytes ?? DEFAULT_STREAM_PUT_MAX_BYTES);
          ref = await this.withOwner(this.address, 'Put', (client) =>
            whole ? client.putObject(header, input.data) : client.put(header, input.data, this.transferOptions()),
          );
        }
        this.counters.puts += 1;
        span.setAttributes({ [ATTR.tensorOwnerNode]: ref.ownerNodeId, [ATTR.tensorSameNode]: ref.ownerNodeId === this.nodeId });
        this.track(input.requestId, {
          objectId: ref.objectId,
          address: ref.ownerAddress || this.address,
          sizeBytes: ref.sizeBytes,
          ...(ref.capability ? { capability: ref.capability } : {}),
        });
        return ref;
      },
      { kind: SpanKind.CLIENT },
    );
  }

  /**
   * Reads an object, in a `diffmesh.tensor.get` span: from shared memory when the ref names
   * this node, else by a Get stream from its owner.
   */
  async get(key: ObjectKey, range: GetOptions = {}): Promise<StoredTensor> {
    this.checkOpen();
    const ref = typeof key === 'string' ? undefined : key;
    const objectId = idOf(key);
    const sameNode = ref !== undefined && ref.ownerNodeId === this.nodeId;
    const attributes = {
      // Object ids start with the request id (`{request_id}:{name}:{unique}`).
      [ATTR.requestId]: objectId.slice(0, Math.max(0, objectId.indexOf(':'))),
      [ATTR.tensorObjectId]: objectId,
      ...(ref
        ? {
            [ATTR.tensorName]: ref.name,
            [ATTR.tensorOwnerAddress]: ref.ownerAddress,
            [ATTR.tensorOwnerNode]: ref.ownerNodeId,
            [ATTR.tensorSameNode]: sameNode,
          }
        : {}),
    };
    return withSpan(
      SPAN.tensorGet,
      attributes,
      async (span) => {
        if (ref && sameNode && (this.opts.sameNodeReads ?? true)) {
          const whole = await this.readShm(ref);
          if (whole) {
            this.counters.shmReads += 1;
            const [start, end] = rangeOf(ref.objectId, whole.byteLength, range);
            const data = start === 0 && end === whole.byteLength ? whole : whole.subarray(start, end);
            span.setAttributes({ [ATTR.tensorPath]: 'shm', [ATTR.tensorBytes]: data.byteLength });
            return { ref: copyRef(ref), data };
          }
        }
        const owner = this.ownerOf(ref ?? objectId);
        span.setAttributes({ [ATTR.tensorPath]: 'grpc', 'server.address': owner });
        // One buffer for all attempts: allocating 64 MiB costs tens of milliseconds.
        let buffer: Buffer | undefined;
        const into = (n: number): Buffer => (buffer && buffer.byteLength >= n ? buffer : (buffer = Buffer.allocUnsafe(n)));
        const result = await this.withOwner(owner, 'Get', (client) =>
          client.get(objectId, {
            into,
            ...(range.offset ? { offset: range.offset } : {}),
            ...(range.length ? { length: range.length } : {}),
            ...(ref?.checksum ? { expectedChecksum: ref.checksum } : {}),
            ...capabilityOf(key),
            ...this.transferOptions(),
          }),
        );
        this.counters.remoteReads += 1;
        span.setAttribute(ATTR.tensorBytes, result.data.byteLength);
        return { ref: result.ref, data: result.data };
      },
      { kind: SpanKind.CLIENT },
    );
  }

  async stat(key: ObjectKey): Promise<ObjectInfo> {
    this.checkOpen();
    const info = await this.withOwner(this.ownerOf(key), 'Stat', (client) => client.stat(idOf(key), capabilityOf(key)));
    checkRefChecksum(key, info.ref);
    return info;
  }

  async delete(key: ObjectKey): Promise<boolean> {
    this.checkOpen();
    const id = idOf(key);
    const deleted = await this.withOwner(this.ownerOf(key), 'Delete', (client) => client.delete(id, capabilityOf(key)));
    for (const [req, objects] of this.byRequest) {
      if (objects.delete(id) && objects.size === 0) this.byRequest.delete(req);
    }
    return deleted;
  }

  async deleteRequest(requestId: string): Promise<number> {
    this.checkOpen();
    const objects = this.byRequest.get(requestId);
    if (!objects) return 0;
    this.byRequest.delete(requestId);
    let n = 0;
    for (const t of objects.values()) {
      if (
        await this.withOwner(t.address, 'Delete', (client) => client.delete(t.objectId, t.capability ? { capability: t.capability } : {}))
      )
        n += 1;
    }
    return n;
  }

  async touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo> {
    this.checkOpen();
    if (ttlMs !== undefined && (!Number.isSafeInteger(ttlMs) || ttlMs < 0 || ttlMs > 0xffffffff)) {
      throw invalidParameter('ttl_ms', `must be a non-negative integer number of milliseconds, got ${ttlMs}`);
    }
    const info = await this.withOwner(this.ownerOf(key), 'Touch', (client) => client.touch(idOf(key), ttlMs ?? 0, capabilityOf(key)));
    checkRefChecksum(key, info.ref);
    return info;
  }

  async usage(): Promise<TensorStoreUsage> {
    let objects = 0;
    let bytes = 0;
    for (const m of this.byRequest.values()) {
      for (const t of m.values()) {
        objects += 1;
        bytes += t.sizeBytes;
      }
    }
    return { objects, bytes, capacityBytes: 0 };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const owner of this.owners.values()) {
      owner.breaker.shutdown();
      owner.client.close();
    }
    this.owners.clear();
    this.byRequest.clear();
  }

  /**
   * Puts an object through shared memory: writes its bytes to a new file in this node's
   * tensor-svc's `.incoming` folder and sends only the header and the file name; the service
   * verifies the bytes and takes the file over. Undefined when the object should go over gRPC
   * instead: the file cannot be written (no such folder, no permission, no space), the
   * service cannot see it (then never again for this client when the file is still there: its
   * directory is another service's), or the attempt failed transiently (the gRPC put retries).
   */
  private async putThroughShm(header: PutObjectHeader & { checksum: string }, data: Uint8Array): Promise<ObjectRef | undefined> {
    const name = randomBytes(12).toString('hex');
    const file = incomingPath(this.shmDir, name);
    try {
      const options = { flag: 'wx', mode: 0o640 } as const;
      if (data.byteLength <= SYNC_WRITE_MAX_BYTES) writeFileSync(file, data, options);
      else await writeFile(file, data, options);
    } catch (err) {
      removeQuietly(file);
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (code !== 'ENOENT') this.opts.log?.debug({ err, file }, 'tensor client: cannot write to shared memory; putting over gRPC');
      return undefined;
    }
    try {
      return await this.withOwner(this.address, 'Put', (client) => client.putObjectFile(header, data.byteLength, name), 1);
    } catch (raw) {
      const err = asDiffmeshError(raw);
      // The service cannot see the file. When this client cannot either, something deleted it
      // (the service's sweep of files it took for abandoned, under a long stall): put this
      // object over gRPC. When the file is still here, the service looks at another directory.
      if (err.code === Code.NOT_FOUND && err.field === 'shm_file') {
        if (existsSync(file)) {
          this.shmWritesOn = false;
          this.opts.log?.warn(
            { shmDir: this.shmDir, address: this.address },
            'tensor client: the tensor-svc does not see files in this shared-memory directory (another node id?); putting over gRPC from now on',
          );
        }
        return undefined;
      }
      if (isTransient(err)) return undefined;
      throw err;
    } finally {
      // The service took the file over; it is still here only when the answer never came.
      removeQuietly(file);
    }
  }

  /**
   * The bytes of a same-node object read from the owner's shared-memory file, or undefined
   * when the file is not there (deleted, spilled elsewhere, another user's, expired): the
   * owner then answers over gRPC. Throws DATA_LOSS when the bytes fail their checksum.
   */
  private async readShm(ref: ObjectRef): Promise<Buffer | undefined> {
    const file = objectPath(this.shmDir, ref.objectId);
    let fh;
    try {
      fh = await open(file, 'r');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (!FALLBACK_CODES.has(code)) this.opts.log?.warn({ err, file }, 'tensor client: cannot open shared-memory file; reading over gRPC');
      return undefined;
    }
    try {
      const st = await fh.stat();
      // tensor-svc sets a file's mtime to the object's expiry; past it, let the owner say so.
      if (st.size !== ref.sizeBytes || st.mtimeMs <= this.now()) return undefined;
      const buf = Buffer.allocUnsafe(ref.sizeBytes);
      let off = 0;
      while (off < buf.byteLength) {
        const { bytesRead } = await fh.read(buf, off, buf.byteLength - off, off);
        if (bytesRead === 0) return undefined; // truncated under us: ask the owner
        off += bytesRead;
      }
      const actual = formatChecksum(crc32c(buf));
      if (ref.checksum && actual !== ref.checksum) {
        throw new DiffmeshError(
          Code.DATA_LOSS,
          'CHECKSUM_MISMATCH',
          `object ${ref.objectId}: bytes in shared memory do not match their checksum (expected ${ref.checksum}, got ${actual})`,
          { metadata: { object_id: ref.objectId } },
        );
      }
      return buf;
    } finally {
      await fh.close();
    }
  }

  private ownerOf(key: ObjectKey): string {
    const address = typeof key === 'string' || !key.ownerAddress ? this.address : key.ownerAddress;
    if (!address) {
      throw new DiffmeshError(
        Code.FAILED_PRECONDITION,
        'INVALID_PARAMETER',
        `object ${idOf(key)}: no owner address (the ref names none and this client has no local tensor-svc)`,
        { metadata: { field: 'owner_address', object_id: idOf(key) } },
      );
    }
    return address;
  }

  private transferOptions(): { timeoutMs?: number } {
    return this.opts.transferTimeoutMs ? { timeoutMs: this.opts.transferTimeoutMs } : {};
  }

  private owner(address: string): Owner {
    let owner = this.owners.get(address);
    if (owner) return owner;
    const client = new TensorServiceClient(address, {
      ...(this.opts.tls ? { tls: this.opts.tls } : {}),
      ...(this.opts.chunkBytes !== undefined ? { chunkBytes: this.opts.chunkBytes } : {}),
      ...(this.opts.maxInflightBytes !== undefined ? { maxInflightBytes: this.opts.maxInflightBytes } : {}),
      ...(this.opts.unaryTimeoutMs !== undefined ? { unaryTimeoutMs: this.opts.unaryTimeoutMs } : {}),
    });
    const name = `tensor-svc ${address}`;
    const breaker = createBreaker((thunk: () => Promise<unknown>) => thunk(), { ...this.opts.breaker, name, counts: isTransportFailure });
    owner = { client, breaker };
    this.owners.set(address, owner);
    return owner;
  }

  /**
   * Runs one operation against `address` behind its breaker, retrying transient failures up
   * to `attempts` times in all. When the breaker opens between attempts (this operation's
   * failures, or others', tipped it), the caller gets the last failure the owner gave, not
   * BREAKER_OPEN.
   */
  private async withOwner<T>(
    address: string,
    op: string,
    fn: (client: TensorServiceClient) => Promise<T>,
    attempts = this.attempts,
  ): Promise<T> {
    const owner = this.owner(address);
    let last: DiffmeshError | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        return (await owner.breaker.fire(() => fn(owner.client))) as T;
      } catch (raw) {
        const err = asDiffmeshError(raw);
        if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed', { cause: err });
        if (err.reason === 'BREAKER_OPEN' && last) throw last;
        last = err;
        if (attempt >= attempts || !isTransient(err)) throw err;
        const delay = this.backoff(attempt, err.retryAfterMs);
        this.counters.retries += 1;
        trace.getSpan(otelContext.active())?.addEvent('retry', {
          attempt,
          'error.type': Code[err.code] ?? String(err.code),
          [ATTR.errorReason]: err.reason,
          'retry.delay_ms': delay,
        });
        this.opts.log?.debug(
          { address, op, attempt, delayMs: delay, code: err.code, reason: err.reason },
          'tensor transfer failed; retrying',
        );
        await sleep(delay);
      }
    }
  }

  private backoff(attempt: number, retryAfterMs: number | undefined): number {
    const exp = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
    const jittered = exp * (0.8 + Math.random() * 0.4);
    return Math.round(Math.min(this.maxDelayMs, Math.max(jittered, retryAfterMs ?? 0)));
  }

  private track(requestId: string, t: Tracked): void {
    let objects = this.byRequest.get(requestId);
    if (!objects) {
      const max = this.opts.maxTrackedRequests ?? 10_000;
      while (this.byRequest.size >= max) {
        const oldest = this.byRequest.keys().next();
        if (oldest.done) break;
        this.byRequest.delete(oldest.value);
      }
      this.byRequest.set(requestId, (objects = new Map()));
    }
    objects.set(t.objectId, t);
  }

  private checkOpen(): void {
    if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed');
  }
}

/**
 * Worth another attempt: the owner was unreachable or overloaded, or the transfer broke.
 * RESOURCE_EXHAUSTED only when the owner suggested a delay (a full store that may free up,
 * not an object larger than its capacity); an open breaker never (failing fast is its point).
 */
function isTransient(err: DiffmeshError): boolean {
  if (err.reason === 'BREAKER_OPEN' || err.reason === 'DRAINING') return false;
  switch (err.code) {
    case Code.UNAVAILABLE:
    case Code.DEADLINE_EXCEEDED:
    case Code.INTERNAL:
      return true;
    case Code.RESOURCE_EXHAUSTED:
      return err.retryAfterMs !== undefined;
    default:
      return false;
  }
}

/**
 * A failure to reach an owner, which its breaker counts: UNAVAILABLE, DEADLINE_EXCEEDED, and
 * INTERNAL raised by the transport (this client's TRANSPORT errors, or a gRPC status that
 * carries no google.rpc.Status from the service). An answer of the service — STORE_FULL,
 * OBJECT_NOT_FOUND, an INTERNAL it reports — shows the owner is up and never counts.
 */
function isTransportFailure(raw: unknown): boolean {
  const err = asDiffmeshError(raw);
  switch (err.code) {
    case Code.UNAVAILABLE:
    case Code.DEADLINE_EXCEEDED:
      return true;
    case Code.INTERNAL: {
      if (err.reason === 'TRANSPORT') return true;
      const md = (err.cause as { metadata?: unknown } | undefined)?.metadata;
      return md instanceof Metadata && md.get(STATUS_DETAILS_KEY).length === 0;
    }
    default:
      return false;
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

function idOf(key: ObjectKey): string {
  return typeof key === 'string' ? key : key.objectId;
}

/** The call option carrying a ref's capability (none for a bare id). */
function capabilityOf(key: ObjectKey): { capability?: string } {
  return typeof key !== 'string' && key.capability ? { capability: key.capability } : {};
}

function copyRef(ref: ObjectRef): ObjectRef {
  return { ...ref, shape: [...ref.shape] };
}

/** A ref whose checksum differs from the owner's names another version of the object. */
function checkRefChecksum(key: ObjectKey, actual: ObjectRef): void {
  if (typeof key !== 'string' && key.checksum && key.checksum !== actual.checksum) {
    throw new DiffmeshError(
      Code.DATA_LOSS,
      'CHECKSUM_MISMATCH',
      `object ${key.objectId}: the ref's checksum ${key.checksum} does not match the stored ${actual.checksum}`,
      { metadata: { object_id: key.objectId } },
    );
  }
}
