/**
 * The OpenAPI 3 document of the gateway, generated from the same descriptors and bindings
 * the routes are built from, plus the OpenAI-compatible endpoints.
 */
import protobuf from 'protobufjs';
import { jsonName } from './proto-json.js';
import type { ProtoRoute } from './routes.js';

type Schema = Record<string, unknown>;

const WKT: Record<string, Schema> = {
  '.google.protobuf.Timestamp': { type: 'string', format: 'date-time' },
  '.google.protobuf.Duration': { type: 'string', pattern: '^-?\\d+(\\.\\d+)?s$', example: '1.5s' },
  '.google.protobuf.Any': { type: 'object', properties: { '@type': { type: 'string' } }, additionalProperties: true },
};

const SCALARS: Record<string, Schema> = {
  double: { type: 'number', format: 'double' },
  float: { type: 'number', format: 'float' },
  int32: { type: 'integer', format: 'int32' },
  sint32: { type: 'integer', format: 'int32' },
  sfixed32: { type: 'integer', format: 'int32' },
  uint32: { type: 'integer', format: 'int64', minimum: 0, maximum: 4294967295 },
  fixed32: { type: 'integer', format: 'int64', minimum: 0, maximum: 4294967295 },
  int64: { type: 'string', format: 'int64', pattern: '^-?\\d+$' },
  sint64: { type: 'string', format: 'int64', pattern: '^-?\\d+$' },
  sfixed64: { type: 'string', format: 'int64', pattern: '^-?\\d+$' },
  uint64: { type: 'string', format: 'uint64', pattern: '^\\d+$' },
  fixed64: { type: 'string', format: 'uint64', pattern: '^\\d+$' },
  bool: { type: 'boolean' },
  string: { type: 'string' },
  bytes: { type: 'string', format: 'byte' },
};

function schemaName(t: protobuf.ReflectionObject): string {
  return t.fullName.replace(/^\./, '');
}

/** Collects component schemas for message and enum types, following field types. */
class Components {
  readonly schemas: Record<string, Schema> = {};

  ref(t: protobuf.Type | protobuf.Enum): Schema {
    const wkt = WKT[t.fullName];
    if (wkt) return { ...wkt };
    const name = schemaName(t);
    if (!this.schemas[name]) {
      this.schemas[name] = {}; // placeholder first: types may refer to themselves
      this.schemas[name] = t instanceof protobuf.Enum ? this.enumSchema(t) : this.messageSchema(t);
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  private enumSchema(e: protobuf.Enum): Schema {
    return { type: 'string', enum: Object.keys(e.values), ...(e.comment ? { description: e.comment } : {}) };
  }

  field(f: protobuf.Field): Schema {
    const base: Schema = f.resolvedType ? this.ref(f.resolvedType) : { ...(SCALARS[f.type] ?? { type: 'string' }) };
    let s: Schema = base;
    if (f.map) s = { type: 'object', additionalProperties: base };
    else if (f.repeated) s = { type: 'array', items: base };
    const doc = [f.comment, f.partOf && !f.partOf.name.startsWith('_') ? `One of: ${f.partOf.fieldsArray.map(jsonName).join(', ')}.` : '']
      .filter(Boolean)
      .join(' ');
    if (doc) s = s.$ref ? { allOf: [s], description: doc } : { ...s, description: doc };
    return s;
  }

  private messageSchema(t: protobuf.Type): Schema {
    const properties: Record<string, Schema> = {};
    for (const f of t.fieldsArray) properties[jsonName(f)] = this.field(f);
    return { type: 'object', ...(t.comment ? { description: t.comment } : {}), properties };
  }
}

/** Scalar leaf fields of a message, as dotted JSON paths, for query parameters. */
function queryFields(t: protobuf.Type, exclude: Set<string>, prefix = '', depth = 0): { name: string; field: protobuf.Field }[] {
  const out: { name: string; field: protobuf.Field }[] = [];
  for (const f of t.fieldsArray) {
    const protoPath = prefix ? `${prefix}.${f.name}` : f.name;
    if (exclude.has(protoPath) || f.map) continue;
    if (f.resolvedType instanceof protobuf.Type && !WKT[f.resolvedType.fullName]) {
      if (!f.repeated && depth < 3) out.push(...queryFields(f.resolvedType, exclude, protoPath, depth + 1));
      continue;
    }
    out.push({ name: protoPath, field: f });
  }
  return out;
}

const ERROR_SCHEMA: Schema = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'integer', description: 'HTTP status' },
        status: { type: 'string', description: 'gRPC status name, e.g. NOT_FOUND' },
        message: { type: 'string' },
        reason: { type: 'string', description: 'diffmesh reason code, e.g. UNKNOWN_MODEL' },
        field: { type: 'string', description: 'the request field at fault' },
        details: { type: 'array', items: { type: 'object', additionalProperties: true } },
      },
    },
  },
};

