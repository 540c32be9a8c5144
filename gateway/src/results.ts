import { randomBytes } from 'node:crypto';
import type { Logger, ObjectRef } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';

interface Entry {
  ref: ObjectRef;
  expiresAt: number;
  timer: NodeJS.Timeout;
}

/**
 * Image results handed out as URLs. Only the pixels' ObjectRef is kept here; the bytes stay
 * in the tensor service that produced them (their TTL extended to match) and are encoded
 * as PNG when the URL is fetched. Entries expire after `ttlMs`, deleting the pixels. At most
 * `maxEntries` are kept: a new one evicts the oldest (its URL stops working, its pixels are
 * deleted), so the bytes held in the tensor services stay bounded.
 */
export class ResultStore {
  /** In insertion order, which is expiry order: every entry lives `ttlMs`. */
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly store: TensorStore,
    private readonly ttlMs: number,
    private readonly log: Logger,
    private readonly maxEntries = Infinity,
  ) {}

  /** Keeps `ref` fetchable for the TTL; returns its unguessable id. */
  async put(ref: ObjectRef): Promise<{ id: string; expiresAt: number }> {
    // The tensor service must keep the bytes as long as the URL is valid.
    await this.store.touch(ref, this.ttlMs);
    while (this.entries.size >= this.maxEntries) this.expire(this.entries.keys().next().value!);
    const id = randomBytes(16).toString('base64url');
    const expiresAt = Date.now() + this.ttlMs;
    const timer = setTimeout(() => this.expire(id), this.ttlMs);
    timer.unref();
    this.entries.set(id, { ref, expiresAt, timer });
    return { id, expiresAt };
  }

  get(id: string): ObjectRef | undefined {
    const e = this.entries.get(id);
    return e && e.expiresAt > Date.now() ? e.ref : undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  private expire(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    clearTimeout(e.timer);
    this.entries.delete(id);
    this.store
      .delete(e.ref)
      .catch((err: unknown) => this.log.debug({ err, objectId: e.ref.objectId }, 'could not delete an expired result'));
  }

  /** Forgets every entry (the tensor TTLs reap the bytes). */
  close(): void {
    for (const e of this.entries.values()) clearTimeout(e.timer);
    this.entries.clear();
  }
}
