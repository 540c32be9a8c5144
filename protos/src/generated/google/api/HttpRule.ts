// Original file: proto/third_party/google/api/http.proto

import type { CustomHttpPattern as _google_api_CustomHttpPattern, CustomHttpPattern__Output as _google_api_CustomHttpPattern__Output } from '../../google/api/CustomHttpPattern.js';
import type { HttpRule as _google_api_HttpRule, HttpRule__Output as _google_api_HttpRule__Output } from '../../google/api/HttpRule.js';

/**
 * gRPC Transcoding is a feature for mapping between a gRPC method and one or
 * more HTTP REST endpoints. It allows developers to build a single API service
 * that supports both gRPC APIs and REST APIs.
 * 
 * `HttpRule` defines the schema of the gRPC/REST mapping. The mapping specifies
 * how different portions of the gRPC request message are mapped to the URL
 * path, URL query parameters, and HTTP request body. It also controls how the
 * gRPC response message is mapped to the HTTP response body. `HttpRule` is
 * typically specified as an `google.api.http` annotation on the gRPC method.
 * 
 * Each mapping specifies a URL path template and an HTTP method. The path
 * template may refer to one or more fields in the gRPC request message, as long
 * as each field is a non-repeated field with a primitive (non-message) type.
 * The path template controls how fields of the request message are mapped to
 * the URL path. Fields of the request message not bound by the path template
 * become URL query parameters, unless `body` maps them to the request body.
 * 
 * The syntax of the path template is as follows:
 * 
 * Template = "/" Segments [ Verb ] ;
 * Segments = Segment { "/" Segment } ;
 * Segment  = "*" | "**" | LITERAL | Variable ;
 * Variable = "{" FieldPath [ "=" Segments ] "}" ;
 * FieldPath = IDENT { "." IDENT } ;
 * Verb     = ":" LITERAL ;
 * 
 * The syntax `*` matches a single URL path segment. The syntax `**` matches
 * zero or more URL path segments, which must be the last part of the URL path
 * except the `Verb`.
 * 
 * The syntax `Variable` matches part of the URL path as specified by its
 * template. A variable template must not contain other variables. If a variable
 * matches a single path segment, its template may be omitted, e.g. `{var}`
 * is equivalent to `{var=*}`.
 * 
 * The syntax `LITERAL` matches literal text in the URL path. If the `LITERAL`
 * contains any reserved character, such characters should be percent-encoded
 * before the matching.
 * 
 * If a variable contains exactly one path segment, such as `"{var}"` or
 * `"{var=*}"`, when such a variable is expanded into a URL path on the client
 * side, all characters except `[-_.~0-9a-zA-Z]` are percent-encoded. The
 * server side does the reverse decoding.
 * 
 * NOTE: the field paths in variables and in the `body` must not refer to
 * repeated fields or map fields and must be present at the top level of the
 * request message.
 */
export interface HttpRule {
  /**
   * Selects a method to which this rule applies.
   * 
   * Refer to [selector][google.api.DocumentationRule.selector] for syntax
   * details.
   */
  'selector'?: (string);
  /**
   * Maps to HTTP GET. Used for listing and getting information about
   * resources.
   */
  'get'?: (string);
  /**
   * Maps to HTTP PUT. Used for replacing a resource.
   */
  'put'?: (string);
  /**
   * Maps to HTTP POST. Used for creating a resource or performing an action.
   */
  'post'?: (string);
  /**
   * Maps to HTTP DELETE. Used for deleting a resource.
   */
  'delete'?: (string);
  /**
   * Maps to HTTP PATCH. Used for updating a resource.
   */
  'patch'?: (string);
  /**
   * The name of the request field whose value is mapped to the HTTP request
   * body, or `*` for mapping all request fields not captured by the path
   * pattern to the HTTP body, or omitted for not having any HTTP request body.
   * 
   * NOTE: the referred field must be present at the top-level of the request
   * message type.
   */
  'body'?: (string);
  /**
   * The custom pattern is used for specifying an HTTP method that is not
   * included in the `pattern` field, such as HEAD, or "*" to leave the
   * HTTP method unspecified for this rule. The wild-card rule is useful
   * for services that provide content to Web (HTML) clients.
   */
  'custom'?: (_google_api_CustomHttpPattern | null);
  /**
   * Additional HTTP bindings for the selector. Nested bindings must
   * not contain an `additional_bindings` field themselves (that is,
   * the nesting may only be one level deep).
   */
  'additionalBindings'?: (_google_api_HttpRule)[];
  /**
   * Optional. The name of the response field whose value is mapped to the HTTP
   * response body. When omitted, the entire response message will be used
   * as the HTTP response body.
   * 
   * NOTE: The referred field must be present at the top-level of the response
   * message type.
   */
  'responseBody'?: (string);
  /**
   * Determines the URL pattern is matched by this rules. This pattern can be
   * used with any of the {get|put|post|delete|patch} methods. A custom method
   * can be defined using the 'custom' field.
   */
  'pattern'?: "get"|"put"|"post"|"delete"|"patch"|"custom";
}