const OPENAI_ERROR: Schema = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        message: { type: 'string' },
        type: { type: 'string' },
        param: { type: 'string', nullable: true },
        code: { type: 'string' },
      },
    },
  },
};

function jsonBody(schema: Schema): Schema {
  return { content: { 'application/json': { schema } } };
}

/** A body taken as JSON or as form data (multipart/form-data with files, or urlencoded without). */
function formOrJsonBody(schema: Schema, multipart: Schema = schema): Schema {
  return {
    content: {
      'multipart/form-data': { schema: multipart },
      'application/x-www-form-urlencoded': { schema },
      'application/json': { schema },
    },
  };
}

const IMAGE_PARAMS: Record<string, Schema> = {
  prompt: { type: 'string' },
  model: { type: 'string' },
  n: { type: 'integer', minimum: 1, maximum: 4, default: 1 },
  size: { type: 'string', example: '256x256' },
  response_format: { type: 'string', enum: ['b64_json', 'url'], default: 'b64_json' },
  negative_prompt: { type: 'string' },
  num_inference_steps: { type: 'integer', minimum: 1, maximum: 4294967295 },
  guidance_scale: { type: 'number' },
  seed: { type: 'integer' },
  priority: { type: 'integer' },
  deadline: {
    oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer' }],
    description: 'when the request must be done by: an RFC 3339 time or ms since the epoch',
  },
};

const IMAGES_RESPONSE: Schema = {
  description: 'The images',
  ...jsonBody({
    type: 'object',
    properties: {
      created: { type: 'integer' },
      data: {
        type: 'array',
        items: {
          type: 'object',
          properties: { b64_json: { type: 'string' }, url: { type: 'string' }, revised_prompt: { type: 'string' } },
        },
      },
      output_format: { type: 'string', enum: ['png'] },
      size: { type: 'string' },
    },
  }),
};

const INPUT_IMAGE_LIMITS = 'PNG, JPEG or WebP, one frame, at most maxImageBytes (15 MiB by default) and 8192×8192 pixels';
const DATA_URL: Schema = {
  type: 'string',
  description: 'a base64 data URL, e.g. data:image/png;base64,…',
  example: 'data:image/png;base64,iVBORw0KGgo…',
};

