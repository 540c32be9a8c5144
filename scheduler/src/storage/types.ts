/**
 * The scheduler's storage port: request state and task queues behind one interface, so
 * that a scheduler keeps nothing a crash can lose once a durable backend is configured, and
 * any number of schedulers can share one backend.
 *
 * Backends (one file each, chosen by {@link createSchedulerStore} from configuration):
 * `memory` (the embedded default, one process), `sqlite` (one node, survives a restart;
 * several processes of the node may share the file), `redis` and `jetstream` (several
 * schedulers share them). `common.ts` holds what they share (listeners, announcing a change,
 * fits, priority keys, the compare-and-set loop). `conformance.ts` is the suite all four pass.
 *
 * The model:
 * - A **request record** holds a request's whole story: its state (context, timings,
 *   result) and its events. It is changed only by {@link SchedulerStore.update}, a
 *   compare-and-set on the record's `revision`: the mutation is re-run on a fresh copy when
 *   another scheduler changed the record meanwhile, so the first of two competing
 *   transitions wins and the other sees the outcome (a stage finished twice counts once).
 * - A **queue item** is one stage task waiting for a free stage instance, at most one per
 *   (request, stage) at a time. Items of a pool are ordered larger `priority` first, then
 *   earliest `deadline` (items without one after those with one), then by arrival (FIFO);
 *   a released item keeps its place. (JetStream orders by priority, then arrival.) A lease may put
 *   tenants first ({@link LeaseQuery.tenants}: fair share), the order holding within each.
 * - A **lease** takes an item out of the order for `leaseMs`. Renewed, it stays taken;
 *   acknowledged, the item is gone; released (or not renewed in time), the item is back in
 *   its place. A lease is how a dispatch survives its scheduler: a crashed scheduler's
 *   tasks return to their queues when their leases run out.
 * - Queue changes ride on record updates ({@link QueueEffects}), atomically where the
 *   backend allows (memory, sqlite, redis); JetStream applies them in order after the
 *   record's compare-and-set, and the scheduler repairs a half-applied transition when it
 *   next leases the request's stale task (see `TaskTransitions.repair`).
 */
import { DEFAULT_TENANT, type ObjectRef, type RequestEvent } from '@diffmesh/core';
import type { RequestState } from '../types.js';

/** A request as stored: its state, its events, and what the store needs to move it on. */
export interface RequestRecord {
  /** Context (status, current stage, refs, …), timings, step and result. */
  state: RequestState;
  /** Every event so far, in order: event `i` has sequence number `i + 1`. */
  events: RequestEvent[];
  /** Compare-and-set revision, maintained by the store (1 for a new record). */
  revision: number;
  /**
   * Task generation: 1 for the first task, one more for each new task of the request (the
   * next stage, or a stage re-run because an input was lost). With the request's creation
   * time it is the de-duplication key of a task (`Nats-Msg-Id` on JetStream).
   */
  gen: number;
  /**
   * Try of the current stage's task (1 = first): every try that ran counts (failed, lost,
   * handed back); one an instance refused without running it does not.
   */
  attempt: number;
  /** Tries of the current stage that failed (counted against the scheduler's `maxAttempts`). */
  failures: number;
  /**
   * Tries of the current stage lost with their instance or scheduler (bounded by the
   * scheduler; not failures of the task). Hand-backs are in neither count. Missing in records
   * written before it existed: none.
   */
  lostTries?: number;
  /**
   * Lease token of the dispatch of the current task in progress, if any. A dispatch that
   * finds another token here took over a try whose scheduler was lost: that is a new try.
   */
  startedBy?: string;
  /** For each ref name, the stage index that produced it (a lost input re-runs its producer). */
  producers: Record<string, number>;
  /** Stages re-run so far because an input was lost (bounded by the scheduler). */
  reruns: number;
  /**
   * Objects the current stage's tries keep for a later try (a denoising checkpoint), by
   * name: given to the next try among its inputs, deleted when the stage completes.
   */
  checkpoint?: Record<string, ObjectRef>;
  /** Ms since the epoch after which a finished record may be forgotten; 0 while running. */
  expiresAt: number;
}