/**
 * gRPC Transcoding is a feature for mapping between a gRPC method and one or
 * more HTTP REST endpoints. It allows developers to build a single API service
 * that supports both gRPC APIs and REST APIs.
 * 
 * `HttpRule` defines the schema of the gRPC/REST mapping. The mapping specifies
 * how different portions of the gRPC request message are mapped to the URL
 * path, URL query parameters, and HTTP request body. It also controls how the
 * gRPC response message is mapped to the HTTP response body. `HttpRule` is
 * typically specified as an `google.api.http` annotation on the gRPC method.
 * 
 * Each mapping specifies a URL path template and an HTTP method. The path
 * template may refer to one or more fields in the gRPC request message, as long
 * as each field is a non-repeated field with a primitive (non-message) type.
 * The path template controls how fields of the request message are mapped to
 * the URL path. Fields of the request message not bound by the path template
 * become URL query parameters, unless `body` maps them to the request body.
 * 
 * The syntax of the path template is as follows:
 * 
 * Template = "/" Segments [ Verb ] ;
 * Segments = Segment { "/" Segment } ;
 * Segment  = "*" | "**" | LITERAL | Variable ;
 * Variable = "{" FieldPath [ "=" Segments ] "}" ;
 * FieldPath = IDENT { "." IDENT } ;
 * Verb     = ":" LITERAL ;
 * 
 * The syntax `*` matches a single URL path segment. The syntax `**` matches
 * zero or more URL path segments, which must be the last part of the URL path
 * except the `Verb`.
 * 
 * The syntax `Variable` matches part of the URL path as specified by its
 * template. A variable template must not contain other variables. If a variable
 * matches a single path segment, its template may be omitted, e.g. `{var}`
 * is equivalent to `{var=*}`.
 * 
 * The syntax `LITERAL` matches literal text in the URL path. If the `LITERAL`
 * contains any reserved character, such characters should be percent-encoded
 * before the matching.
 * 
 * If a variable contains exactly one path segment, such as `"{var}"` or
 * `"{var=*}"`, when such a variable is expanded into a URL path on the client
 * side, all characters except `[-_.~0-9a-zA-Z]` are percent-encoded. The
 * server side does the reverse decoding.
 * 
 * NOTE: the field paths in variables and in the `body` must not refer to
 * repeated fields or map fields and must be present at the top level of the
 * request message.
 */
export interface HttpRule__Output {
  /**
   * Selects a method to which this rule applies.
   * 
   * Refer to [selector][google.api.DocumentationRule.selector] for syntax
   * details.
   */
  'selector': (string);
  /**
   * Maps to HTTP GET. Used for listing and getting information about
   * resources.
   */
  'get'?: (string);
  /**
   * Maps to HTTP PUT. Used for replacing a resource.
   */
  'put'?: (string);
  /**
   * Maps to HTTP POST. Used for creating a resource or performing an action.
   */
  'post'?: (string);
  /**
   * Maps to HTTP DELETE. Used for deleting a resource.
   */
  'delete'?: (string);
  /**
   * Maps to HTTP PATCH. Used for updating a resource.
   */
  'patch'?: (string);
  /**
   * The name of the request field whose value is mapped to the HTTP request
   * body, or `*` for mapping all request fields not captured by the path
   * pattern to the HTTP body, or omitted for not having any HTTP request body.
   * 
   * NOTE: the referred field must be present at the top-level of the request
   * message type.
   */
  'body': (string);
  /**
   * The custom pattern is used for specifying an HTTP method that is not
   * included in the `pattern` field, such as HEAD, or "*" to leave the
   * HTTP method unspecified for this rule. The wild-card rule is useful
   * for services that provide content to Web (HTML) clients.
   */
  'custom'?: (_google_api_CustomHttpPattern__Output | null);
  /**
   * Additional HTTP bindings for the selector. Nested bindings must
   * not contain an `additional_bindings` field themselves (that is,
   * the nesting may only be one level deep).
   */
  'additionalBindings': (_google_api_HttpRule__Output)[];
  /**
   * Optional. The name of the response field whose value is mapped to the HTTP
   * response body. When omitted, the entire response message will be used
   * as the HTTP response body.
   * 
   * NOTE: The referred field must be present at the top-level of the response
   * message type.
   */
  'responseBody': (string);
  /**
   * Determines the URL pattern is matched by this rules. This pattern can be
   * used with any of the {get|put|post|delete|patch} methods. A custom method
   * can be defined using the 'custom' field.
   */
  'pattern'?: "get"|"put"|"post"|"delete"|"patch"|"custom";
}
