// Surface: every route of the gateway, as its OpenAPI document lists them (a route added to
// the protos or to the OpenAI endpoints is fuzzed without a change here), with hostile path
// variables and query parameters, JSON bodies (wrong types, huge numbers, deep nesting,
// broken text), form bodies and multipart uploads with broken parts, and missing or wrong
// API keys. Every answer must be a 2xx or a 4xx whose body names what was wrong.
import { request } from 'node:http';
import fc from 'fast-check';
import { hostileJsonValue, forEachInput } from './generators.js';
import { FUZZ_KEY, FUZZ_MODEL, type FuzzMesh } from './mesh.js';
import type { FuzzReport } from './report.js';

/** One operation of the OpenAPI document. */
interface Operation {
  method: string;
  template: string;
  params: Array<{ name: string; in: string }>;
  /** Request body media types with their top-level property names (and the names of nested objects' properties). */
  bodies: Array<{ type: string; properties: string[]; nested: Record<string, string[]> }>;
}

type Schema = { $ref?: string; properties?: Record<string, Schema>; allOf?: Schema[]; type?: string };

function resolve(doc: { components?: { schemas?: Record<string, Schema> } }, s: Schema | undefined): Schema | undefined {
  if (!s) return undefined;
  if (s.$ref) return resolve(doc, doc.components?.schemas?.[s.$ref.slice(s.$ref.lastIndexOf('/') + 1)]);
  if (s.allOf?.length) return resolve(doc, s.allOf[0]);
  return s;
}

/** The operations of the gateway's OpenAPI document. */
export async function operations(mesh: FuzzMesh): Promise<Operation[]> {
  const doc = (await (await fetch(`${mesh.gateway.address}/openapi.json`)).json()) as {
    paths: Record<
      string,
      Record<string, { parameters?: Array<{ name: string; in: string }>; requestBody?: { content: Record<string, { schema?: Schema }> } }>
    >;
    components?: { schemas?: Record<string, Schema> };
  };
  const ops: Operation[] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (method === 'parameters') continue;
      const bodies = Object.entries(op.requestBody?.content ?? {}).map(([type, media]) => {
        const schema = resolve(doc, media.schema);
        const nested: Record<string, string[]> = {};
        for (const [name, prop] of Object.entries(schema?.properties ?? {})) {
          const inner = resolve(doc, prop);
          if (inner?.properties) nested[name] = Object.keys(inner.properties);
        }
        return { type, properties: Object.keys(schema?.properties ?? {}), nested };
      });
      ops.push({ method: method.toUpperCase(), template, params: op.parameters ?? [], bodies });
    }
  }
  return ops;
}

/** A body and its media type, named for the figures. */
interface BodyChoice {
  made: string;
  body?: string | Buffer;
  type?: string;
}