function openAiPaths(): Record<string, Schema> {
  const err = { default: { description: 'Error', ...jsonBody({ $ref: '#/components/schemas/OpenAIError' }) } };
  const video = { $ref: '#/components/schemas/Video' };
  const idParam = { name: 'video_id', in: 'path', required: true, schema: { type: 'string' } };
  return {
    '/v1/images/generations': {
      post: {
        operationId: 'createImage',
        tags: ['OpenAI compatible'],
        summary: 'Generates images from a prompt (n requests with seeds seed, seed+1, …).',
        requestBody: {
          required: true,
          ...formOrJsonBody({ type: 'object', required: ['prompt'], properties: IMAGE_PARAMS }),
        },
        responses: { '200': IMAGES_RESPONSE, ...err },
      },
    },
    '/v1/images/edits': {
      post: {
        operationId: 'createImageEdit',
        tags: ['OpenAI compatible'],
        summary: 'Edits an image from a prompt (img2img) on a model that takes an input image (default: the first image-to-image model).',
        description:
          `The image: ${INPUT_IMAGE_LIMITS}. A corrupt, oversized or foreign image is a 400 naming \`image\`; a model that takes ` +
          'no input image is a 400 naming `model`. `strength` (a diffmesh extension) says how much of the image is noised away.',
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                required: ['image', 'prompt'],
                properties: {
                  image: {
                    type: 'string',
                    format: 'binary',
                    description: `the image to edit (\`image[]\` with one file also works): ${INPUT_IMAGE_LIMITS}`,
                  },
                  ...IMAGE_PARAMS,
                  strength: {
                    type: 'number',
                    minimum: 0,
                    exclusiveMinimum: true,
                    maximum: 1,
                    description: "img2img strength (default: the model's, 0.8)",
                  },
                },
              },
              encoding: { image: { contentType: 'image/png, image/jpeg, image/webp' } },
            },
            'application/json': {
              schema: {
                type: 'object',
                required: ['images', 'prompt'],
                properties: {
                  images: { type: 'array', minItems: 1, maxItems: 1, items: { type: 'object', properties: { image_url: DATA_URL } } },
                  ...IMAGE_PARAMS,
                  strength: { type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 1 },
                },
              },
            },
          },
        },
        responses: { '200': IMAGES_RESPONSE, ...err },
      },
    },
    '/v1/images/results/{result_id}': {
      get: {
        operationId: 'getImageResult',
        tags: ['OpenAI compatible'],
        summary: 'The PNG behind a `url` result (no API key needed; the id is unguessable; expires).',
        parameters: [{ name: 'result_id', in: 'path', required: true, schema: { type: 'string' } }],
        security: [],
        responses: { '200': { description: 'PNG', content: { 'image/png': { schema: { type: 'string', format: 'binary' } } } }, ...err },
      },
    },
    '/v1/images/objects/{object_id}.png': {
      get: {
        operationId: 'getObjectImage',
        tags: ['OpenAI compatible'],
        summary: "The first frame of a pixels object (a Completed event's result) as PNG; a diffmesh extension.",
        parameters: [
          {
            name: 'object_id',
            in: 'path',
            required: true,
            description: 'percent-encoded (object ids contain ":")',
            schema: { type: 'string' },
          },
          {
            name: 'capability',
            in: 'query',
            required: false,
            description: "the object's capability, from its ObjectRef (required when the tensor services issue capabilities)",
            schema: { type: 'string' },
          },
        ],
        responses: { '200': { description: 'PNG', content: { 'image/png': { schema: { type: 'string', format: 'binary' } } } }, ...err },
      },
    },
    '/v1/models': {
      get: {
        operationId: 'listModels',
        tags: ['OpenAI compatible'],
        responses: {
          '200': {
            description: 'Models',
            ...jsonBody({
              type: 'object',
              properties: { object: { type: 'string' }, data: { type: 'array', items: { $ref: '#/components/schemas/Model' } } },
            }),
          },
          ...err,
        },
      },
    },
    '/v1/models/{model}': {
      get: {
        operationId: 'retrieveModel',
        tags: ['OpenAI compatible'],
        parameters: [{ name: 'model', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { '200': { description: 'Model', ...jsonBody({ $ref: '#/components/schemas/Model' }) }, ...err },
      },
    },
    '/v1/videos': {
      post: {
        operationId: 'createVideo',
        tags: ['OpenAI compatible'],
        summary: 'Starts a video job (JSON or form data); with input_reference, image-to-video from that first frame.',
        description:
          `\`input_reference\` (${INPUT_IMAGE_LIMITS}) makes the job image-to-video, on a model that takes an input image ` +
          '(default: the first image-to-video model); a corrupt, oversized or foreign image is a 400 naming `input_reference`.',
        requestBody: {
          required: true,
          ...formOrJsonBody(
            {
              type: 'object',
              required: ['prompt'],
              properties: {
                ...VIDEO_PARAMS,
                input_reference: {
                  oneOf: [DATA_URL, { type: 'object', properties: { image_url: DATA_URL } }],
                  description: 'the first frame, as a data URL or { image_url } (form data: input_reference[image_url])',
                },
              },
            },
            {
              type: 'object',
              required: ['prompt'],
              properties: {
                ...VIDEO_PARAMS,
                input_reference: { type: 'string', format: 'binary', description: `the first frame: ${INPUT_IMAGE_LIMITS}` },
              },
            },
          ),
        },
        responses: { '200': { description: 'The job', ...jsonBody(video) }, ...err },
      },
      get: {
        operationId: 'listVideos',
        tags: ['OpenAI compatible'],
        summary: "The caller's jobs (with API keys, those its key created), newest first unless order=asc.",
        parameters: [
          { name: 'after', in: 'query', description: 'a job id: list the jobs after it', schema: { type: 'string' } },
          {
            name: 'limit',
            in: 'query',
            description: 'most jobs in the page (default: all)',
            schema: { type: 'integer', minimum: 1, maximum: 100 },
          },
          { name: 'order', in: 'query', schema: { type: 'string', enum: ['asc', 'desc'], default: 'desc' } },
        ],
        responses: {
          '200': {
            description: 'Jobs',
            ...jsonBody({
              type: 'object',
              properties: {
                data: { type: 'array', items: video },
                has_more: { type: 'boolean' },
                first_id: { type: 'string' },
                last_id: { type: 'string' },
              },
            }),
          },
          ...err,
        },
      },
    },
    '/v1/videos/{video_id}': {
      get: {
        operationId: 'getVideo',
        tags: ['OpenAI compatible'],
        parameters: [idParam],
        responses: { '200': { description: 'The job', ...jsonBody(video) }, ...err },
      },
      delete: {
        operationId: 'deleteVideo',
        tags: ['OpenAI compatible'],
        summary: 'Cancels a running job (its status becomes cancelled); deletes a finished one.',
        parameters: [idParam],
        responses: { '200': { description: 'The job', ...jsonBody(video) }, ...err },
      },
    },
    '/v1/videos/{video_id}/content': {
      get: {
        operationId: 'getVideoContent',
        tags: ['OpenAI compatible'],
        summary: 'The clip: MP4 when ffmpeg runs on the gateway, else an animated GIF (header X-Diffmesh-Video-Format says which).',
        parameters: [idParam, { name: 'variant', in: 'query', schema: { type: 'string', enum: ['video', 'thumbnail'], default: 'video' } }],
        responses: {
          '200': {
            description: 'Video',
            content: {
              'video/mp4': { schema: { type: 'string', format: 'binary' } },
              'image/gif': { schema: { type: 'string', format: 'binary' } },
              'image/png': { schema: { type: 'string', format: 'binary' } },
            },
          },
          ...err,
        },
      },
    },
  };
}

