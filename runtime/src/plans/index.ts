export {
  MAX_FPS,
  MAX_PROMPT_LENGTH,
  MAX_SEED,
  MAX_STEPS,
  MIN_FPS,
  MIN_STEPS,
  describeFrameRule,
  randomSeed,
  resolveParams,
} from './params.js';
export type { GenerationParamsInput, ResolveParamsOptions } from './params.js';
export {
  DEFAULT_PLANS_FILE,
  PlanRegistry,
  globToRegExp,
  loadPlanRegistry,
  parsePlanRegistry,
  toExecutionPlan,
} from './registry.js';
export {
  FrameRuleSchema,
  MODALITIES,
  PlanConstraintsSchema,
  PlanDefaultsSchema,
  PlanEntrySchema,
  PlanFileSchema,
  PlanStageSchema,
} from './schema.js';
export type {
  FrameRule,
  Modality,
  PlanConstraints,
  PlanDefaults,
  PlanEntry,
  PlanEntryInput,
  PlanStageConfig,
} from './schema.js';
