import { httpBindings } from '@diffmesh/protos';
import { Code, DiffmeshError, toWire } from '@diffmesh/core';
import { describe, expect, it } from 'vitest';
import { RateLimiter } from './auth.js';
import { describeError, httpStatusOf } from './errors.js';
import { openApiDocument } from './openapi.js';
import { encodeObject, jsonToObject, messageToJson, decodeObject, protoRoot } from './proto-json.js';
import { RouteTable, matchTemplate, parseTemplate } from './routes.js';

/** A concrete path for a template: every variable filled with a value that needs escaping. */
function concretePath(template: string, value: string): string {
  return template.replace(/\{[^}]+\}/g, encodeURIComponent(value));
}

describe('route table from the google.api.http annotations', () => {
  const bindings = httpBindings();
  const table = new RouteTable(bindings);

  it('routes every binding httpBindings() reports, to that binding', () => {
    expect(bindings.length).toBeGreaterThanOrEqual(8);
    for (const b of bindings) {
      const m = table.match(b.httpMethod, concretePath(b.pathTemplate, 'req:with/odd chars'));
      expect(m.kind, `${b.httpMethod} ${b.pathTemplate}`).toBe('route');
      if (m.kind !== 'route') continue;
      expect(m.route.binding).toBe(b);
      for (const v of m.route.template.variables) expect(m.params[v]).toBe('req:with/odd chars');
    }
  });

  it('reads a :verb suffix before a variable, so an id never swallows the verb', () => {
    const watch = table.match('GET', '/api/v1/requests/abc:watch');
    expect(watch).toMatchObject({ kind: 'route', route: { id: 'SchedulerService.Watch' }, params: { req_id: 'abc' } });
    const get = table.match('GET', '/api/v1/requests/abc');
    expect(get).toMatchObject({ kind: 'route', route: { id: 'SchedulerService.Get' }, params: { req_id: 'abc' } });
    // An object id with raw ':' characters still reaches Stat.
    expect(table.match('GET', '/api/v1/objects/r1:pixels:ab12')).toMatchObject({ kind: 'route', params: { object_id: 'r1:pixels:ab12' } });
  });

  it('answers method-not-allowed with the allowed methods, and none for unknown paths', () => {
    expect(table.match('GET', '/api/v1/requests/abc:cancel')).toEqual({ kind: 'method-not-allowed', allowed: ['POST'] });
    expect(table.match('DELETE', '/api/v1/models')).toEqual({ kind: 'method-not-allowed', allowed: ['GET'] });
    expect(table.match('GET', '/api/v1/nothing')).toEqual({ kind: 'none' });
  });

  it('parses templates with nested patterns and ** captures', () => {
    const t = parseTemplate('/v1/{name=projects/*/things/**}:get');
    expect(t.verb).toBe('get');
    expect(matchTemplate(t, ['v1', 'projects', 'p1', 'things', 'a', 'b'])).toEqual({ name: 'projects/p1/things/a/b' });
    expect(matchTemplate(t, ['v1', 'other', 'p1', 'things'])).toBeUndefined();
    expect(() => parseTemplate('/a/**/b')).toThrow(/must be the last/);
    expect(() => parseTemplate('no-slash')).toThrow(/must start/);
  });

  it('describes every route in the OpenAPI document', () => {
    const doc = openApiDocument(table.routes, { version: '0.1.0', authenticated: true }) as {
      paths: Record<string, Record<string, { operationId: string; parameters: { name: string; in: string }[] }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    for (const b of bindings) {
      const op = doc.paths[b.pathTemplate]?.[b.httpMethod.toLowerCase()];
      expect(op, b.pathTemplate).toBeDefined();
    }
    expect(doc.paths['/api/v1/objects/{object_id}/content'].get.parameters.map((p) => `${p.in}:${p.name}`)).toEqual([
      'path:object_id',
      'query:offset',
      'query:length',
      'query:capability',
    ]);
    const params = doc.components.schemas['diffmesh.common.v1.GenerationParams'].properties!;
    expect(Object.keys(params)).toContain('numInferenceSteps');
    expect(params.seed).toMatchObject({ type: 'string', format: 'uint64' });
  });
});

describe('proto3 JSON mapping', () => {
  const submit = protoRoot().lookupType('diffmesh.scheduler.v1.SubmitRequest');
  const getResponse = protoRoot().lookupType('diffmesh.scheduler.v1.GetResponse');

  it('accepts JSON names and original proto names, 64-bit integers as strings or numbers', () => {
    const a = jsonToObject(submit, {
      model: 'm',
      params: { prompt: 'p', numInferenceSteps: 4, seed: '18446744073709551615' },
      timeoutMs: 5,
    });
    const b = jsonToObject(submit, {
      model: 'm',
      params: { prompt: 'p', num_inference_steps: 4, seed: '18446744073709551615' },
      timeout_ms: 5,
    });
    expect(a).toEqual(b);
    const round = decodeObject(submit, encodeObject(submit, a));
    expect(messageToJson(submit, round)).toMatchObject({
      model: 'm',
      timeoutMs: 5,
      params: { numInferenceSteps: 4, seed: '18446744073709551615' },
    });
  });

  it('names the field of a bad value, an unknown field or a duplicate', () => {
    const bad = (json: Record<string, unknown>): DiffmeshError => {
      try {
        jsonToObject(submit, json);
      } catch (err) {
        return err as DiffmeshError;
      }
      throw new Error('expected an error');
    };
    expect(bad({ params: { width: 'wide' } })).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'params.width' });
    expect(bad({ params: { width: -1 } }).message).toMatch(/params\.width: .*out of range/);
    expect(bad({ promt: 'x' })).toMatchObject({ field: 'promt' });
    expect(bad({ timeoutMs: 1, timeout_ms: 2 }).message).toMatch(/set twice/);
    expect(bad({ params: [] })).toMatchObject({ field: 'params' });
  });

  it('writes enums by name, timestamps in RFC 3339 and leaves unset messages out', () => {
    const obj = jsonToObject(getResponse, {
      req_id: 'r',
      status: 'REQUEST_STATUS_RUNNING',
      createdAt: '2024-05-01T12:00:00.250Z',
      results: [{ objectId: 'o', sizeBytes: '9007199254740993', shape: ['1', 256] }],
    });
    const json = messageToJson(getResponse, decodeObject(getResponse, encodeObject(getResponse, obj))) as Record<string, unknown>;
    expect(json).toMatchObject({
      reqId: 'r',
      status: 'REQUEST_STATUS_RUNNING',
      createdAt: '2024-05-01T12:00:00.250Z',
      results: [{ objectId: 'o', sizeBytes: '9007199254740993', shape: ['1', '256'] }],
    });
    expect(json).not.toHaveProperty('error');
    expect(json).not.toHaveProperty('updatedAt');
  });
});

