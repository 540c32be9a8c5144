import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { crc32c } from '@node-rs/crc32';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Code, DiffmeshError, invalidParameter, type ObjectRef } from '@diffmesh/core';
import type { S3Location } from './durable-location.js';
import {
  checkKeyChecksum,
  DurableStoreBase,
  idOf,
  objectExpired,
  objectNotFound,
  piecesOf,
  storedRef,
  ttlOf,
  type DurableReader,
  type DurableStoreCommonOptions,
} from './durable-store.js';
import { formatBytes } from './memory-store.js';
import { objectFileName } from './shm-paths.js';
import { formatChecksum } from './tensor-service-client.js';
import type { ObjectInfo, ObjectKey, TensorStoreUsage } from './tensor-store.js';

/** Options of {@link S3TensorStore}. */
export interface S3TensorStoreOptions extends DurableStoreCommonOptions {
  location: S3Location;
  /**
   * Endpoint of an S3-compatible server (`http://127.0.0.1:9000`); absent = the SDK's
   * (AWS, or `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`). Path-style addressing is used with an
   * explicit endpoint.
   */
  endpoint?: string;
  /** Region; absent = the SDK's (`AWS_REGION`), else `us-east-1`. */
  region?: string;
  /** Path-style addressing (`endpoint/bucket/key`). Default: true with an explicit endpoint. */
  forcePathStyle?: boolean;
  /** Objects larger than this are uploaded in parts of this size (at least 5 MiB). Default 8 MiB. */
  partBytes?: number;
  /** Parts uploaded at once. Default 4. */
  queueSize?: number;
  /** Further S3 client settings (credentials come from the standard AWS_* chain unless given here). */
  client?: Partial<S3ClientConfig>;
}

export const DEFAULT_S3_PART_BYTES = 8 * 1024 * 1024;
const MIN_PART_BYTES = 5 * 1024 * 1024;

/** What the meta object of an object holds. */
interface MetaBody {
  ref: ObjectRef;
  ver: string;
  expiresAt: number;
}

/** Counters of an {@link S3TensorStore}, for tests and metrics. */
export interface S3TensorStoreStats {
  /** Objects uploaded in parts (multipart upload). */
  multipartUploads: number;
  /** Objects uploaded with one PutObject. */
  singleUploads: number;
}

/**
 * A {@link DurableStore} in an S3-compatible bucket. An object is two S3 objects under the
 * location's prefix: its bytes (`d/<id>.<version>`, each put a new version, in parts when
 * larger than `partBytes`) and a small JSON meta object (`m/<id>`: ref, version, expiry)
 * written after the bytes, so a reader never finds a meta whose bytes are incomplete (S3 reads
 * are strongly consistent after writes). Expiry is kept in the meta: a read past it reports
 * OBJECT_EXPIRED, and {@link sweep} (list and delete) removes what expired and bytes no meta
 * names (a put cut short). Touch rewrites only the meta. Capacity is counted by this process
 * (S3 has no atomic counters): the objects it put that are neither deleted nor expired.
 */
export class S3TensorStore extends DurableStoreBase {
  readonly kind = 's3' as const;
  private readonly s3: S3Client;
  private readonly bucket: string;
  private readonly base: string;
  private readonly partBytes: number;
  private readonly queueSize: number;
  /** Objects this process put: id → size and expiry (for capacity and usage). */
  private readonly held = new Map<string, { size: number; expiresAt: number }>();
  private reservedBytes = 0;
  private readonly counters: S3TensorStoreStats = { multipartUploads: 0, singleUploads: 0 };

  constructor(private readonly opts: S3TensorStoreOptions) {
    super(opts.location.uri, opts, 's3');
    this.bucket = opts.location.bucket;
    this.base = opts.location.prefix ? `${opts.location.prefix}/` : '';
    this.partBytes = Math.max(MIN_PART_BYTES, opts.partBytes ?? DEFAULT_S3_PART_BYTES);
    this.queueSize = opts.queueSize ?? 4;
    this.s3 = new S3Client({
      region: opts.region ?? 'us-east-1',
      ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
      forcePathStyle: opts.forcePathStyle ?? Boolean(opts.endpoint),
      // S3-compatible servers (MinIO, s3rver, Ceph…) do not all know the newer checksum
      // headers; diffmesh checks its own crc32c of every object anyway.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...opts.client,
    });
  }

  /** Upload counters since construction. */
  stats(): S3TensorStoreStats {
    return { ...this.counters };
  }