/** A stage task waiting in (or leased from) a pool's queue. */
export interface QueueItem {
  /** `{reqId}#{stageIndex}`: the task's identity; at most one item per id is stored. */
  id: string;
  reqId: string;
  stageIndex: number;
  /** {@link RequestRecord.gen} of the transition that made the item. */
  gen: number;
  /** Creation time of the request (with `id` and `gen`, the item's de-duplication key). */
  createdAt: number;
  pool: string;
  /** Queue key: the pool, or `pool@range` for a stage pinned to a version range. */
  queue: string;
  /** The version range an instance must satisfy (the queue's); none = any. */
  range?: string;
  /** The model the request asked for: only instances serving it may take the item. */
  model: string;
  /** Larger first (within its tenant, when the lease orders tenants). */
  priority: number;
  /** When the item was first queued (ms since the epoch). */
  enqueuedAt: number;
  /** Whose request it is ({@link DEFAULT_TENANT} for items stored before tenants existed). */
  tenant: string;
  /** The task's cost estimate (`task-cost.ts`), for fair share; missing in old items (estimated when dispatched). */
  cost?: number;
  /** The request's deadline (ms since the epoch): within a priority, the earliest goes first; none = after those with one. */
  deadline?: number;
}

/** The tenant of a request sent without one (tenancy off), and of items stored before tenants. */
export { DEFAULT_TENANT };

/** A taken item. Only the holder of its token may renew, acknowledge or release it. */
export interface Lease {
  item: QueueItem;
  /** Opaque; a lease that ran out and was taken by someone else no longer matches. */
  token: string;
  /** Times the item has been leased, this lease included (1 = first). */
  deliveries: number;
  /**
   * The request's record as this store last wrote it, when that write made the item (same
   * `gen`), so the dispatcher need not read it back; absent when the store does not know it.
   * It may be stale (another scheduler changed the request since): the next update's
   * compare-and-set finds out, as with any hint.
   */
  record?: RequestRecord;
}

/** One kind of instance that has a free slot: what it can take. */
export interface LeaseFit {
  /** Queue keys whose range the instance satisfies. */
  queues: readonly string[];
  /** Models it serves; undefined = any. */
  models?: readonly string[];
}

/** What a free slot asks the queue for: the best item of `pool` that one of `fits` can take. */
export interface LeaseQuery {
  pool: string;
  fits: readonly LeaseFit[];
  /** Who takes it (a scheduler id), for diagnostics. */
  owner: string;
  /**
   * Fair share: tenants in the order they are owed service, most deserving first. The lease
   * takes the best fitting item of the tenant with the smallest {@link tenantRank}: a tenant
   * not listed ranks first (the dispatcher lists only tenants that have had more than their
   * share), then the listed ones in order; within a rank, the usual order (larger priority,
   * then arrival). None or empty: the usual order across all tenants (first come, first served
   * within a priority).
   */
  tenants?: readonly string[];
}

/**
 * The rank of `tenant` in a lease's tenant order: 0 for a tenant not listed, else its place in
 * the list from 1. Stores take the fitting item with the smallest rank first.
 */
export function tenantRank(tenants: readonly string[] | undefined, tenant: string): number {
  if (!tenants || tenants.length === 0) return 0;
  return tenants.indexOf(tenant) + 1;
}

/**
 * Queue changes that go with a record update. The queue's length bound applies only at
 * admission ({@link SchedulerStore.admit}): work already accepted always moves on.
 */
export interface QueueEffects {
  /**
   * Adds an item unless one with its id is stored already (then nothing happens: an
   * enqueue repeated by a repair or by a racing scheduler is harmless).
   */
  enqueue?: QueueItem;
  /** Removes the leased item: its work is done (or its request ended). */
  ack?: Lease;
  /** Puts the leased item back in its place, to be taken again no sooner than `delayMs` from now. */
  release?: { lease: Lease; delayMs: number };
  /** Removes a stored item, leased or not (its request ended); nothing when there is none. */
  remove?: { pool: string; id: string };
}

/** Outcome of a mutation: the queue changes to apply, or `false` to write nothing. */
export type Mutation = QueueEffects | false;

/** A change to a record, as the store announces it. */
export interface RecordChange {
  reqId: string;
  revision: number;
  /** True when the request has ended (completed, failed, cancelled). */
  terminal: boolean;
  /**
   * The new record when the change was made in this process (no read needed); undefined
   * when another process made it (read it if you need it).
   */
  record?: RequestRecord;
}

/** How many items wait in a queue for one model (for stranded-task checks and metrics). */
export interface QueuedKind {
  pool: string;
  queue: string;
  model: string;
  /** Items waiting (not leased; JetStream counts an item released with a delay as leased until it is back). */
  count: number;
}

/**
 * Request state and task queues of one or more schedulers.
 *
 * Errors: `admit` throws `RESOURCE_EXHAUSTED` / `QUEUE_FULL` on a full queue; an unreachable backend throws
 * `UNAVAILABLE` / `TRANSPORT`; calls after `stop()` throw `UNAVAILABLE` / `DRAINING`.
 */
