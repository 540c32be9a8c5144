// Original file: proto/diffmesh/common/v1/request.proto


/**
 * One LoRA adapter of a request.
 */
export interface AdapterParams {
  /**
   * The adapter's name: its file name without `.safetensors` (letters, digits,
   * `.`, `_`, `-`; no path).
   */
  'name'?: (string);
  /**
   * How strongly it applies, finite, from -10 to 10; default 1. 0 leaves the
   * model as it is.
   */
  'scale'?: (number | string);
  '_scale'?: "scale";
}

/**
 * One LoRA adapter of a request.
 */
export interface AdapterParams__Output {
  /**
   * The adapter's name: its file name without `.safetensors` (letters, digits,
   * `.`, `_`, `-`; no path).
   */
  'name': (string);
  /**
   * How strongly it applies, finite, from -10 to 10; default 1. 0 leaves the
   * model as it is.
   */
  'scale'?: (number);
  '_scale'?: "scale";
}