  async write(ref: ObjectRef, data: Uint8Array | AsyncIterable<Uint8Array>, opts: { ttlMs?: number } = {}): Promise<ObjectInfo> {
    this.checkOpen();
    const id = ref.objectId;
    if (!id) throw invalidParameter('object_id', 'is required');
    const size = ref.sizeBytes;
    const ttlMs = ttlOf(opts.ttlMs || ref.ttlMs, this.defaultTtlMs);
    this.reserve(size, ref.name);
    const ver = randomBytes(8).toString('hex');
    const dataKey = this.dataKey(id, ver);
    let uploaded = false;
    try {
      let crc = 0;
      let received = 0;
      const counted = async function* (src: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
        for await (const piece of src) {
          received += piece.byteLength;
          if (received > size) throw invalidParameter('data', `more than header.size_bytes (${size}) bytes`);
          crc = crc32c(piece, crc);
          yield piece;
        }
      };
      if (size <= this.partBytes) {
        // Small enough for one request: gather the pieces (a whole Uint8Array is used as it is).
        let body: Buffer;
        if (data instanceof Uint8Array) {
          body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
          received = body.byteLength;
          crc = crc32c(body);
        } else {
          const parts: Uint8Array[] = [];
          for await (const piece of counted(piecesOf(data, this.partBytes))) parts.push(Buffer.from(piece));
          body = Buffer.concat(parts);
        }
        this.checkBytes(ref, received, crc);
        await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: dataKey, Body: body, ContentLength: body.byteLength }));
        this.counters.singleUploads += 1;
      } else {
        const upload = new Upload({
          client: this.s3,
          params: { Bucket: this.bucket, Key: dataKey, Body: Readable.from(counted(piecesOf(data, this.partBytes))) },
          partSize: this.partBytes,
          queueSize: this.queueSize,
          leavePartsOnError: false,
        });
        await upload.done();
        uploaded = true;
        this.counters.multipartUploads += 1;
        this.checkBytes(ref, received, crc);
      }
      uploaded = true;
      const checksum = formatChecksum(crc);
      const stored = storedRef({ ...ref, checksum }, ttlMs, this.uri);
      const expiresAt = this.now() + ttlMs;
      const old = await this.readMeta(id).catch(() => undefined);
      await this.writeMeta(id, { ref: stored, ver, expiresAt });
      if (old && old.ver !== ver) await this.deleteKey(this.dataKey(id, old.ver)).catch(() => undefined);
      this.settle(id, size, expiresAt);
      return { ref: stored, expiresAt };
    } catch (err) {
      this.reservedBytes -= size;
      if (uploaded) await this.deleteKey(dataKey).catch(() => undefined);
      throw this.mapError(err, `put of ${id}`);
    }
  }

  async openRead(key: ObjectKey): Promise<DurableReader> {
    const meta = await this.live(key);
    return new S3Reader(this.s3, this.bucket, this.dataKey(meta.ref.objectId, meta.ver), meta, this.partBytes, (err) =>
      this.mapError(err, `read of ${meta.ref.objectId}`),
    );
  }

  async delete(key: ObjectKey): Promise<boolean> {
    this.checkOpen();
    const id = idOf(key);
    try {
      const meta = await this.readMeta(id);
      if (!meta) return false;
      await this.deleteKey(this.dataKey(id, meta.ver));
      await this.deleteKey(this.metaKey(id));
      this.held.delete(id);
      return this.now() < meta.expiresAt;
    } catch (err) {
      throw this.mapError(err, `delete of ${id}`);
    }
  }

  async deleteRequest(requestId: string): Promise<number> {
    this.checkOpen();
    let n = 0;
    try {
      for await (const key of this.list(`${this.base}m/${objectFileName(requestId)}:`)) {
        const id = this.idOfMetaKey(key);
        if (id !== undefined && id.startsWith(`${requestId}:`) && (await this.delete(id))) n += 1;
      }
    } catch (err) {
      throw this.mapError(err, `delete of request ${requestId}`);
    }
    return n;
  }

  async touch(key: ObjectKey, ttlMs?: number): Promise<ObjectInfo> {
    const meta = await this.live(key);
    const ttl = ttlMs === undefined || ttlMs === 0 ? meta.ref.ttlMs : ttlOf(ttlMs, this.defaultTtlMs);
    const ref = { ...meta.ref, ttlMs: ttl };
    const expiresAt = this.now() + ttl;
    try {
      await this.writeMeta(ref.objectId, { ref, ver: meta.ver, expiresAt });
    } catch (err) {
      throw this.mapError(err, `touch of ${ref.objectId}`);
    }
    const held = this.held.get(ref.objectId);
    if (held) held.expiresAt = expiresAt;
    return { ref, expiresAt };
  }

  async usage(): Promise<TensorStoreUsage> {
    this.forgetExpired();
    let bytes = this.reservedBytes;
    for (const h of this.held.values()) bytes += h.size;
    return { objects: this.held.size, bytes, capacityBytes: this.capacityBytes };
  }

  /**
   * Deletes expired objects under the prefix, and bytes no meta names that are older than a
   * minute (puts cut short); returns how many objects expired.
   */
  async sweep(): Promise<number> {
    if (this.closed) return 0;
    this.forgetExpired();
    const now = this.now();
    let n = 0;
    const current = new Set<string>();
    for await (const key of this.list(`${this.base}m/`)) {
      const id = this.idOfMetaKey(key);
      if (id === undefined) continue;
      const meta = await this.readMeta(id).catch(() => undefined);
      if (!meta) continue;
      if (now >= meta.expiresAt) {
        await this.deleteKey(this.dataKey(id, meta.ver)).catch(() => undefined);
        await this.deleteKey(key).catch(() => undefined);
        n += 1;
      } else {
        current.add(this.dataKey(id, meta.ver));
      }
    }
    for await (const key of this.list(`${this.base}d/`, true)) {
      if (!current.has(key.key) && key.lastModified < Date.now() - 60_000) await this.deleteKey(key.key).catch(() => undefined);
    }
    if (n > 0) this.opts.logger?.debug({ objects: n, store: this.uri }, 's3 store: deleted expired objects');
    return n;
  }

  protected closeClient(): Promise<void> {
    this.s3.destroy();
    return Promise.resolve();
  }

  // ---- internals ----

  private checkBytes(ref: ObjectRef, received: number, crc: number): void {
    if (received !== ref.sizeBytes)
      throw invalidParameter('header.size_bytes', `the data ended after ${received} of ${ref.sizeBytes} bytes`);
    const checksum = formatChecksum(crc);
    if (ref.checksum && ref.checksum !== checksum) {
      throw new DiffmeshError(
        Code.INVALID_ARGUMENT,
        'CHECKSUM_MISMATCH',
        `header.checksum: the bytes do not match ${ref.checksum} (got ${checksum})`,
        {
          metadata: { field: 'header.checksum', object_id: ref.objectId },
        },
      );
    }
  }

  private reserve(size: number, name: string): void {
    if (this.capacityBytes <= 0) {
      this.reservedBytes += size;
      return;
    }
    const what = `"${name}" (${formatBytes(size)})`;
    const metadata = { size_bytes: String(size), capacity_bytes: String(this.capacityBytes) };
    if (size > this.capacityBytes) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `s3 store ${this.uri} cannot hold ${what}: larger than its capacity of ${formatBytes(this.capacityBytes)}`,
        { metadata },
      );
    }
    this.forgetExpired();
    let used = this.reservedBytes;
    for (const h of this.held.values()) used += h.size;
    if (used + size > this.capacityBytes) {
      throw new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `s3 store ${this.uri} full: cannot hold ${what}; ${formatBytes(used)} of ${formatBytes(this.capacityBytes)} in use by ${this.held.size} objects`,
        { retryAfterMs: this.retryAfterMs, metadata: { ...metadata, used_bytes: String(used) } },
      );
    }
    this.reservedBytes += size;
  }

  private settle(id: string, size: number, expiresAt: number): void {
    this.reservedBytes -= size;
    this.held.set(id, { size, expiresAt });
  }

  private forgetExpired(): void {
    const now = this.now();
    for (const [id, h] of this.held) if (now >= h.expiresAt) this.held.delete(id);
  }

  protected async live(key: ObjectKey): Promise<MetaBody> {
    this.checkOpen();
    const id = idOf(key);
    let meta: MetaBody | undefined;
    try {
      meta = await this.readMeta(id);
    } catch (err) {
      throw this.mapError(err, `read of ${id}`);
    }
    if (!meta) throw objectNotFound(id, this.uri);
    if (this.now() >= meta.expiresAt) throw objectExpired(id);
    const ref = { ...meta.ref, durableUri: this.uri };
    checkKeyChecksum(key, ref);
    return { ...meta, ref };
  }

  private async readMeta(id: string): Promise<MetaBody | undefined> {
    try {
      const res = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.metaKey(id) }));
      const text = await res.Body!.transformToString('utf8');
      return JSON.parse(text) as MetaBody;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  private async writeMeta(id: string, meta: MetaBody): Promise<void> {
    const body = JSON.stringify(meta);
    await this.s3.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: this.metaKey(id),
        Body: body,
        ContentType: 'application/json',
        ContentLength: Buffer.byteLength(body),
      }),
    );
  }

  private async deleteKey(key: string): Promise<void> {
    await this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  private list(prefix: string): AsyncGenerator<string>;
  private list(prefix: string, withTimes: true): AsyncGenerator<{ key: string; lastModified: number }>;
  private async *list(prefix: string, withTimes = false): AsyncGenerator<string | { key: string; lastModified: number }> {
    let token: string | undefined;
    do {
      const res = await this.s3.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }),
      );
      for (const o of res.Contents ?? []) {
        if (!o.Key) continue;
        yield withTimes ? { key: o.Key, lastModified: o.LastModified?.getTime() ?? 0 } : o.Key;
      }
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
  }

  private metaKey(id: string): string {
    return `${this.base}m/${objectFileName(id)}`;
  }

  private dataKey(id: string, ver: string): string {
    return `${this.base}d/${objectFileName(id)}.${ver}`;
  }

  /** The object id of a meta key, when its name is an id as it is (not a digest of a long one). */
  private idOfMetaKey(key: string): string | undefined {
    const name = key.slice(`${this.base}m/`.length);
    if (name.startsWith('!')) return undefined;
    try {
      return decodeURIComponent(name);
    } catch {
      return undefined;
    }
  }

  /** S3 failures as diffmesh errors. */
  private mapError(err: unknown, what: string): Error {
    if (err instanceof DiffmeshError) return err;
    if (this.closed) return new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'tensor store is closed', { cause: err });
    const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number }; code?: string };
    const status = e.$metadata?.httpStatusCode;
    const name = e.name ?? '';
    const message = `s3 store ${this.uri}: ${what} failed: ${name ? `${name}: ` : ''}${e.message ?? String(err)}`;
    if (isNotFound(err)) return new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', message, { cause: err });
    if (['QuotaExceeded', 'EntityTooLarge', 'XMinioStorageFull', 'XMinioAdminBucketQuotaExceeded'].includes(name) || status === 507) {
      return new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'STORE_FULL', message, { retryAfterMs: this.retryAfterMs, cause: err });
    }
    if (status === 403 || status === 401) return new DiffmeshError(Code.PERMISSION_DENIED, 'INTERNAL', message, { cause: err });
    if (status === undefined || status >= 500 || status === 429 || name === 'TimeoutError') {
      return new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', message, { cause: err });
    }
    return new DiffmeshError(Code.INTERNAL, 'INTERNAL', message, { cause: err });
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/** Reads an object's bytes from one ranged GET while reads are sequential, opening another when they jump. */
class S3Reader implements DurableReader {
  readonly ref: ObjectRef;
  readonly expiresAt: number;
  readonly preferredReadBytes: number;
  private body: AsyncIterator<Uint8Array> | undefined;
  private stream: Readable | undefined;
  private pos = 0;
  private pending: Uint8Array | undefined;

  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
    private readonly key: string,
    meta: MetaBody,
    partBytes: number,
    private readonly mapError: (err: unknown) => Error,
  ) {
    this.ref = meta.ref;
    this.expiresAt = meta.expiresAt;
    this.preferredReadBytes = Math.min(partBytes, 4 * 1024 * 1024);
  }

  async readExactly(buf: Uint8Array, length: number, position: number): Promise<void> {
    if (length === 0) return;
    try {
      if (!this.body || position !== this.pos) await this.open(position);
      for (let done = 0; done < length;) {
        let piece = this.pending;
        this.pending = undefined;
        if (!piece) {
          const next = await this.body!.next();
          if (next.done) {
            throw new DiffmeshError(
              Code.DATA_LOSS,
              'CHECKSUM_MISMATCH',
              `object ${this.ref.objectId}: its bytes end at ${this.pos} of ${this.ref.sizeBytes}`,
              {
                metadata: { object_id: this.ref.objectId },
              },
            );
          }
          piece = next.value;
        }
        const n = Math.min(piece.byteLength, length - done);
        buf.set(piece.subarray(0, n), done);
        if (n < piece.byteLength) this.pending = piece.subarray(n);
        done += n;
        this.pos += n;
      }
    } catch (err) {
      await this.close();
      if (err instanceof DiffmeshError) throw err;
      if (isNotFound(err)) {
        throw new DiffmeshError(
          Code.NOT_FOUND,
          'OBJECT_NOT_FOUND',
          `object ${this.ref.objectId}: its bytes are gone (replaced or deleted while being read)`,
          {
            metadata: { object_id: this.ref.objectId },
          },
        );
      }
      throw this.mapError(err);
    }
  }

  private async open(position: number): Promise<void> {
    await this.close();
    const res = await this.s3.send(
      new GetObjectCommand({ Bucket: this.bucket, Key: this.key, Range: `bytes=${position}-${this.ref.sizeBytes - 1}` }),
    );
    this.stream = res.Body as Readable;
    this.body = this.stream[Symbol.asyncIterator]() as AsyncIterator<Uint8Array>;
    this.pos = position;
  }

  async close(): Promise<void> {
    this.stream?.destroy();
    this.stream = undefined;
    this.body = undefined;
    this.pending = undefined;
  }
}
