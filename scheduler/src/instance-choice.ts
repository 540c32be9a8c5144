/**
 * Which instance a task goes to, among the free slots of its pool: the one rule of placement
 * (routing that knows more of an instance, such as the adapters it has loaded, goes here).
 */
import type { ObjectRef } from '@diffmesh/core';
import { busy, serves, versionMatches, type InstanceSlot } from './instances.js';
import type { QueueItem } from './storage/types.js';

/** True when the instance may run the task: it serves the task's model, in the task's version range. */
export function fitsTask(slot: InstanceSlot, task: Pick<QueueItem, 'model' | 'range'>): boolean {
  return serves(slot.instance, task.model) && versionMatches(slot.instance, task.range);
}

/**
 * The slot of `free` a task goes to, or undefined when none may run it. Prefers the instance
 * `prefer` scores highest (the one that holds the task's LoRA adapters), then one on the node
 * that owns the task's inputs, then the least loaded, then the one that waited longest since
 * its last task.
 */
export function chooseInstance(
  free: readonly InstanceSlot[],
  task: Pick<QueueItem, 'model' | 'range'>,
  inputs: Record<string, ObjectRef>,
  prefer?: (slot: InstanceSlot) => number,
): InstanceSlot | undefined {
  const fit = free.filter((s) => fitsTask(s, task));
  if (fit.length === 0) return undefined;
  const owners = new Set(Object.values(inputs).map((r) => r.ownerNodeId));
  return fit.reduce((best, s) => {
    if (prefer) {
      const score = prefer(s);
      const bestScore = prefer(best);
      if (score !== bestScore) return score > bestScore ? s : best;
    }
    const local = owners.has(s.instance.nodeId) ? 1 : 0;
    const bestLocal = owners.has(best.instance.nodeId) ? 1 : 0;
    if (local !== bestLocal) return local > bestLocal ? s : best;
    const load = busy(s) / s.instance.capacity;
    const bestLoad = busy(best) / best.instance.capacity;
    if (load !== bestLoad) return load < bestLoad ? s : best;
    return s.lastUsed < best.lastUsed ? s : best;
  });
}
