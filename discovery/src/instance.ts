/**
 * Backend-independent pieces of discovery: validating registrations, version ranges,
 * filters, the metadata encoding shared with the NATS micro-service protocol, and a
 * listener set that never lets a listener's failure escape.
 */
import semver from 'semver';
import { invalidParameter, type Logger } from '@diffmesh/core';
import {
  INSTANCE_STAGES,
  type DiscoveryEvent,
  type DiscoveryListener,
  type Instance,
  type InstanceFilter,
  type InstanceInfo,
  type InstanceLoad,
  type InstanceRegistration,
} from './types.js';

/** Metadata keys the NATS registration writes itself; user metadata may not use them. */
export const RESERVED_METADATA_KEYS = [
  'instance_id',
  'grpc_address',
  'node_id',
  'pool',
  'stage',
  'models',
  'capacity',
  'tensor_address',
] as const;

const RESERVED = new Set<string>(RESERVED_METADATA_KEYS);
/** NATS micro-service names and ids, also used in subjects: no dots, spaces or wildcards. */
const TOKEN = /^[A-Za-z0-9_-]+$/;

/**
 * True when `instance.version` satisfies the semver `range` (`^1.2.0`, `~1.4`, `>=2 <3`,
 * `1.x`; `*` or `''` match every release). Prereleases match only when the range names one
 * on the same major.minor.patch, or with `includePrerelease`. Throws a `DiffmeshError`
 * (`INVALID_ARGUMENT`) for a malformed range, so a bad pin fails loudly instead of
 * silently matching nothing.
 */
export function matchesVersion(instance: { version: string }, range: string, opts: { includePrerelease?: boolean } = {}): boolean {
  if (semver.validRange(range) === null) {
    throw invalidParameter('version', `"${range}" is not a valid semver range`);
  }
  return semver.satisfies(instance.version, range, { includePrerelease: opts.includePrerelease ?? false });
}

/** True when the instance matches every field the filter gives. */
export function matchesFilter(instance: InstanceInfo, filter: InstanceFilter = {}): boolean {
  if (filter.name !== undefined && instance.name !== filter.name) return false;
  if (filter.pool !== undefined && instance.pool !== filter.pool) return false;
  if (filter.stage !== undefined && instance.stage !== filter.stage) return false;
  if (filter.nodeId !== undefined && instance.nodeId !== filter.nodeId) return false;
  if (filter.model !== undefined && !instance.models.includes(filter.model)) return false;
  if (filter.version !== undefined && !matchesVersion(instance, filter.version)) return false;
  return true;
}

/** Sorts by name, then semver (ascending), then id. */
export function compareInstances(a: InstanceInfo, b: InstanceInfo): number {
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  // Most instances of a name share a version: parse only when they differ.
  if (a.version !== b.version) {
    const v = semver.compare(a.version, b.version);
    if (v !== 0) return v;
  }
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * Checks a registration and returns a normalised copy (metadata defaulted, arrays copied).
 * Throws `DiffmeshError` `INVALID_ARGUMENT` naming the first bad field.
 */
export function validateRegistration(info: InstanceRegistration): InstanceRegistration & { metadata: Record<string, string> } {
  const str = (field: string, v: unknown, allowEmpty = false): void => {
    if (typeof v !== 'string') throw invalidParameter(field, 'must be a string');
    if (!allowEmpty && v.length === 0) throw invalidParameter(field, 'is required');
  };
  if (info.id !== undefined) {
    str('id', info.id);
    if (!TOKEN.test(info.id)) throw invalidParameter('id', `"${info.id}" may only contain letters, digits, "-" and "_"`);
  }
  str('name', info.name);
  if (!TOKEN.test(info.name)) throw invalidParameter('name', `"${info.name}" may only contain letters, digits, "-" and "_"`);
  str('version', info.version);
  if (semver.valid(info.version) === null) throw invalidParameter('version', `"${info.version}" is not a semantic version (e.g. 1.2.0)`);
  str('nodeId', info.nodeId);
  str('pool', info.pool, true);
  if (!INSTANCE_STAGES.includes(info.stage)) {
    throw invalidParameter('stage', `"${String(info.stage)}" is not one of ${INSTANCE_STAGES.join(', ')}`);
  }
  str('grpcAddress', info.grpcAddress);
  if (!Array.isArray(info.models)) throw invalidParameter('models', 'must be an array of model names');
  for (const m of info.models) {
    if (typeof m !== 'string' || m.length === 0 || m.includes(',')) {
      throw invalidParameter('models', `${JSON.stringify(m)} is not a model name (non-empty, no commas)`);
    }
  }
  if (!Number.isInteger(info.capacity) || info.capacity < 0) {
    throw invalidParameter('capacity', `must be a non-negative integer (got ${String(info.capacity)})`);
  }
  if (info.tensorAddress !== undefined) str('tensorAddress', info.tensorAddress);
  const metadata = info.metadata ?? {};
  for (const [k, v] of Object.entries(metadata)) {
    if (RESERVED.has(k)) throw invalidParameter(`metadata.${k}`, 'is reserved for discovery');
    if (typeof v !== 'string') throw invalidParameter(`metadata.${k}`, 'must be a string');
  }
  return { ...info, models: [...info.models], metadata: { ...metadata } };
}

/** Checks a load report; throws `INVALID_ARGUMENT` naming the bad gauge. */
export function validateLoad(load: InstanceLoad): InstanceLoad {
  if (load === null || typeof load !== 'object') throw invalidParameter('load', 'must be an object');
  if (typeof load.inFlight !== 'number') throw invalidParameter('load.inFlight', 'is required');
  const out: InstanceLoad = { inFlight: 0 };
  for (const [k, v] of Object.entries(load)) {
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
      throw invalidParameter(`load.${k}`, `must be a non-negative finite number (got ${String(v)})`);
    }
    out[k] = v;
  }
  return out;
}

