/**
 * Placement policy of the tensor store: which tier a new object goes to, and the capacity
 * each tier has left. Each put reserves its size up front: in shared memory up to the spill
 * threshold; then on the spill disk, up to its capacity; then in shared memory again up to
 * its capacity; otherwise RESOURCE_EXHAUSTED / STORE_FULL, naming both tiers' use.
 */
import { Code, DiffmeshError } from '@diffmesh/core';
import { formatBytes } from '@diffmesh/tensor-client';
import { isErrno } from './fs-util.js';
import type { ObjectHeader } from './object-header.js';

/** Where an object's bytes live: shared memory (tmpfs) or the spill directory on disk. */
export type Tier = 'memory' | 'disk';

/** Objects, bytes and limits of one tier. */
export interface TierUsage {
  objects: number;
  /** Bytes of stored objects (and of deleted ones still being read). */
  bytes: number;
  /** Bytes reserved by puts in progress. */
  reservedBytes: number;
  capacityBytes: number;
  dir: string;
}

/** The limits placement works with (the store's options). */
export interface PlacementLimits {
  shmDir: string;
  spillDir: string;
  memoryCapacityBytes: number;
  /** Memory use past which new objects go to disk while the disk has room. */
  spillThresholdBytes: number;
  /** 0 = no disk tier. */
  diskCapacityBytes: number;
  /** Retry-After suggested with STORE_FULL. */
  retryAfterMs: number;
}

interface TierState {
  readonly dir: string;
  readonly capacity: number;
  used: number;
  reserved: number;
}

/**
 * The bytes each tier holds and has reserved, and the policy that picks a tier for a new
 * object. A put's bytes are reserved when it starts ({@link reserve}), become stored bytes when
 * it is published ({@link settle}) or are given back when it fails ({@link unreserve}); a
 * stored object's bytes are released once it is gone and no reader holds it ({@link release}).
 */
export class TierPlacement {
  private readonly tiers: Record<Tier, TierState>;

  /** Throws a RangeError when the spill threshold exceeds the memory capacity. */
  constructor(private readonly limits: PlacementLimits) {
    if (limits.spillThresholdBytes > limits.memoryCapacityBytes) {
      throw new RangeError('tensor store: spillThresholdBytes must not exceed memoryCapacityBytes');
    }
    this.tiers = {
      memory: { dir: limits.shmDir, capacity: limits.memoryCapacityBytes, used: 0, reserved: 0 },
      disk: { dir: limits.spillDir, capacity: limits.diskCapacityBytes, used: 0, reserved: 0 },
    };
  }

  /** Picks the tier for a new object of `size` bytes and reserves them there; undefined when no tier has room. */
  reserve(size: number): Tier | undefined {
    const tier = this.place(size);
    if (tier) this.tiers[tier].reserved += size;
    return tier;
  }

  /** Gives back a put's reservation (after an abort or a failure). */
  unreserve(tier: Tier, bytes: number): void {
    this.tiers[tier].reserved -= bytes;
  }

  /** A published put's reservation becomes stored bytes. */
  settle(tier: Tier, bytes: number): void {
    const state = this.tiers[tier];
    state.reserved -= bytes;
    state.used += bytes;
  }

  /** Bytes of an object found again at start (restart recovery), counted whatever room is left. */
  restore(tier: Tier, bytes: number): void {
    this.tiers[tier].used += bytes;
  }

  /** Stored bytes that are gone (their object dropped, its last reader closed). */
  release(tier: Tier, bytes: number): void {
    this.tiers[tier].used -= bytes;
  }

  /** A tier's bytes, reservations, capacity and directory. */
  usage(tier: Tier): Omit<TierUsage, 'objects'> {
    const t = this.tiers[tier];
    return { bytes: t.used, reservedBytes: t.reserved, capacityBytes: t.capacity, dir: t.dir };
  }

  /** The STORE_FULL error for a put no tier has room for (without Retry-After when it could never fit). */
  storeFull(h: Pick<ObjectHeader, 'name' | 'sizeBytes'>): DiffmeshError {
    const mem = this.tiers.memory;
    const disk = this.tiers.disk;
    const what = `"${h.name}" (${formatBytes(h.sizeBytes)})`;
    const metadata = {
      size_bytes: String(h.sizeBytes),
      memory_used_bytes: String(mem.used + mem.reserved),
      memory_capacity_bytes: String(mem.capacity),
      disk_used_bytes: String(disk.used + disk.reserved),
      disk_capacity_bytes: String(disk.capacity),
    };
    const diskPart = disk.capacity > 0 ? `disk ${formatBytes(disk.capacity)}` : 'no disk spill configured';
    if (h.sizeBytes > Math.max(mem.capacity, disk.capacity)) {
      return new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `tensor store cannot hold ${what}: larger than its capacity (shared memory ${formatBytes(mem.capacity)}, ${diskPart})`,
        { metadata },
      );
    }
    const diskUse =
      disk.capacity > 0
        ? `disk ${formatBytes(disk.used + disk.reserved)} of ${formatBytes(disk.capacity)} in use`
        : 'no disk spill configured';
    return new DiffmeshError(
      Code.RESOURCE_EXHAUSTED,
      'STORE_FULL',
      `tensor store full: cannot hold ${what}; shared memory ${formatBytes(mem.used + mem.reserved)} of ${formatBytes(mem.capacity)} in use, ${diskUse}`,
      { retryAfterMs: this.limits.retryAfterMs, metadata },
    );
  }

  /** The error to report for a failed file operation on `tier`: STORE_FULL when the file system is out of space. */
  fsError(err: unknown, tier: Tier, header: Pick<ObjectHeader, 'name' | 'sizeBytes'>): Error {
    if (isErrno(err, 'ENOSPC', 'EDQUOT')) {
      return new DiffmeshError(
        Code.RESOURCE_EXHAUSTED,
        'STORE_FULL',
        `tensor store full: no space left in ${this.tiers[tier].dir} (${tier === 'memory' ? 'shared memory' : 'spill disk'}) while writing "${header.name}" (${formatBytes(header.sizeBytes)})`,
        { retryAfterMs: this.limits.retryAfterMs, metadata: { tier, dir: this.tiers[tier].dir } },
      );
    }
    return err instanceof Error ? err : new Error(String(err));
  }

  private place(size: number): Tier | undefined {
    const mem = this.tiers.memory;
    const disk = this.tiers.disk;
    const memUse = mem.used + mem.reserved;
    if (memUse + size <= this.limits.spillThresholdBytes) return 'memory';
    if (disk.capacity > 0 && disk.used + disk.reserved + size <= disk.capacity) return 'disk';
    if (memUse + size <= mem.capacity) return 'memory';
    return undefined;
  }
}
