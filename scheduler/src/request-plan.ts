/**
 * The execution plan of one request. A plan stage with `requires: input_image` runs only for
 * requests that have an input image: a request without one gets a plan without that stage.
 */
import { invalidParameter, type ExecutionPlan } from '@diffmesh/core';
import { toExecutionPlan } from './plans/registry.js';
import { IMAGE_MODALITIES, type PlanEntry } from './plans/schema.js';

/** Name of the input image: the request field, and the object that holds its bytes. */
export const INPUT_IMAGE = 'input_image';

/**
 * The execution plan of one request: the entry's stages, less those that require an input
 * the request does not have (`inputs` names the ones it has). Throws INVALID_ARGUMENT naming
 * `input_image` for an image the model does not take, and for a model that generates only
 * from an image (no `text-to-…` modality) when there is none.
 */
export function requestPlan(entry: PlanEntry, model: string, inputs: readonly string[]): ExecutionPlan {
  const plan = toExecutionPlan(entry, model);
  const hasImage = inputs.includes(INPUT_IMAGE);
  if (hasImage && !plan.stages.some((s) => s.requires === INPUT_IMAGE)) {
    throw invalidParameter(INPUT_IMAGE, `model "${model}" does not take an input image`);
  }
  if (!hasImage && !entry.modalities.some((m) => !IMAGE_MODALITIES.includes(m))) {
    throw invalidParameter(INPUT_IMAGE, `is required: model "${model}" generates from an image (${entry.modalities.join(', ')})`);
  }
  return { model, stages: plan.stages.filter((s) => s.requires === undefined || inputs.includes(s.requires)) };
}
