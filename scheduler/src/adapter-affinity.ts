/**
 * Which stage instances hold which LoRA adapters. An instance that reports its adapters (a
 * dit-svc sends the names in its cache with its status, again whenever they change) is taken
 * at its word, plus the adapters of the tasks running on it now (they are loaded or being
 * loaded there, and its next report will say so). For an instance that does not report (an
 * older build), what this scheduler sent it is remembered instead: it loaded those adapters
 * (dit-svc keeps them in its cache). Either way later tasks naming them go there first, and to
 * another instance (which then loads them) only when none that holds them has a free slot. A
 * cache may still drop an adapter between a report and a task, which costs that task a load,
 * never a failure.
 */
import type { AdapterReport } from '@diffmesh/core';

/** What the affinity needs of an instance. */
export interface AdapterHolder {
  readonly id: string;
  /** Its own report, when it sends one. */
  adapters?(): AdapterReport | undefined;
}

/**
 * How many of a task's adapters an instance holds, how many it can load (all, for one that does
 * not report), and whether its own report said so.
 */
export interface AdaptersHeld {
  held: number;
  available: number;
  reported: boolean;
}

export class AdapterAffinity {
  /** What was sent to each instance, most recent last (instances that do not report). */
  private readonly sentTo = new Map<string, string[]>();
  /** Adapters of the tasks running on each instance, with their counts. */
  private readonly running = new Map<string, Map<string, number>>();

  /** `perInstance`: names remembered per instance that does not report (the most recent; the stage's cache is byte-bounded too). */
  constructor(private readonly perInstance = 64) {}

  /** A task with these adapters started on `instance`. */
  started(instance: string, names: readonly string[]): void {
    if (names.length === 0) return;
    const list = (this.sentTo.get(instance) ?? []).filter((n) => !names.includes(n));
    list.push(...names);
    this.sentTo.set(instance, list.slice(-this.perInstance));
    let run = this.running.get(instance);
    if (!run) this.running.set(instance, (run = new Map()));
    for (const n of names) run.set(n, (run.get(n) ?? 0) + 1);
  }

  /** The task {@link started} with these adapters on `instance` ended. */
  ended(instance: string, names: readonly string[]): void {
    const run = this.running.get(instance);
    if (!run) return;
    for (const n of names) {
      const c = (run.get(n) ?? 0) - 1;
      if (c > 0) run.set(n, c);
      else run.delete(n);
    }
    if (run.size === 0) this.running.delete(instance);
  }

  /** How many of `names` the instance holds. */
  holds(instance: AdapterHolder, names: readonly string[]): AdaptersHeld {
    const report = instance.adapters?.();
    if (!report) {
      const list = this.sentTo.get(instance.id);
      return { held: list ? names.filter((n) => list.includes(n)).length : 0, available: names.length, reported: false };
    }
    const run = this.running.get(instance.id);
    return {
      held: names.filter((n) => report.held.includes(n) || run?.has(n)).length,
      available: names.filter((n) => report.available.includes(n)).length,
      reported: true,
    };
  }

  /**
   * The preference of an instance for a task with `names` (higher first): one that can load
   * them all before one that lacks a file (it would refuse the task), then by how many it holds.
   */
  score(instance: AdapterHolder, names: readonly string[]): number {
    const h = this.holds(instance, names);
    return h.available * (names.length + 1) + h.held;
  }

  /** The adapters sent to an instance that does not report, oldest first. */
  of(instance: string): readonly string[] {
    return this.sentTo.get(instance) ?? [];
  }

  /** The instance is gone. */
  forget(instance: string): void {
    this.sentTo.delete(instance);
    this.running.delete(instance);
  }
}