export interface SchedulerStore {
  /** `memory`, `sqlite`, `redis` or `jetstream`. */
  readonly backend: StoreBackend;
  /** False for memory: state dies with the process and is never shared. */
  readonly durable: boolean;

  /** Connects and creates what the backend needs (tables, streams, buckets). */
  start(): Promise<void>;
  /** Stops background work and disconnects. Idempotent. Stored state stays (except memory's). */
  stop(): Promise<void>;

  /** A request's record, or undefined when unknown or forgotten. */
  read(reqId: string): Promise<RequestRecord | undefined>;
  /** {@link read} without waiting, for a store that holds its records in this process (memory). */
  peek?(reqId: string): RequestRecord | undefined;

  /**
   * Stores a new request with its first task, atomically. When the task's queue already
   * holds `maxLength` waiting items, neither is stored and it throws `RESOURCE_EXHAUSTED` /
   * `QUEUE_FULL` (with `retryAfterMs`). When a record with the id exists already, nothing is
   * written and it is returned with `created: false` (idempotent submit).
   */
  admit(record: RequestRecord, first: QueueItem, maxLength: number): Promise<{ record: RequestRecord; created: boolean }>;

  /**
   * Changes a record: `mutate` gets a copy it may change (memory: the record itself; it must
   * decide before it changes anything) and returns the queue effects, or `false` to write
   * nothing. On a conflicting write by someone else it runs again on a fresh copy. The store
   * sets `revision`. Resolves with the record written, or undefined when the request is
   * unknown or `mutate` returned false.
   *
   * `hint` is a record of this request the caller read or wrote lately: a shared backend
   * tries the change on a copy of it first and saves a read (a stale hint only costs the
   * failed compare-and-set).
   */
  update(reqId: string, mutate: (record: RequestRecord) => Mutation, hint?: RequestRecord): Promise<RequestRecord | undefined>;

  /** Takes the best item a fit can run for {@link StoreOptions.leaseMs}, or undefined when none waits. */
  lease(query: LeaseQuery): Promise<Lease | undefined>;
  /**
   * Extends a lease to {@link StoreOptions.leaseMs} from now; false when it was lost (ran out
   * and was taken, or removed). JetStream cannot tell a lost lease from a held one and
   * answers true while its connection is up.
   */
  renew(lease: Lease): Promise<boolean>;
  /** Applies queue effects without a record change (e.g. dropping a stale item). */
  apply(effects: QueueEffects): Promise<void>;

  /**
   * Items waiting in queue `queue` as this process last saw them, for the `queued` event's
   * position: exact for memory, an estimate for shared backends (never a round trip).
   */
  waiting(queue: string): number;
  /** Items waiting per pool (not leased), for metrics and status. */
  queueSizes(): Promise<Record<string, number>>;
  /** Items waiting in a pool, by queue and model. */
  queuedKinds(pool: string): Promise<QueuedKind[]>;

  /** Calls `listener` after every record change, this process's and (as the backend allows) others'. */
  onChange(listener: (change: RecordChange) => void): () => void;
  /** Calls `listener` when an item may have become available in `pool` (enqueued, released, lease ran out). */
  onQueue(listener: (pool: string) => void): () => void;
}

/** Backends of {@link SchedulerStore}. */
export const STORE_BACKENDS = ['memory', 'sqlite', 'redis', 'jetstream'] as const;
export type StoreBackend = (typeof STORE_BACKENDS)[number];

/** Settings every backend takes. */
export interface StoreOptions {
  /**
   * How long a finished request stays readable at most; its record's `expiresAt` says
   * until when (JetStream also uses it for its bucket's age limit).
   */
  retentionMs: number;
  /** Most finished requests kept; past it the oldest go first (memory and sqlite). */
  maxRetained: number;
  /** How long a lease holds without renewal (JetStream: the consumers' AckWait). */
  leaseMs: number;
}

/**
 * The order token of an item's deadline within its priority (earliest first; none after every
 * deadline): fixed-width decimal ms, so stores that order by string order it too.
 */
export function deadlineKey(deadline: number | undefined): string {
  return deadline && deadline > 0 ? String(Math.min(Math.trunc(deadline), 9_999_999_999_999)).padStart(13, '0') : '9999999999999';
}

/** The id of a task's queue item. */
export function itemId(reqId: string, stageIndex: number): string {
  return `${reqId}#${stageIndex}`;
}

/** True for a terminal request status. */
export function isTerminalStatus(status: string): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}
