/**
 * Fair share across tenants: each pool's free slots go to the tenants in proportion to their
 * weights (start-time fair queuing), whatever one tenant floods the pool with.
 *
 * Every task has a cost (see `task-cost.ts`). Per pool, the dispatcher keeps a virtual clock
 * and, for each tenant, a finish tag: when a task of tenant `t` is dispatched, its start tag
 * is `max(finish[t], clock)`, the clock moves to that start tag, and `finish[t]` becomes
 * `start + cost / weight(t)`. The next free slot goes to the backlogged tenant with the
 * smallest tag. A tenant whose finish tag the clock has passed (idle, or new) starts at the
 * clock: idle time earns no credit, and a tenant that comes back is served at once, ahead of
 * those that have been using more than their share. Priority (then arrival) orders a tenant's
 * own tasks.
 *
 * The store does the picking ({@link LeaseQuery.tenants}): the dispatcher lists the tenants
 * whose tags are ahead of the clock, most deserving first; tenants it does not list are at
 * the clock and rank before every listed one. The tags are this scheduler's: schedulers
 * sharing a store each keep their own, for the instances they hold.
 */

export { DEFAULT_TENANT } from './storage/types.js';

/** A tenant's limits; an undefined field is no limit. Costs are in task-cost units (see `task-cost.ts`). */
export interface TenantLimits {
  /** Most cost of the tenant's tasks running at once: while at it, new requests are refused. */
  concurrentCost?: number;
  /** Most cost of the tenant's accepted work not yet running (its waiting tasks and later stages). */
  queuedCost?: number;
  /** Most requests accepted per minute (a token bucket holding a minute's worth). */
  requestsPerMinute?: number;
}

/** Weights and limits per tenant, as the scheduler reads them (from the tenants config). */
export interface TenantPolicy {
  /** The tenant's share of every pool relative to the others' (> 0; 1 by default). */
  weight(tenant: string): number;
  limits(tenant: string): TenantLimits;
}

/** Weight 1 and no limits for every tenant. */
export const DEFAULT_TENANT_POLICY: TenantPolicy = {
  weight: () => 1,
  limits: () => ({}),
};

/**
 * The policy of a tenants directory (core's `TenantDirectory`, the tenants file): each call
 * reads the tenant's current entry, so a reloaded file applies at once; a tenant it does not
 * know has weight 1 and no limits.
 */
export function directoryPolicy(directory: { get(name: string): { weight: number; limits: TenantLimits } | undefined }): TenantPolicy {
  return {
    weight: (t) => directory.get(t)?.weight ?? 1,
    limits: (t) => directory.get(t)?.limits ?? {},
  };
}

interface PoolClock {
  clock: number;
  /** Finish tags of the tenants ahead of the clock (others are at the clock). */
  finish: Map<string, number>;
}

/** The per-pool virtual clocks of start-time fair queuing (see the file comment). */
export class FairShare {
  private readonly pools = new Map<string, PoolClock>();

  constructor(private readonly policy: TenantPolicy) {}

  /**
   * Tenants of `pool` ahead of the clock, smallest finish tag first (ties by name): the order
   * to pass as {@link LeaseQuery.tenants}. Tenants not listed come before them.
   */
  order(pool: string): string[] {
    const p = this.pools.get(pool);
    if (!p || p.finish.size === 0) return [];
    return [...p.finish.entries()].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([t]) => t);
  }

  /** A task of `tenant` costing `cost` was dispatched from `pool`. */
  dispatched(pool: string, tenant: string, cost: number): void {
    let p = this.pools.get(pool);
    if (!p) {
      p = { clock: 0, finish: new Map() };
      this.pools.set(pool, p);
    }
    const start = Math.max(p.finish.get(tenant) ?? p.clock, p.clock);
    p.clock = start;
    p.finish.set(tenant, start + Math.max(0, cost) / this.weightOf(tenant));
    // Tenants the clock has caught up with are at the clock again: forget them (bounded map).
    for (const [t, f] of p.finish) if (f <= p.clock) p.finish.delete(t);
  }

  private weightOf(tenant: string): number {
    const w = this.policy.weight(tenant);
    return Number.isFinite(w) && w > 0 ? w : 1;
  }
}
