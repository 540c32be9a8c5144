import { z } from 'zod';
import { STAGE_NAMES } from '../domain.js';

/** What a model can generate. */
export const MODALITIES = ['text-to-image', 'text-to-video', 'image-to-video'] as const;
export type Modality = (typeof MODALITIES)[number];

/** One stage of a plan entry: which pool serves it, optionally pinned to a version range. */
export const PlanStageSchema = z.strictObject({
  name: z.enum(STAGE_NAMES, {
    error: (iss) => `unknown stage ${JSON.stringify(iss.input)} (expected one of ${STAGE_NAMES.join(', ')})`,
  }),
  pool: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, 'pool names are lower-case letters, digits, ".", "_" and "-"'),
  version: z.string().trim().min(1, 'version range must not be empty').optional(),
});

/** Defaults used for every request field the caller leaves out. */
export const PlanDefaultsSchema = z.strictObject({
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive().default(1),
  steps: z.number().int().min(1).max(200),
  guidanceScale: z.number().nonnegative(),
  fps: z.number().min(1).max(60).default(8),
});

/** `numFrames ≡ remainder (mod modulus)`, e.g. `{ modulus: 4, remainder: 1 }` for 4k+1. */
export const FrameRuleSchema = z
  .strictObject({
    modulus: z.number().int().min(2),
    remainder: z.number().int().nonnegative(),
  })
  .refine((r) => r.remainder < r.modulus, { error: 'remainder must be less than modulus', path: ['remainder'] });

/** Limits a request must satisfy. */
export const PlanConstraintsSchema = z.strictObject({
  /** Width and height must be multiples of this (VAE spatial factor × transformer patch size). */
  sizeMultiple: z.number().int().positive(),
  maxWidth: z.number().int().positive(),
  maxHeight: z.number().int().positive(),
  /** 1 for image-only models. */
  maxFrames: z.number().int().positive().default(1),
  frameRule: FrameRuleSchema.optional(),
});

/** One entry of the plan registry, matched by exact `model` name or by glob `pattern`. */
export const PlanEntrySchema = z
  .strictObject({
    model: z.string().trim().min(1).optional(),
    pattern: z.string().trim().min(1).optional(),
    description: z.string().optional(),
    modalities: z.array(z.enum(MODALITIES)).min(1, 'list at least one modality'),
    stages: z.array(PlanStageSchema).min(1, 'list at least one stage'),
    defaults: PlanDefaultsSchema,
    constraints: PlanConstraintsSchema,
  })
  .superRefine((e, ctx) => {
    if ((e.model === undefined) === (e.pattern === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'give exactly one of "model" (exact name) or "pattern" (glob)' });
    }
    if (e.pattern !== undefined && !/[*?]/.test(e.pattern)) {
      ctx.addIssue({
        code: 'custom',
        path: ['pattern'],
        message: `pattern "${e.pattern}" has no * or ?; use "model" for an exact name`,
      });
    }
    // Stages run in pipeline order and each at most once.
    const order = e.stages.map((s) => STAGE_NAMES.indexOf(s.name));
    e.stages.forEach((s, i) => {
      if (order.indexOf(order[i]) !== i) {
        ctx.addIssue({ code: 'custom', path: ['stages', i, 'name'], message: `stage "${s.name}" appears twice` });
      } else if (i > 0 && order[i] < order[i - 1]) {
        ctx.addIssue({
          code: 'custom',
          path: ['stages', i, 'name'],
          message: `stage "${s.name}" must come before "${e.stages[i - 1].name}" (order: ${STAGE_NAMES.join(' → ')})`,
        });
      }
    });
    const video = e.modalities.some((m) => m !== 'text-to-image');
    if (!video && e.constraints.maxFrames !== 1) {
      ctx.addIssue({ code: 'custom', path: ['constraints', 'maxFrames'], message: 'an image-only model must have maxFrames 1' });
    }
    if (e.modalities.includes('image-to-video') && !e.stages.some((s) => s.name === 'image_encoding')) {
      ctx.addIssue({ code: 'custom', path: ['stages'], message: 'an image-to-video model needs an image_encoding stage' });
    }
  });

/** The plan registry file (`runtime/config/plans.yaml`). */
export const PlanFileSchema = z.strictObject({
  /** Format version of the file; only 1 exists. */
  version: z.literal(1).default(1),
  plans: z.array(z.unknown()).min(1, 'list at least one plan'),
});

export type PlanStageConfig = z.output<typeof PlanStageSchema>;
export type PlanDefaults = z.output<typeof PlanDefaultsSchema>;
export type FrameRule = z.output<typeof FrameRuleSchema>;
export type PlanConstraints = z.output<typeof PlanConstraintsSchema>;
/** A validated registry entry. */
export type PlanEntry = z.output<typeof PlanEntrySchema>;
/** A registry entry as written in the file (before defaults). */
export type PlanEntryInput = z.input<typeof PlanEntrySchema>;
