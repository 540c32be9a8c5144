import type { StageName } from './execution-plan.js';
import type { ObjectRef } from './object-ref.js';

/** Events of one request, in order; the last one is `completed`, `failed` or `cancelled`. */
export type RequestEvent =
  | {
      type: 'queued';
      reqId: string;
      stageIndex: number;
      stage: StageName;
      pool: string;
      /** Tasks waiting in the same queue when this one joined it (0 = first in line). */
      position: number;
      at: number;
    }
  | {
      type: 'stage_started';
      reqId: string;
      stageIndex: number;
      stage: StageName;
      pool: string;
      instanceId: string;
      attempt: number;
      at: number;
    }
  | { type: 'progress'; reqId: string; stageIndex: number; stage: StageName; step: number; totalSteps: number; at: number }
  | {
      type: 'stage_finished';
      reqId: string;
      stageIndex: number;
      stage: StageName;
      queueMs: number;
      runMs: number;
      /** Objects the stage produced. */
      outputs: Record<string, ObjectRef>;
      /** Warnings of the stage (e.g. a prompt cut to the text encoder's length); absent when none. */
      warnings?: string[];
      at: number;
    }
  | {
      /**
       * A preview of the picture after `step` (requests that ask for previews). Ephemeral: it
       * goes to those following the request live and is never part of the stored events.
       */
      type: 'preview';
      reqId: string;
      stageIndex: number;
      stage: StageName;
      step: number;
      totalSteps: number;
      mediaType: string;
      data: Uint8Array;
      width: number;
      height: number;
      at: number;
    }
  | { type: 'completed'; reqId: string; outputs: Record<string, ObjectRef>; at: number }
  | { type: 'failed'; reqId: string; error: { code: number; reason: string; message: string; field?: string }; at: number }
  | { type: 'cancelled'; reqId: string; at: number }
  | {
      /** The running stage gave its slot to a more urgent task; it waits again and resumes from its checkpoint. */
      type: 'preempted';
      reqId: string;
      stageIndex: number;
      stage: StageName;
      pool: string;
      instanceId: string;
      /** The try that stopped. */
      attempt: number;
      /** Steps done when it stopped, of `totalSteps`. */
      step: number;
      totalSteps: number;
      reason: string;
      at: number;
    };

/** True for the last event of a request: `completed`, `failed` or `cancelled`. */
export function isTerminal(e: RequestEvent): boolean {
  return e.type === 'completed' || e.type === 'failed' || e.type === 'cancelled';
}
