/**
 * The discovery seam: how diffmesh processes announce themselves and find each other.
 *
 * Every service registers one {@link Instance} per process (name, semver version, gRPC
 * address, node, pool, stage, models, capacity). Watchers — the scheduler, the gateway,
 * `diffmesh ps` — list instances and follow them coming and going. Two backends implement
 * it: in-process memory (the embedded default) and NATS (the NATS micro-service protocol,
 * `$SRV.PING`/`$SRV.INFO`/`$SRV.STATS`). Both are reached through `createDiscovery`.
 */
import type { StageName } from '@diffmesh/core';

/**
 * What an instance does: a pipeline stage, or one of the mesh's other roles.
 * Stage workers use the stage they run (e.g. `denoising`).
 */
export type InstanceStage = StageName | 'scheduler' | 'tensor' | 'gateway';

/** Every value of {@link InstanceStage}. */
export const INSTANCE_STAGES: readonly InstanceStage[] = [
  'text_encoding',
  'text_encoding_2',
  'image_encoding',
  'denoising',
  'vae_decoding',
  'scheduler',
  'tensor',
  'gateway',
];

/**
 * A registered service instance: one process serving one role.
 *
 * On NATS the fields travel as the micro-service's name, version and metadata
 * (`grpc_address`, `node_id`, `pool`, `stage`, `models` as a comma list, `capacity`,
 * `tensor_address`, `instance_id`); any other metadata key lands in {@link metadata}.
 */
export interface InstanceInfo {
  /**
   * Unique id of the instance within the mesh (`[A-Za-z0-9_-]`). When a registration does
   * not give one, the backend assigns it (on NATS: the micro-service id, so
   * `$SRV.INFO.<name>.<id>` addresses exactly this instance).
   */
  id: string;
  /** Service kind, a NATS name token (`[A-Za-z0-9_-]`), e.g. `dit-svc`, `scheduler`. */
  name: string;
  /** Semantic version of the service, e.g. `1.4.0`; plans may pin a range ({@link matchesVersion}). */
  version: string;
  /** Node (machine or pod host) the instance runs on; tensors are node-local. */
  nodeId: string;
  /** Worker pool the instance takes tasks for, e.g. `dit-tiny`; `''` for non-workers. */
  pool: string;
  /** What the instance does. */
  stage: InstanceStage;
  /** gRPC address clients dial, `host:port`. */
  grpcAddress: string;
  /** Models the instance serves (exact names); empty when not applicable. */
  models: string[];
  /** Tasks the instance runs at once (its free slots when idle); 0 = takes no work. */
  capacity: number;
  /** gRPC address of the tensor-svc on the instance's node, when there is one. */
  tensorAddress?: string;
  /** Free-form string metadata (keys must not collide with the reserved ones). */
  metadata: Record<string, string>;
}

/** What a service passes to {@link Discovery.register}: an {@link InstanceInfo} whose id and metadata are optional. */
export type InstanceRegistration = Omit<InstanceInfo, 'id' | 'metadata'> & {
  /** Instance id; assigned by the backend when absent. */
  id?: string;
  metadata?: Record<string, string>;
};

/**
 * Current load of an instance. Counts are non-negative finite numbers; further numeric
 * gauges (e.g. `memoryBytes`) may be added freely.
 */
export interface InstanceLoad {
  /** Tasks running now. */
  inFlight: number;
  /** Tasks accepted and waiting inside the instance. */
  queued?: number;
  [gauge: string]: number | undefined;
}

/** An instance as a watcher sees it: its registration plus what discovery last observed. */
export interface Instance extends InstanceInfo {
  /** Load last reported (pushed with {@link Registration.update} or read from the load function). */
  load?: InstanceLoad;
  /** ISO time the instance registered (on NATS: the micro-service's `started`). */
  startedAt?: string;
  /**
   * NATS only: the micro-service id, which addresses this instance in
   * `$SRV.PING|INFO|STATS.<name>.<serviceId>`. Equal to `id` unless the registration chose its id.
   */
  serviceId?: string;
}

/**
 * A change in the set of instances.
 * - `up`: an instance appeared (or, for a new subscriber, was already there);
 * - `down`: it unregistered, or (NATS) stopped answering polls;
 * - `updated`: its load or metadata changed.
 */
export interface DiscoveryEvent {
  type: 'up' | 'down' | 'updated';
  instance: Instance;
  /**
   * Why an instance is `down`: it said goodbye (`unregistered`), its id was registered again by
   * a new process (`restarted`), or it missed polls (`unanswered`: dead, cut off from NATS, or
   * only too busy to answer in time — a caller with its own connection to it can tell which).
   */
  why?: DownReason;
}

/** Why an instance went `down` (see {@link DiscoveryEvent.why}). */
export type DownReason = 'unregistered' | 'restarted' | 'unanswered';

/** Receives {@link DiscoveryEvent}s. Exceptions (and rejections) are logged, never propagated. */
export type DiscoveryListener = (event: DiscoveryEvent) => void | Promise<void>;

/** Options of {@link Discovery.subscribe}. */
export interface SubscribeOptions {
  /**
   * Deliver an `up` event for every instance already known before any later event, so a
   * subscriber has no gap between listing and following. Default true.
   */
  replay?: boolean;
}

/** Narrows {@link Discovery.instances}. Every given field must match. */
export interface InstanceFilter {
  name?: string;
  /** A semver range (`^1.2.0`, `>=2 <3`, `1.x`); see {@link matchesVersion}. */
  version?: string;
  pool?: string;
  stage?: InstanceStage;
  /** The instance serves this model. */
  model?: string;
  nodeId?: string;
}

/**
 * Supplies an instance's current load on demand (when a watcher polls or lists). Must be
 * cheap and synchronous; a throwing function is treated as "no load reported".
 */
export type LoadFn = () => InstanceLoad;

/** A live registration, returned by {@link Discovery.register}. */
export interface Registration {
  /** The instance as registered, with its final id. */
  readonly instance: InstanceInfo;
  /** Publishes the instance's current load (watchers see an `updated` event). */
  update(load: InstanceLoad): void;
  /**
   * Unregisters: watchers see `down` at once (on NATS, through a `down` notice rather than
   * after missed polls). Idempotent.
   */
  stop(): Promise<void>;
}

/**
 * Service registration and discovery.
 *
 * Implementations never throw into listeners or from background work; failures are logged.
 * `close()` unregisters every registration made through this object and releases the
 * backend (on NATS: drains the connection it owns). It is idempotent.
 */
export interface Discovery {
  /** Backend name, for logs: `memory` or `nats`. */
  readonly backend: 'memory' | 'nats';
  /**
   * Registers an instance. Rejects with a `DiffmeshError` (`INVALID_ARGUMENT`) naming the
   * field when the registration is invalid. `loadFn`, when given, is asked for the load
   * whenever someone reads it; otherwise the last {@link Registration.update} is reported.
   */
  register(info: InstanceRegistration, loadFn?: LoadFn): Promise<Registration>;
  /**
   * Instances currently known, sorted by name, version and id. On NATS the first call
   * starts watching and waits for the first poll.
   */
  instances(filter?: InstanceFilter): Promise<Instance[]>;
  /** Follows instances coming and going; returns the unsubscribe function. */
  subscribe(listener: DiscoveryListener, opts?: SubscribeOptions): () => void;
  /** Polls now (NATS) and resolves when the view is up to date; a no-op in memory. */
  refresh(): Promise<void>;
  /** Unregisters everything registered here and releases the backend. Idempotent. */
  close(): Promise<void>;
}