/** What one input sends. */
interface HttpInput {
  made: string;
  op: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

const pathValue = fc.oneof(
  fc.string({ maxLength: 30 }).map(encodeURIComponent),
  fc.constantFrom('%', '%zz', '%00', '%ff%fe', '..', '%2e%2e', 'a%2Fb', 'x:y', 'ObjectId:with:colons', '%F0%9F%98%80'),
  fc.string({ minLength: 2000, maxLength: 9000 }).map(encodeURIComponent),
);

const queryValue = fc.oneof(
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
  fc.constantFrom('-1', '1e999', '99999999999999999999999', 'NaN', '%zz', '', 'true', '0x10'),
);

/** JSON text that does not parse, or parses into something odd. */
const brokenJson = fc.oneof(
  fc
    .jsonValue()
    .map((v) => JSON.stringify(v))
    .chain((t) => fc.nat({ max: Math.max(0, t.length - 1) }).map((n) => t.slice(0, n))),
  fc.constantFrom(
    '{"a":}',
    '{"prompt": "x"',
    '{"prompt": "\\ud800"}',
    '\ufeff{}',
    '{"n": 1e999999}',
    `{"n": ${'9'.repeat(400)}}`,
    '{}}',
    'nul',
    '{"__proto__": {"x": 1}}',
  ),
  fc.integer({ min: 1000, max: 200_000 }).map((d) => '['.repeat(d) + ']'.repeat(d)),
  fc.integer({ min: 1000, max: 60_000 }).map((d) => '{"a":'.repeat(d) + '1' + '}'.repeat(d)),
);

function jsonObject(body: Operation['bodies'][number]): fc.Arbitrary<string> {
  const names = body.properties.length > 0 ? body.properties : ['prompt'];
  const nestedValue = (name: string): fc.Arbitrary<unknown> => {
    const inner = body.nested[name];
    if (!inner?.length) return hostileJsonValue;
    return fc.oneof(
      hostileJsonValue,
      fc.dictionary(fc.constantFrom(...inner, 'unknownField'), hostileJsonValue, { minKeys: 1, maxKeys: 4 }),
    );
  };
  return fc
    .uniqueArray(fc.constantFrom(...names, 'unknown_field', 'model', 'prompt'), { minLength: 1, maxLength: 5 })
    .chain((keys) => fc.tuple(...keys.map((k) => nestedValue(k).map((v) => [k, v] as const))))
    .map((entries) => JSON.stringify(Object.fromEntries(entries)));
}

/**
 * Valid bodies of the routes that start generations (small and fast: 64×64, 2 steps), each
 * path a field that {@link oneBadField} may replace. The mesh's own validation is reached
 * only when everything else is right.
 */
const VALID_BODIES: Record<string, { body: Record<string, unknown>; fields: string[][] }> = {
  '/api/v1/requests': {
    body: {
      model: FUZZ_MODEL,
      params: { prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 2, stepCache: { threshold: 0, maxSkippedSteps: 2 } },
    },
    fields: [
      ['model'],
      ['priority'],
      ['timeoutMs'],
      ['requestId'],
      ...[
        'prompt',
        'negativePrompt',
        'width',
        'height',
        'numFrames',
        'numInferenceSteps',
        'guidanceScale',
        'seed',
        'fps',
        'strength',
        'inputImage',
        'stepCache',
      ].map((f) => ['params', f]),
      ['params', 'stepCache', 'threshold'],
      ['params', 'stepCache', 'maxSkippedSteps'],
    ],
  },
  '/v1/images/generations': {
    body: { model: FUZZ_MODEL, prompt: 'a red circle', size: '64x64', num_inference_steps: 2 },
    fields: [
      ['model'],
      ['prompt'],
      ['n'],
      ['size'],
      ['response_format'],
      ['negative_prompt'],
      ['num_inference_steps'],
      ['guidance_scale'],
      ['seed'],
      ['priority'],
      ['output_format'],
    ],
  },
  '/v1/videos': {
    body: { model: FUZZ_MODEL, prompt: 'a red circle', size: '64x64', num_frames: 2, num_inference_steps: 2 },
    fields: [
      ['model'],
      ['prompt'],
      ['size'],
      ['seconds'],
      ['num_frames'],
      ['fps'],
      ['seed'],
      ['num_inference_steps'],
      ['guidance_scale'],
      ['input_reference'],
    ],
  },
};
VALID_BODIES['/api/v1/generate'] = VALID_BODIES['/api/v1/requests']!;

/** A valid body of the route with one field holding a hostile value (none for other routes). */
function oneBadField(template: string): Array<fc.Arbitrary<string>> {
  const valid = VALID_BODIES[template];
  if (!valid) return [];
  return [
    fc.tuple(fc.constantFrom(...valid.fields), hostileJsonValue).map(([fieldPath, value]) => {
      const body = structuredClone(valid.body);
      let at = body;
      for (const key of fieldPath.slice(0, -1)) at = at[key] as Record<string, unknown>;
      at[fieldPath.at(-1)!] = value;
      return JSON.stringify(body);
    }),
  ];
}

function formBody(body: Operation['bodies'][number]): fc.Arbitrary<string> {
  return fc
    .array(
      fc.tuple(
        fc.constantFrom(...body.properties, 'unknown', 'prompt'),
        fc.oneof(queryValue, fc.string({ maxLength: 40 }).map(encodeURIComponent)),
      ),
      {
        minLength: 1,
        maxLength: 6,
      },
    )
    .map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join('&'));
}

