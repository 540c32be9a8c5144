// Original file: proto/third_party/google/api/http.proto


/**
 * A custom pattern is used for defining custom HTTP verb.
 */
export interface CustomHttpPattern {
  /**
   * The name of this custom HTTP verb.
   */
  'kind'?: (string);
  /**
   * The path matched by this custom verb.
   */
  'path'?: (string);
}

/**
 * A custom pattern is used for defining custom HTTP verb.
 */
export interface CustomHttpPattern__Output {
  /**
   * The name of this custom HTTP verb.
   */
  'kind': (string);
  /**
   * The path matched by this custom verb.
   */
  'path': (string);
}
