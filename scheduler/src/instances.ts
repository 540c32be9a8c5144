import semver from 'semver';
import type { AdapterReport, StageName } from '@diffmesh/core';
import type { LeaseFit } from './storage/types.js';
import type { StageInstance } from './types.js';

/** An instance this scheduler dispatches to, with its load. */
export interface InstanceSlot {
  instance: StageInstance;
  /** Tasks dispatched on this slot and not yet finished. */
  active: number;
  /**
   * Slots this one replaced (the instance came back under the same id) while they still ran
   * tasks: those tasks run on the same worker, so they count against this slot's capacity.
   */
  replaced: InstanceSlot[];
  /** Dispatch counter value of the last task sent here (spreads ties round-robin). */
  lastUsed: number;
  /** Leaving: gets no new work, removed once its running tasks finish. */
  retiring: boolean;
  /** Stops the instance's availability calls (see {@link StageInstance.onAvailable}). */
  unwatch?: () => void;
  /** What it can take from its pool's queues, worked out once (see {@link InstanceSlots.fits}). */
  fit?: { queues: ReadonlyArray<{ key: string; range?: string }>; value: { fit: LeaseFit; sig: string } | undefined };
}

/**
 * An instance another scheduler dispatches to (it holds the instance's one Work stream).
 * It cannot take work from this scheduler, but its pool is served: admission accepts
 * requests for it, and tasks waiting for it are not stranded.
 */
export interface ForeignInstance {
  id: string;
  pool: string;
  stage: StageName;
  version: string;
  nodeId: string;
  models: readonly string[];
  capacity: number;
  address?: string;
}

/** What admission and stranded checks need of an instance, wherever it is held. */
type Serving = Pick<ForeignInstance, 'version' | 'models'>;

/** Tasks running on a slot's worker: its own and those of the slots it replaced. */
export function busy(slot: InstanceSlot): number {
  let n = slot.active;
  for (const r of slot.replaced) n += r.active;
  return n;
}

/** True when the instance serves `model` (an instance with no models listed serves any). */
export function serves(instance: Serving, model: string): boolean {
  return instance.models.length === 0 || instance.models.includes(model);
}

/** Answers of {@link satisfies} by range, then version (a cluster has a few of each). */
const satisfied = new Map<string, Map<string, boolean>>();
/** Distinct (range, version) pairs kept before the cache starts again. */
const SATISFIED_MAX = 4096;
let satisfiedSize = 0;

/**
 * `semver.satisfies(version, range, { includePrerelease: true })`, remembered: it parsed the
 * range and the version on every call, and dispatch asks it per free instance per task.
 */
export function satisfies(version: string, range: string): boolean {
  let byVersion = satisfied.get(range);
  const known = byVersion?.get(version);
  if (known !== undefined) return known;
  const ok = semver.satisfies(version, range, { includePrerelease: true });
  if (satisfiedSize >= SATISFIED_MAX) {
    satisfied.clear();
    satisfiedSize = 0;
    byVersion = undefined;
  }
  if (!byVersion) {
    byVersion = new Map();
    satisfied.set(range, byVersion);
  }
  byVersion.set(version, ok);
  satisfiedSize += 1;
  return ok;
}

/** True when no range is given or the instance's version satisfies it. */
export function versionMatches(instance: Serving, range: string | undefined): boolean {
  return !range || satisfies(instance.version, range);
}

/**
 * The stage instances a scheduler knows, per pool: the ones it dispatches to (slots, with
 * their load) and the ones other schedulers hold. Capacity is enforced here: a slot is free
 * while `active < capacity`, and each instance is dispatched to by one scheduler only.
 */
export class InstanceSlots {
  private readonly slots = new Map<string, Map<string, InstanceSlot>>();
  private readonly foreign = new Map<string, Map<string, ForeignInstance>>();
  private dispatches = 0;

  /**
   * @param onChange called with a pool whose instances changed (dispatch may proceed, or
   *   waiting tasks may have lost the last instance that could run them)
   */
  constructor(private readonly onChange: (pool: string, how: 'added' | 'removed') => void) {}

