/**
 * Which stage instances hold which LoRA adapters, as far as this scheduler knows: an instance
 * that was sent a task with adapters loads them (dit-svc keeps them in its cache), so later
 * tasks naming them go there first, and to another instance (which then loads them) only when
 * none that holds them has a free slot. A hint, not a guarantee: an instance's cache may have
 * dropped an adapter since, which costs that task a load, never a failure.
 */
export class AdapterAffinity {
  private readonly held = new Map<string, string[]>();

  /** `perInstance`: names remembered per instance (the most recent; the stage's cache is byte-bounded too). */
  constructor(private readonly perInstance = 64) {}

  /** `instance` was sent a task with these adapters. */
  sent(instance: string, names: readonly string[]): void {
    if (names.length === 0) return;
    const list = (this.held.get(instance) ?? []).filter((n) => !names.includes(n));
    list.push(...names);
    this.held.set(instance, list.slice(-this.perInstance));
  }

  /** How many of `names` the instance holds. */
  holds(instance: string, names: readonly string[]): number {
    const list = this.held.get(instance);
    return list ? names.filter((n) => list.includes(n)).length : 0;
  }

  /** The adapters an instance holds, oldest first. */
  of(instance: string): readonly string[] {
    return this.held.get(instance) ?? [];
  }

  /** The instance is gone. */
  forget(instance: string): void {
    this.held.delete(instance);
  }
}