/** The micro-service metadata that carries an instance (see {@link InstanceInfo}). */
export function toServiceMetadata(info: InstanceInfo, explicitId: boolean): Record<string, string> {
  const md: Record<string, string> = {
    ...info.metadata,
    grpc_address: info.grpcAddress,
    node_id: info.nodeId,
    pool: info.pool,
    stage: info.stage,
    models: info.models.join(','),
    capacity: String(info.capacity),
  };
  if (info.tensorAddress !== undefined) md.tensor_address = info.tensorAddress;
  if (explicitId) md.instance_id = info.id;
  return md;
}

/** A micro-service as `$SRV.PING`/`INFO`/`STATS` describe it. */
export interface ServiceIdentityLike {
  name: string;
  id: string;
  version: string;
  metadata?: Record<string, string> | null;
}

/**
 * Reads an instance back from a micro-service identity. Returns a string saying why when
 * the service is not a diffmesh instance (no `grpc_address`) or its metadata is malformed.
 */
export function fromServiceIdentity(s: ServiceIdentityLike): InstanceInfo | string {
  const md = s.metadata ?? {};
  if (typeof s.name !== 'string' || typeof s.id !== 'string' || typeof s.version !== 'string') return 'malformed identity';
  if (!md.grpc_address) return 'no grpc_address metadata (not a diffmesh instance)';
  if (semver.valid(s.version) === null) return `version "${s.version}" is not semver`;
  const stage = md.stage as InstanceInfo['stage'];
  if (!INSTANCE_STAGES.includes(stage)) return `unknown stage "${String(md.stage)}"`;
  const capacity = Number(md.capacity ?? '0');
  if (!Number.isInteger(capacity) || capacity < 0) return `capacity "${String(md.capacity)}" is not a non-negative integer`;
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(md)) if (!RESERVED.has(k)) metadata[k] = v;
  const info: InstanceInfo = {
    id: md.instance_id || s.id,
    name: s.name,
    version: s.version,
    nodeId: md.node_id ?? '',
    pool: md.pool ?? '',
    stage,
    grpcAddress: md.grpc_address,
    models: md.models ? md.models.split(',').filter((m) => m.length > 0) : [],
    capacity,
    metadata,
  };
  if (md.tensor_address) info.tensorAddress = md.tensor_address;
  return info;
}

/** Structural equality of two JSON-like values (instances, loads). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** A deep copy, so callers cannot mutate a backend's view. */
export function cloneInstance(i: Instance): Instance {
  const c: Instance = { ...i, models: [...i.models], metadata: { ...i.metadata } };
  if (i.load) c.load = { ...i.load };
  return c;
}

/**
 * Listeners of one discovery object. `emit` calls each listener in subscription order,
 * catches what it throws or rejects, and logs it: a broken listener never breaks
 * discovery or the other listeners.
 */
export class ListenerSet {
  private readonly listeners = new Set<DiscoveryListener>();

  constructor(private readonly log: Logger) {}

  get size(): number {
    return this.listeners.size;
  }

  add(listener: DiscoveryListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  has(listener: DiscoveryListener): boolean {
    return this.listeners.has(listener);
  }

  clear(): void {
    this.listeners.clear();
  }

  emit(event: DiscoveryEvent): void {
    for (const l of [...this.listeners]) this.call(l, event);
  }

  /** Calls one listener with a copy of the event, guarding it. */
  call(listener: DiscoveryListener, event: DiscoveryEvent): void {
    const ev: DiscoveryEvent = { type: event.type, instance: cloneInstance(event.instance), ...(event.why ? { why: event.why } : {}) };
    try {
      const r = listener(ev);
      if (r && typeof r.then === 'function') {
        r.then(undefined, (err: unknown) => this.report(err, ev));
      }
    } catch (err) {
      this.report(err, ev);
    }
  }

  private report(err: unknown, ev: DiscoveryEvent): void {
    this.log.error({ err, event: ev.type, instanceId: ev.instance.id }, 'discovery listener failed');
  }
}