  /**
   * Makes an instance available for dispatch in its pool. An instance added again under the
   * id of one that still runs tasks (it left discovery and came back) takes its place: the
   * old one gets no new work and is closed once its tasks finish, and those tasks count
   * against the new one's capacity until then.
   */
  add(instance: StageInstance): void {
    const pool = this.poolSlots(instance.pool);
    const old = pool.get(instance.id);
    const replaced = old ? [old, ...old.replaced].filter((r) => r.active > 0) : [];
    const slot: InstanceSlot = { instance, active: 0, replaced, lastUsed: 0, retiring: false };
    // Nothing else dispatches when a breaker lets work through again, and tasks may be
    // waiting for it (dispatched after the breaker has finished changing state).
    slot.unwatch = instance.onAvailable?.(() => queueMicrotask(() => this.onChange(instance.pool, 'added')));
    pool.set(instance.id, slot);
    this.foreign.get(instance.pool)?.delete(instance.id);
    if (old) {
      old.unwatch?.();
      old.retiring = true;
      if (old.active === 0) this.release(old);
    }
    this.onChange(instance.pool, 'added');
  }

  /** Stops dispatching to an instance (tasks running on it fail and are retried). */
  remove(id: string): void {
    for (const pool of this.slots.values()) {
      const slot = pool.get(id);
      if (!slot) continue;
      this.release(slot);
      this.onChange(slot.instance.pool, 'removed');
    }
  }

  /**
   * Graceful removal (the instance is draining): no new work, and it is removed once the
   * tasks it runs have finished. A broken connection still fails them at once.
   */
  retire(id: string): void {
    for (const pool of this.slots.values()) {
      const slot = pool.get(id);
      if (!slot) continue;
      slot.retiring = true;
      if (slot.active === 0) this.release(slot);
      this.onChange(slot.instance.pool, 'removed');
    }
  }

  /** Records an instance held by another scheduler (see {@link ForeignInstance}). */
  addForeign(instance: ForeignInstance): void {
    if (this.slots.get(instance.pool)?.get(instance.id)) return;
    let pool = this.foreign.get(instance.pool);
    if (!pool) {
      pool = new Map();
      this.foreign.set(instance.pool, pool);
    }
    pool.set(instance.id, instance);
    this.onChange(instance.pool, 'added');
  }

  /** Forgets an instance held by another scheduler (it left discovery, or this one took it). */
  removeForeign(id: string): void {
    for (const [pool, m] of this.foreign) {
      if (m.delete(id)) this.onChange(pool, 'removed');
    }
  }

  /** A task was sent to `slot`. */
  took(slot: InstanceSlot): void {
    slot.active += 1;
    this.dispatches += 1;
    slot.lastUsed = this.dispatches;
  }

  /** A task on `slot` ended (or was never sent). */
  done(slot: InstanceSlot): void {
    slot.active -= 1;
    if (slot.retiring && slot.active === 0) this.release(slot);
  }

  /** Instances of a pool this scheduler dispatches to. */
  of(pool: string): InstanceSlot[] {
    return [...(this.slots.get(pool)?.values() ?? [])];
  }

  /** Instances of a pool other schedulers dispatch to. */
  foreignOf(pool: string): ForeignInstance[] {
    return [...(this.foreign.get(pool)?.values() ?? [])];
  }

  /** Every pool with a slot or a foreign instance. */
  pools(): string[] {
    return [...new Set([...this.slots.keys(), ...this.foreign.keys()])];
  }

  /** Instances of a pool that may get a task now. */
  free(pool: string): InstanceSlot[] {
    const out: InstanceSlot[] = [];
    for (const s of this.slots.get(pool)?.values() ?? []) {
      if (!s.retiring && busy(s) < s.instance.capacity && s.instance.available?.() !== false && s.instance.probing?.() !== true)
        out.push(s);
    }
    return out;
  }