describe('gRPC status → HTTP', () => {
  it('maps codes as grpc-gateway does', () => {
    const table: [number, number][] = [
      [Code.INVALID_ARGUMENT, 400],
      [Code.NOT_FOUND, 404],
      [Code.RESOURCE_EXHAUSTED, 429],
      [Code.UNAVAILABLE, 503],
      [Code.DEADLINE_EXCEEDED, 504],
      [Code.UNAUTHENTICATED, 401],
      [Code.PERMISSION_DENIED, 403],
      [Code.FAILED_PRECONDITION, 400],
      [Code.CANCELLED, 499],
      [Code.INTERNAL, 500],
      [Code.UNIMPLEMENTED, 501],
      [Code.ALREADY_EXISTS, 409],
    ];
    for (const [code, http] of table) expect(httpStatusOf(code)).toBe(http);
  });

  it('carries reason, field, retry delay and the status details', () => {
    const e = describeError(
      toWire(
        new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'QUEUE_FULL', 'queue is full', { retryAfterMs: 1500, metadata: { field: 'model' } }),
      ),
    );
    expect(e).toMatchObject({ httpStatus: 429, status: 'RESOURCE_EXHAUSTED', reason: 'QUEUE_FULL', field: 'model', retryAfterSeconds: 2 });
    expect(e.details).toContainEqual({ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '1.500s' });
    expect(describeError(new Error('secret /etc/passwd'))).toMatchObject({ httpStatus: 500, message: 'internal error' });
  });
});

describe('rate limiter', () => {
  it('lets a burst through, then refuses with the time until the next token', () => {
    let now = 0;
    const limiter = new RateLimiter(60, 2, { now: () => now });
    limiter.take('k');
    limiter.take('k');
    let err: DiffmeshError | undefined;
    try {
      limiter.take('k');
    } catch (e) {
      err = e as DiffmeshError;
    }
    expect(err).toMatchObject({ code: Code.RESOURCE_EXHAUSTED, reason: 'RATE_LIMITED', retryAfterMs: 1000 });
    limiter.take('other'); // buckets are per identity
    now += 1000;
    limiter.check('k'); // check() takes no token
    limiter.take('k');
    expect(() => limiter.check('k')).toThrow(/rate limit exceeded/);
  });
});
