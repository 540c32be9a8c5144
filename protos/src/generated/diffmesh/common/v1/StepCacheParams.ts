// Original file: proto/diffmesh/common/v1/request.proto


/**
 * Step caching of the denoising stage. A step reuses the last computed model
 * output while the relative L1 change of the denoiser's input, summed over the
 * steps since the last computed one, stays below `threshold`, and at most
 * `max_skipped_steps` steps in a row. The first and the last step always run.
 */
export interface StepCacheParams {
  /**
   * Finite, >= 0; 0 = off. Typical values 0.05 to 0.4: higher skips more.
   */
  'threshold'?: (number | string);
  /**
   * Most steps in a row that reuse an output (0 = none, so off); default 2.
   */
  'maxSkippedSteps'?: (number);
  '_threshold'?: "threshold";
  '_maxSkippedSteps'?: "maxSkippedSteps";
}

/**
 * Step caching of the denoising stage. A step reuses the last computed model
 * output while the relative L1 change of the denoiser's input, summed over the
 * steps since the last computed one, stays below `threshold`, and at most
 * `max_skipped_steps` steps in a row. The first and the last step always run.
 */
export interface StepCacheParams__Output {
  /**
   * Finite, >= 0; 0 = off. Typical values 0.05 to 0.4: higher skips more.
   */
  'threshold'?: (number);
  /**
   * Most steps in a row that reuse an output (0 = none, so off); default 2.
   */
  'maxSkippedSteps'?: (number);
  '_threshold'?: "threshold";
  '_maxSkippedSteps'?: "maxSkippedSteps";
}