  /**
   * What the free slots can take, one fit per kind of instance: the pool's queues whose
   * range its version satisfies (`queues` lists the pool's queue keys with their ranges),
   * and its models.
   */
  fits(free: InstanceSlot[], queues: ReadonlyArray<{ key: string; range?: string }>): LeaseFit[] {
    // On every dispatch: each slot's fit is worked out once (an instance's version and models
    // do not change, nor do the plans' queues), and the common case is one kind of instance.
    if (free.length === 1) {
      const f = this.fitOf(free[0], queues);
      return f ? [f.fit] : [];
    }
    const out = new Map<string, LeaseFit>();
    for (const s of free) {
      const f = this.fitOf(s, queues);
      if (f && !out.has(f.sig)) out.set(f.sig, f.fit);
    }
    return [...out.values()];
  }

  private fitOf(s: InstanceSlot, queues: ReadonlyArray<{ key: string; range?: string }>): { fit: LeaseFit; sig: string } | undefined {
    if (s.fit?.queues === queues) return s.fit.value;
    const keys = queues.filter((q) => versionMatches(s.instance, q.range)).map((q) => q.key);
    const models = s.instance.models.length === 0 ? undefined : [...s.instance.models].sort();
    const value =
      keys.length === 0
        ? undefined
        : { fit: { queues: keys, ...(models ? { models } : {}) }, sig: `${keys.join('\u0000')}\u0001${models?.join('\u0000') ?? '*'}` };
    s.fit = { queues, value };
    return value;
  }

  /** Healthy instances of a pool, here or held elsewhere (admission). */
  healthy(pool: string): Serving[] {
    const here = this.of(pool)
      .filter((s) => !s.retiring && s.instance.available?.() !== false)
      .map((s) => s.instance);
    return [...here, ...this.foreignOf(pool)];
  }

  /**
   * The adapter reports of the healthy instances of `pool` serving `model` (in `range`), or
   * undefined unless every one of them reports (one held by another scheduler is not known here).
   */
  adapterReports(pool: string, model: string, range: string | undefined): AdapterReport[] | undefined {
    if (this.foreignOf(pool).some((f) => serves(f, model) && versionMatches(f, range))) return undefined;
    const out: AdapterReport[] = [];
    for (const s of this.of(pool)) {
      const i = s.instance;
      if (s.retiring || i.available?.() === false || !serves(i, model) || !versionMatches(i, range)) continue;
      const r = i.adapters?.();
      if (!r) return undefined;
      out.push(r);
    }
    return out.length > 0 ? out : undefined;
  }

  /** True when an instance of `pool` that is not leaving can run a task (now or later). */
  runnable(pool: string, model: string, range: string | undefined): boolean {
    for (const s of this.slots.get(pool)?.values() ?? []) {
      if (!s.retiring && serves(s.instance, model) && versionMatches(s.instance, range)) return true;
    }
    for (const f of this.foreign.get(pool)?.values() ?? []) {
      if (serves(f, model) && versionMatches(f, range)) return true;
    }
    return false;
  }

  /** Closes every instance (the scheduler stops). */
  closeAll(): void {
    for (const pool of this.slots.values()) for (const s of [...pool.values()]) this.release(s);
  }

  /**
   * Forgets a slot and closes its instance. A slot that was replaced is no longer in its
   * pool, so this never touches the one that took its place, nor closes an instance that
   * was added again and is still in use.
   */
  private release(slot: InstanceSlot): void {
    const { id, pool } = slot.instance;
    const slots = this.slots.get(pool);
    const current = slots?.get(id);
    slot.unwatch?.();
    if (current === slot) slots?.delete(id);
    else if (current?.instance === slot.instance) return;
    slot.instance.close?.();
  }

  private poolSlots(pool: string): Map<string, InstanceSlot> {
    let p = this.slots.get(pool);
    if (!p) {
      p = new Map();
      this.slots.set(pool, p);
    }
    return p;
  }
}