const BOUNDARY = 'fuzzboundary7MA4YWxkTrZu0gW';

/** A multipart body with broken parts: no closing boundary, parts without names, files where text goes, broken images, duplicates. */
function multipartBody(body: Operation['bodies'][number]): fc.Arbitrary<{ made: string; body: Buffer; type: string }> {
  const part = fc.record({
    name: fc.oneof(fc.constantFrom(...body.properties, 'image', 'image[]', 'input_reference', 'mask', 'unknown'), fc.constant('')),
    file: fc.boolean(),
    filename: fc.constantFrom('a.png', '../../etc/passwd', '', 'x'.repeat(300)),
    type: fc.constantFrom('image/png', 'image/jpeg', 'text/plain', 'application/octet-stream', ''),
    data: fc.oneof(
      fc.uint8Array({ maxLength: 300 }),
      fc.constantFrom(Buffer.from('\x89PNG\r\n\x1a\n'), Buffer.from([0xff, 0xd8, 0xff]), Buffer.from('GIF89a')),
      fc.string({ maxLength: 40 }).map((s) => Buffer.from(s)),
    ),
  });
  return fc
    .record({
      parts: fc.array(part, { minLength: 1, maxLength: 5 }),
      flaw: fc.constantFrom('no-closing-boundary', 'wrong-boundary', 'no-boundary-param', 'cut', 'none'),
    })
    .map(({ parts, flaw }) => {
      const chunks: Buffer[] = [];
      for (const p of parts) {
        const disposition = p.name === '' ? 'form-data' : `form-data; name="${p.name}"${p.file ? `; filename="${p.filename}"` : ''}`;
        chunks.push(
          Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`),
          Buffer.from(p.data),
          Buffer.from('\r\n'),
        );
      }
      if (flaw !== 'no-closing-boundary') chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
      let bytes = Buffer.concat(chunks);
      if (flaw === 'cut') bytes = bytes.subarray(0, Math.floor(bytes.length / 2));
      const type =
        flaw === 'no-boundary-param'
          ? 'multipart/form-data'
          : `multipart/form-data; boundary=${flaw === 'wrong-boundary' ? 'other' : BOUNDARY}`;
      return { made: `multipart ${flaw}`, body: bytes, type };
    });
}

function httpInput(ops: Operation[]): fc.Arbitrary<HttpInput> {
  return fc.integer({ min: 0, max: ops.length - 1 }).chain((i) => {
    const op = ops[i];
    const pathParams = op.params.filter((p) => p.in === 'path');
    const queryParams = op.params.filter((p) => p.in === 'query').map((p) => p.name);
    const path = fc.tuple(...pathParams.map(() => pathValue)).map((values) => {
      let p = op.template;
      pathParams.forEach((param, k) => (p = p.replace(`{${param.name}}`, values[k])));
      return p;
    });
    const query = fc
      .array(fc.tuple(fc.constantFrom(...queryParams, 'unknown', 'format'), queryValue), { maxLength: 3 })
      .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));
    const auth = fc.constantFrom<Record<string, string>>(
      ...Array.from({ length: 18 }, () => ({ authorization: `Bearer ${FUZZ_KEY}` })),
      {},
      { authorization: 'Bearer wrong-key' },
    );
    const bodies = op.bodies.length ? op.bodies : [{ type: 'application/json', properties: [], nested: {} }];
    const body: fc.Arbitrary<BodyChoice> = fc.constantFrom(...bodies).chain((b): fc.Arbitrary<BodyChoice> => {
      if (b.type === 'multipart/form-data') return multipartBody(b);
      if (b.type === 'application/x-www-form-urlencoded') return formBody(b).map((t) => ({ made: 'form', body: t, type: b.type }));
      return fc.oneof(
        jsonObject(b).map((t) => ({ made: 'json object', body: t, type: 'application/json' })),
        ...oneBadField(op.template).map((arb) => arb.map((t) => ({ made: 'json one bad field', body: t, type: 'application/json' }))),
        fc
          .jsonValue({ maxDepth: 2 })
          .map((v) => ({ made: 'json not an object', body: JSON.stringify(v) ?? 'null', type: 'application/json' })),
        brokenJson.map((t) => ({ made: 'json broken', body: t, type: 'application/json' })),
        fc
          .constantFrom('text/plain', 'application/xml', 'application/json; charset=utf-16')
          .map((type) => ({ made: 'wrong content type', body: '{}', type })),
      );
    });
    // GET and DELETE routes get no body, most of the time.
    const none: BodyChoice = { made: 'no body' };
    const withBody: fc.Arbitrary<BodyChoice> =
      op.method === 'POST' ? body : fc.oneof({ weight: 9, arbitrary: fc.constant(none) }, { weight: 1, arbitrary: body });
    return fc.tuple(path, query, auth, withBody).map(([p, q, headers, b]): HttpInput => ({
      made: b.made,
      op: i,
      method: op.method,
      path: p + q,
      headers: { ...headers, ...(b.type ? { 'content-type': b.type } : {}) },
      ...(b.body !== undefined ? { body: b.body } : {}),
    }));
  });
}

/** What is wrong with an answer, or undefined. */
function wrongAnswer(status: number, text: string, streaming: boolean): string | undefined {
  if (status >= 500) return `answered ${status}: ${text.slice(0, 300)}`;
  // A stream that has begun reports a later failure as a last `{"error": …}` line or SSE event.
  if (status < 400)
    return streaming && /"(status|code)":\s*"(INTERNAL|UNKNOWN)"/.test(text)
      ? `a ${status} stream ended with an internal error: ${text.slice(-300)}`
      : undefined;
  let body: { error?: { message?: string; field?: string; param?: string | null; reason?: string; code?: string | number } } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return `answered ${status} without a JSON error body: ${text.slice(0, 200)}`;
  }
  const err = body?.error;
  if (!err?.message) return `answered ${status} without an error message: ${text.slice(0, 200)}`;
  const reason = String(err.reason ?? err.code ?? '').toUpperCase();
  // A body that is not JSON or form data at all is at fault as a whole: its message names the request body.
  if (status === 400 && reason === 'INVALID_PARAMETER' && !err.field && !err.param && !err.message.startsWith('request body')) {
    return `400 INVALID_PARAMETER naming no field: ${err.message}`;
  }
  return undefined;
}

/** Sends an input as it is (node:http: the path is not normalized, and a GET may carry a body). */
function send(base: string, input: HttpInput): Promise<{ status: number; text: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: input.method,
        path: input.path,
        // Framed by its length: Node's client sends a GET body unframed, which is malformed HTTP (a bare 400).
        headers: { ...input.headers, ...(input.body !== undefined ? { 'content-length': String(Buffer.byteLength(input.body)) } : {}) },
        timeout: 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 15 s')));
    req.on('error', reject);
    req.end(input.body);
  });
}

export async function fuzzHttpRoutes(mesh: FuzzMesh, report: FuzzReport): Promise<void> {
  const surface = 'http';
  const ops = await operations(mesh);
  await forEachInput('http', httpInput(ops), async (input) => {
    const op = ops[input.op];
    const what = `${input.method} ${input.path.slice(0, 200)} (${input.made})`;
    let status: number;
    let text: string;
    try {
      ({ status, text } = await send(mesh.gateway.address, input));
    } catch (err) {
      report.fail(surface, `${what}: no answer (${String(err)})`);
      throw new Error(`${what}: no answer (${String(err)})`);
    }
    report.record(surface, { made: input.made, target: `${op.method} ${op.template}` }, String(status));
    // Generate and Watch stream their events (a failed request's event carries its error code).
    const wrong = wrongAnswer(status, text, /\/generate|:watch/.test(op.template));
    if (wrong) {
      report.fail(surface, `${what}: ${wrong}`);
      throw new Error(`${what}: ${wrong}`);
    }
    // The gateway and the scheduler behind it still answer.
    const models = await fetch(`${mesh.gateway.address}/v1/models`, { headers: { authorization: `Bearer ${FUZZ_KEY}` } });
    await models.arrayBuffer();
    if (models.status !== 200) {
      report.fail(surface, `${what}: GET /v1/models answered ${models.status} afterwards`);
      throw new Error(`${what}: GET /v1/models answered ${models.status} afterwards`);
    }
  });
}
