// Original file: proto/diffmesh/common/v1/request.proto


/**
 * Live previews of a request: a small picture of the latent every few
 * denoising steps, streamed as `preview` events (RequestEvent field 18) to
 * those who follow the request (Generate, Watch, Session; NDJSON/SSE on the
 * gateway). Previews are ephemeral: they are not kept in the request's event
 * log, and a client that re-attaches sees only those made after it did.
 */
export interface PreviewParams {
  /**
   * A preview after every this many denoising steps (and after the last);
   * 0 or absent = no previews. At most 200 (the step limit).
   */
  'everySteps'?: (number);
  /**
   * Longest side of a preview in pixels, from 8 to 512; default 256. A preview
   * is never larger than the latent it shows (1/8 of the output for the
   * built-in and diffusers models): a longer side is not upsampled.
   */
  'maxSide'?: (number);
  '_maxSide'?: "maxSide";
}

/**
 * Live previews of a request: a small picture of the latent every few
 * denoising steps, streamed as `preview` events (RequestEvent field 18) to
 * those who follow the request (Generate, Watch, Session; NDJSON/SSE on the
 * gateway). Previews are ephemeral: they are not kept in the request's event
 * log, and a client that re-attaches sees only those made after it did.
 */
export interface PreviewParams__Output {
  /**
   * A preview after every this many denoising steps (and after the last);
   * 0 or absent = no previews. At most 200 (the step limit).
   */
  'everySteps': (number);
  /**
   * Longest side of a preview in pixels, from 8 to 512; default 256. A preview
   * is never larger than the latent it shows (1/8 of the output for the
   * built-in and diffusers models): a longer side is not upsampled.
   */
  'maxSide'?: (number);
  '_maxSide'?: "maxSide";
}
