export { MAX_FPS, MAX_PROMPT_LENGTH, MAX_SEED, MAX_STEPS, MIN_FPS, MIN_STEPS, randomSeed } from '@diffmesh/core';
export { describeFrameRule, resolveParams } from './params.js';
export type { GenerationParamsInput, ResolveParamsOptions } from './params.js';
export { DEFAULT_PLANS_FILE, PlanRegistry, loadPlanRegistry, parsePlanRegistry, toExecutionPlan } from './registry.js';
export type { LoadPlanRegistryOptions } from './registry.js';
export { expandDirectoryEntries } from './directory-entries.js';
export { globToRegExp } from '@diffmesh/core';
export {
  FrameRuleSchema,
  IMAGE_MODALITIES,
  MODALITIES,
  PlanConstraintsSchema,
  PlanDefaultsSchema,
  PlanEntrySchema,
  PlanFileSchema,
  PlanStageSchema,
} from './schema.js';
export type { FrameRule, Modality, PlanConstraints, PlanDefaults, PlanEntry, PlanEntryInput, PlanStageConfig } from './schema.js';
