/** Names of the stages a plan may contain, in pipeline order. */
export const STAGE_NAMES = ['text_encoding', 'text_encoding_2', 'image_encoding', 'denoising', 'vae_decoding'] as const;
export type StageName = (typeof STAGE_NAMES)[number];

/**
 * Request inputs a stage may require, by the name of the object the scheduler stores them
 * under in the request (`input_image`: the encoded input image, dtype uint8, shape [bytes]).
 */
export const STAGE_INPUTS = ['input_image'] as const;
export type StageInput = (typeof STAGE_INPUTS)[number];

/** One stage of an execution plan. */
export interface PlanStage {
  name: StageName;
  /** Worker pool that serves this stage. */
  pool: string;
  /** Optional semver range the serving instances must satisfy, e.g. `^1.2.0`. */
  version?: string;
  /**
   * A request input the stage needs: it runs only for requests that have it and is left out
   * of the plan of those that do not. Unset = it always runs.
   */
  requires?: StageInput;
}

/** How a model's request is executed: an ordered list of stages. */
export interface ExecutionPlan {
  model: string;
  stages: PlanStage[];
}

/**
 * Compiles a model-name glob: `*` matches any run of characters (including `/`), `?` exactly
 * one character; everything else is literal and matching is case-sensitive and anchored.
 */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (const ch of glob) {
    if (ch === '*') source += '.*';
    else if (ch === '?') source += '.';
    else source += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 's');
}

/**
 * The model → execution plan registry. Lookup tries exact `model` entries first, then
 * `pattern` entries in file order; the first that matches wins.
 */