const VIDEO_PARAMS: Record<string, Schema> = {
  prompt: { type: 'string' },
  model: { type: 'string' },
  size: { type: 'string', example: '256x256' },
  seconds: { type: 'string', example: '2' },
  num_frames: { type: 'integer', minimum: 1, maximum: 4294967295 },
  fps: { type: 'number' },
  seed: { type: 'integer' },
  negative_prompt: { type: 'string' },
  num_inference_steps: { type: 'integer', minimum: 1, maximum: 4294967295 },
  guidance_scale: { type: 'number' },
  priority: { type: 'integer' },
  deadline: {
    oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer' }],
    description: 'when the request must be done by: an RFC 3339 time or ms since the epoch',
  },
};

const OPENAI_SCHEMAS: Record<string, Schema> = {
  OpenAIError: OPENAI_ERROR,
  Model: {
    type: 'object',
    properties: {
      id: { type: 'string' },
      object: { type: 'string' },
      created: { type: 'integer' },
      owned_by: { type: 'string' },
      modalities: {
        type: 'array',
        description: 'what the model generates; image-to-image and image-to-video models take an input image',
        items: { type: 'string', enum: ['text-to-image', 'text-to-video', 'image-to-video', 'image-to-image'] },
      },
    },
  },
  Video: {
    type: 'object',
    properties: {
      id: { type: 'string' },
      object: { type: 'string', enum: ['video'] },
      status: { type: 'string', enum: ['queued', 'in_progress', 'completed', 'failed', 'cancelled'] },
      progress: { type: 'integer', minimum: 0, maximum: 100 },
      model: { type: 'string' },
      prompt: { type: 'string' },
      size: { type: 'string' },
      seconds: { type: 'string' },
      created_at: { type: 'integer' },
      completed_at: { type: 'integer', nullable: true },
      expires_at: { type: 'integer', nullable: true },
      error: { type: 'object', nullable: true, properties: { code: { type: 'string' }, message: { type: 'string' } } },
    },
  },
};

