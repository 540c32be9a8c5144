import { satisfies } from './instances.js';
import type { PlanEntry } from './plans/schema.js';
import type { StageInstance } from './types.js';

/** What the scheduler knows of a pool's instances. */
export interface InstanceSource {
  instances(pool?: string): Array<{ instance: Pick<StageInstance, 'version' | 'models' | 'available'> }>;
}

/** Whether a registered plan can run now, and which of its pools hold it back. */
export interface ModelAvailability {
  ready: boolean;
  unavailablePools: string[];
}

/**
 * A plan entry can run now when every stage's pool has an instance that could take its
 * task: of a version the stage's range accepts, serving the model (or any model), and not
 * refusing work (breaker open, connection lost). Stages that run only for some requests
 * (`requires`) are not needed for the model to be ready. Pattern entries are checked without a
 * model (an instance serving any model, or one of the names the pattern matches).
 */
export function modelAvailability(source: InstanceSource, entry: PlanEntry): ModelAvailability {
  const unavailable: string[] = [];
  for (const stage of entry.stages) {
    // A stage only some requests take (e.g. image_encoding, `requires: input_image`) does not
    // keep the model from serving the others.
    if (stage.requires) continue;
    const ok = source.instances(stage.pool).some(({ instance }) => {
      if (instance.available?.() === false) return false;
      if (stage.version && !satisfies(instance.version, stage.version)) return false;
      if (instance.models.length === 0) return true;
      return entry.model ? instance.models.includes(entry.model) : true;
    });
    if (!ok && !unavailable.includes(stage.pool)) unavailable.push(stage.pool);
  }
  return { ready: unavailable.length === 0, unavailablePools: unavailable };
}
