// Original file: proto/diffmesh/stage/v1/stage.proto


/**
 * A small encoded image of a task's latent (see TaskProgress.preview).
 */
export interface TaskPreview {
  /**
   * `image/png`.
   */
  'mediaType'?: (string);
  'data'?: (Buffer | Uint8Array | string);
  'width'?: (number);
  'height'?: (number);
  /**
   * The step whose latent it shows, 1..total_steps.
   */
  'step'?: (number);
}

/**
 * A small encoded image of a task's latent (see TaskProgress.preview).
 */
export interface TaskPreview__Output {
  /**
   * `image/png`.
   */
  'mediaType': (string);
  'data': (Buffer);
  'width': (number);
  'height': (number);
  /**
   * The step whose latent it shows, 1..total_steps.
   */
  'step': (number);
}
