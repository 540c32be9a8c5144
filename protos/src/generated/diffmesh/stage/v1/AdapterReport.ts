// Original file: proto/diffmesh/stage/v1/stage.proto


/**
 * The LoRA adapters of a stage instance, by the names requests give
 * (GenerationParams.adapters[i].name).
 */
export interface AdapterReport {
  /**
   * Loaded now (in the instance's adapter cache): a task naming them starts
   * without reading their files.
   */
  'held'?: (string)[];
  /**
   * Registered in its adapter directory: what it can load. Every held name is
   * also available while its file stays.
   */
  'available'?: (string)[];
}

/**
 * The LoRA adapters of a stage instance, by the names requests give
 * (GenerationParams.adapters[i].name).
 */
export interface AdapterReport__Output {
  /**
   * Loaded now (in the instance's adapter cache): a task naming them starts
   * without reading their files.
   */
  'held': (string)[];
  /**
   * Registered in its adapter directory: what it can load. Every held name is
   * also available while its file stays.
   */
  'available': (string)[];
}