/** Builds the OpenAPI 3.0 document for the routes. */
export function openApiDocument(routes: readonly ProtoRoute[], opts: { version: string; authenticated: boolean }): Record<string, unknown> {
  const components = new Components();
  const paths: Record<string, Record<string, Schema>> = {};
  for (const route of routes) {
    const b = route.binding;
    const path = b.pathTemplate.replace(/\{([^}=]+)=[^}]*\}/g, '{$1}');
    const pathVars = new Set(route.template.variables);
    const parameters: Schema[] = route.template.variables.map((v) => ({ name: v, in: 'path', required: true, schema: { type: 'string' } }));
    if (b.body !== '*') {
      const exclude = new Set([...pathVars, ...(b.body ? [b.body] : [])]);
      for (const { name, field } of queryFields(route.requestType, exclude)) {
        const s = components.field(field);
        parameters.push({ name, in: 'query', required: false, schema: s, ...(field.comment ? { description: field.comment } : {}) });
      }
    }
    const responseSchema = b.responseBody
      ? components.field(route.responseType.fields[b.responseBody])
      : components.ref(route.responseType);
    const ok: Schema = b.responseStream
      ? {
          description:
            'A stream of messages: newline-delimited JSON ({"result": message} per line, {"error": …} on failure), or server-sent events with Accept: text/event-stream.',
          content: {
            'application/x-ndjson': {
              schema: {
                type: 'object',
                properties: { result: responseSchema, error: { $ref: '#/components/schemas/Error/properties/error' } },
              },
            },
            'text/event-stream': { schema: { type: 'string', description: 'data: <message JSON> per event; event: error, event: end' } },
          },
        }
      : { description: 'OK', ...jsonBody(responseSchema) };
    const op: Schema = {
      operationId: route.id.replace('.', '_'),
      tags: [route.id.split('.')[0]],
      ...(route.comment ? { summary: route.comment.split('\n')[0], description: route.comment } : {}),
      parameters,
      responses: { '200': ok, default: { description: 'Error', ...jsonBody({ $ref: '#/components/schemas/Error' }) } },
    };
    if (b.body) {
      const bodySchema = b.body === '*' ? components.ref(route.requestType) : components.field(route.requestType.fields[b.body]);
      op.requestBody = { required: true, ...jsonBody(bodySchema) };
    }
    paths[path] ??= {};
    paths[path][b.httpMethod.toLowerCase()] = op;
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'diffmesh gateway',
      version: opts.version,
      description:
        'HTTP/JSON API of diffmesh. The /api/v1 routes are derived from the google.api.http annotations of the protos ' +
        '(proto3 JSON mapping: lowerCamelCase names, original proto names accepted too, 64-bit integers as strings, ' +
        'enums by name, timestamps in RFC 3339, bytes in base64: an input image goes in params.input_image.data as ' +
        'base64 PNG, JPEG or WebP, allowed on top of the body limit). The /v1 routes are OpenAI compatible.',
    },
    paths: { ...paths, ...openAiPaths() },
    components: {
      schemas: { ...components.schemas, Error: ERROR_SCHEMA, ...OPENAI_SCHEMAS },
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
    },
    ...(opts.authenticated ? { security: [{ bearerAuth: [] }] } : {}),
  };
}
