import { z } from 'zod';
import { STAGE_INPUTS, STAGE_NAMES } from '@diffmesh/core';

/**
 * What a model can generate. `image-to-image` (img2img) and `image-to-video` take an input
 * image; a model with no `text-to-…` modality needs one in every request.
 */
export const MODALITIES = ['text-to-image', 'text-to-video', 'image-to-video', 'image-to-image'] as const;
export type Modality = (typeof MODALITIES)[number];

/** Modalities whose requests carry an input image. */
export const IMAGE_MODALITIES: readonly Modality[] = ['image-to-image', 'image-to-video'];

/** One stage of a plan entry: which pool serves it, optionally pinned to a version range. */
export const PlanStageSchema = z.strictObject({
  name: z.enum(STAGE_NAMES, {
    error: (iss) => `unknown stage ${JSON.stringify(iss.input)} (expected one of ${STAGE_NAMES.join(', ')})`,
  }),
  pool: z.string().regex(/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/, 'pool names are lower-case letters, digits, ".", "_" and "-"'),
  version: z.string().trim().min(1, 'version range must not be empty').optional(),
  /** A request input the stage needs (`input_image`): without it the stage is left out of the request's plan. */
  requires: z
    .enum(STAGE_INPUTS, { error: (iss) => `unknown input ${JSON.stringify(iss.input)} (expected one of ${STAGE_INPUTS.join(', ')})` })
    .optional(),
});

/** Defaults used for every request field the caller leaves out. */
export const PlanDefaultsSchema = z.strictObject({
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  numFrames: z.number().int().positive().default(1),
  steps: z.number().int().min(1).max(200),
  guidanceScale: z.number().nonnegative(),
  fps: z.number().min(1).max(60).default(8),
  /** img2img strength of a request with an input image that gives none; default 0.8 (diffusers'). */
  strength: z.number().gt(0, 'strength must be greater than 0').max(1).optional(),
  /**
   * Step caching of the model's denoising (TeaCache-style; see dit-svc's README): off unless
   * `threshold` > 0. A request's `step_cache` fields override these.
   */
  stepCache: z
    .strictObject({
      threshold: z.number().finite().nonnegative('threshold must be ≥ 0'),
      maxSkippedSteps: z.number().int().nonnegative('maxSkippedSteps must be ≥ 0').optional(),
    })
    .optional(),
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
    /**
     * A model directory in the diffusers/optimum ONNX layout (absolute real path once loaded).
     * Its stages, pools, defaults and constraints are derived from the directory's JSON files
     * where the entry leaves them out; `model` defaults to the path.
     */
    directory: z.string().trim().min(1).optional(),
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
    // An input image is taken by the stages that require it, and only by models that say so.
    const takesImage = e.stages.some((s) => s.requires === 'input_image');
    const imageModality = e.modalities.find((m) => IMAGE_MODALITIES.includes(m));
    if (imageModality && !takesImage) {
      ctx.addIssue({
        code: 'custom',
        path: ['stages'],
        message: `an ${imageModality} model needs a stage with "requires: input_image" (the stage that takes the image)`,
      });
    }
    if (takesImage && !imageModality) {
      ctx.addIssue({
        code: 'custom',
        path: ['modalities'],
        message: `a model with a stage that requires input_image must list ${IMAGE_MODALITIES.join(' or ')}`,
      });
    }
    e.stages.forEach((s, i) => {
      // The image encoder has nothing to encode without an image: it must not run for requests without one.
      if (s.name === 'image_encoding' && s.requires !== 'input_image') {
        ctx.addIssue({
          code: 'custom',
          path: ['stages', i, 'requires'],
          message: 'an image_encoding stage must have "requires: input_image"',
        });
      }
    });
    if (e.defaults.strength !== undefined && !imageModality) {
      ctx.addIssue({
        code: 'custom',
        path: ['defaults', 'strength'],
        message: `strength applies only to a model that takes an input image (${IMAGE_MODALITIES.join(', ')})`,
      });
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
