// The gateway in-process on port 0, in front of a real mesh of processes (nats-server,
// tensor-svc, scheduler, encoder/DiT/VAE services) started with startLocalMesh.
import { connect, createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { request } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpBindings, type SchedulerGetResponse__Output } from '@diffmesh/protos';
import { defaultModelsRoot } from '@diffmesh/models';
import { serviceEntry, startLocalMesh, type LocalMesh } from '@diffmesh/cli';
import { schedulerStub } from '@diffmesh/client';
import { decodePng, probeVideo } from '@diffmesh/media';
import { fromWire, silentLogger } from '@diffmesh/core';
import { gatewayConfigFrom, startGateway, type GatewayConfigInput, type RunningGateway } from '@diffmesh/gateway';
import { until } from './harness.js';

const KEY = 'dm-test-key-0123456789';
const MODEL = 'diffmesh/tiny-shapes';
const NODE = `gw-test-${process.pid}`;

let mesh: LocalMesh;
let gw: RunningGateway;
const extra: RunningGateway[] = [];

async function gateway(overrides: GatewayConfigInput = {}): Promise<RunningGateway> {
  const g = await startGateway(
    gatewayConfigFrom({
      listen: '127.0.0.1:0',
      adminListen: '127.0.0.1:0',
      natsUrl: mesh.natsUrl,
      apiKeys: [KEY],
      nodeId: NODE,
      ...overrides,
    }),
    silentLogger(),
  );
  if (gw) extra.push(g);
  return g;
}

beforeAll(async () => {
  mesh = await startLocalMesh({ modelsDirs: [defaultModelsRoot()], models: [MODEL], threads: 1, nodeId: NODE, log: silentLogger() });
  gw = await gateway({ maxBodyBytes: 64 * 1024, maxPromptChars: 1000 });
}, 120_000);

afterAll(async () => {
  for (const g of [...extra, gw]) await g?.stop(1000);
  await mesh?.stop();
});

interface Reply {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, base = gw.address): Promise<Reply> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

const small = { width: 64, height: 64, num_inference_steps: 4 };

/** The scheduler's own Get, over gRPC. */
async function schedulerGet(address: string, reqId: string): Promise<SchedulerGetResponse__Output> {
  const client = schedulerStub(address);
  try {
    return await new Promise<SchedulerGetResponse__Output>((resolve, reject) =>
      (client.Get as (r: object, o: object, cb: (e: unknown, r?: SchedulerGetResponse__Output) => void) => void).call(
        client,
        { reqId },
        { deadline: Date.now() + 10_000 },
        (e, r) => (e ? reject(fromWire(e)) : resolve(r!)),
      ),
    );
  } finally {
    client.close();
  }
}

describe('routes derived from the google.api.http annotations', () => {
  it('submits, gets and watches a request as JSON, NDJSON and server-sent events', async () => {
    const sub = await call('POST', '/api/v1/requests', {
      model: MODEL,
      params: { prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 30 },
    });
    expect(sub.status).toBe(200);
    expect(sub.body).toMatchObject({ reqId: expect.any(String), existing: false });
    const id: string = sub.body.reqId;

    const got = await call('GET', `/api/v1/requests/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ reqId: id, model: MODEL, executionPlan: { stages: expect.any(Array) } });
    expect(got.body.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);

    // Server-sent events while it runs.
    const sse = await call('GET', `/api/v1/requests/${id}:watch`, undefined, { accept: 'text/event-stream' });
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = sse.text
      .split('\n\n')
      .filter((b) => b.includes('data: ') && !b.includes('event: '))
      .flatMap((b) => JSON.parse(b.slice(b.indexOf('data: ') + 6)).events);
    expect(events.at(-1)).toMatchObject({ reqId: id, completed: { results: [expect.objectContaining({ name: 'pixels' })] } });
    expect(sse.text.trimEnd().endsWith('event: end\ndata: {}')).toBe(true);

    // NDJSON of the finished request: its final event.
    const nd = await call('GET', `/api/v1/requests/${id}:watch`);
    expect(nd.status).toBe(200);
    expect(nd.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = nd.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.at(-1).result.events.at(-1)).toMatchObject({ reqId: id, completed: expect.any(Object) });
    // Every event, in order, across the messages.
    const seqs = lines.flatMap((l) => l.result.events.map((e: { sequence: number }) => e.sequence));
    expect(seqs).toEqual(seqs.map((_: number, i: number) => i + 1));
    // 64-bit integers are strings, enums are names.
    const ref = lines.at(-1).result.events.at(-1).completed.results[0];
    expect(ref.shape).toEqual(['1', '64', '64', '3']);
    expect(ref.dtype).toBe('DTYPE_UINT8');
  });

  it('streams Generate as NDJSON, and reads the result object through the tensor-service routes', async () => {
    const gen = await call('POST', '/api/v1/generate', {
      model: MODEL,
      params: { prompt: 'a blue square', width: 256, height: 256, num_inference_steps: 2 },
    });
    expect(gen.status).toBe(200);
    const events = gen.text
      .trim()
      .split('\n')
      .flatMap((l) => JSON.parse(l).result.events);
    expect(events.some((e) => e.stepProgress)).toBe(true);
    const pixels = events.at(-1).completed.results[0];
    const capability = `capability=${encodeURIComponent(pixels.capability)}`;
    const stat = await call('GET', `/api/v1/objects/${encodeURIComponent(pixels.objectId)}?${capability}`);
    expect(stat.status).toBe(200);
    expect(stat.body.ref).toMatchObject({ objectId: pixels.objectId, sizeBytes: String(256 * 256 * 3) });
    // The id alone is not enough to read an object.
    expect((await call('GET', `/api/v1/objects/${encodeURIComponent(pixels.objectId)}`)).status).toBe(403);
    const content = await call('GET', `/api/v1/objects/${encodeURIComponent(pixels.objectId)}/content?length=16&${capability}`);
    const parts = content.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).result);
    expect(parts[0].header.objectId).toBe(pixels.objectId);
    expect(Buffer.from(parts[1].chunk.data, 'base64').length).toBe(16);
  });

  it('takes step caching in the JSON params, reports the skipped calls, and refuses a bad threshold naming it', async () => {
    const gen = await call('POST', '/api/v1/generate', {
      model: MODEL,
      params: { prompt: 'a red circle', ...small, num_inference_steps: 12, stepCache: { threshold: 1000, maxSkippedSteps: 2 } },
    });
    expect(gen.status).toBe(200);
    const events = gen.text
      .trim()
      .split('\n')
      .flatMap((l) => JSON.parse(l).result.events);
    expect(events.at(-1).completed).toBeDefined();
    // 12 steps, at most 2 reused in a row, first and last computed: steps 0, 3, 6, 9, 11 run.
    const denoised = events.find((e) => e.stageFinished?.timing?.stage === 'STAGE_NAME_DENOISING');
    expect(denoised.stageFinished.warnings.join('\n')).toMatch(/step cache: 7 of 12 denoising steps reused the last model output/);
    for (const [stepCache, field] of [
      [{ threshold: -0.5 }, 'step_cache.threshold'],
      [{ threshold: 0.1, max_skipped_steps: 500 }, 'step_cache.max_skipped_steps'],
    ] as const) {
      const bad = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'a red circle', ...small, stepCache } });
      expect(bad.status, JSON.stringify(stepCache)).toBe(400);
      expect(bad.text).toContain(field);
    }
  });

  it('streams live previews on Generate as server-sent events (base64 PNG), none once the request is over', async () => {
    const gen = await call(
      'POST',
      '/api/v1/generate',
      { model: MODEL, params: { prompt: 'a red circle', width: 128, height: 64, num_inference_steps: 5, preview: { every_steps: 2 } } },
      { accept: 'text/event-stream' },
    );
    expect(gen.status).toBe(200);
    const events = gen.text
      .split('\n\n')
      .filter((b) => b.includes('data: ') && !b.includes('event: '))
      .flatMap((b) => JSON.parse(b.slice(b.indexOf('data: ') + 6)).events);
    const previews = events.filter((e) => e.preview).map((e) => e.preview);
    // Steps 2 and 4, and the last; from the DiT service's process, through the scheduler.
    expect(previews.map((p) => [p.step, p.totalSteps])).toEqual([
      [2, 5],
      [4, 5],
      [5, 5],
    ]);
    for (const p of previews) {
      expect(p).toMatchObject({ stage: 'STAGE_NAME_DENOISING', mediaType: 'image/png', width: 16, height: 8 });
      const png = decodePng(Buffer.from(p.data, 'base64'));
      expect([png.width, png.height]).toEqual([16, 8]);
    }
    // Previews take no sequence number of their own, and are not stored: watching the finished
    // request replays its events without them.
    const reqId = events[0].reqId;
    const seqs = events.filter((e) => !e.preview).map((e) => e.sequence);
    expect(seqs).toEqual(seqs.map((_: number, i: number) => i + 1));
    const nd = await call('GET', `/api/v1/requests/${reqId}:watch`);
    const replayed = nd.text
      .trim()
      .split('\n')
      .flatMap((l) => JSON.parse(l).result.events);
    expect(replayed.length).toBe(seqs.length);
    expect(replayed.some((e: { preview?: unknown }) => e.preview)).toBe(false);

    const bad = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'x', preview: { every_steps: 500 } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ reason: 'INVALID_PARAMETER', field: 'preview.every_steps' });
  });

  it('serves the status of the scheduler and the PNG of a result object (the status page uses both)', async () => {
    const gen = await call('POST', '/api/v1/generate', {
      model: MODEL,
      params: { prompt: 'a red circle on a blue background', width: 256, height: 256, num_inference_steps: 2 },
    });
    const done = gen.text
      .trim()
      .split('\n')
      .flatMap((l) => JSON.parse(l).result.events)
      .at(-1);
    const pixels = done.completed.results.find((r: { name: string }) => r.name === 'pixels');
    expect(pixels.inlineData ?? '').toBe(''); // stored in tensor-svc, not passed by value

    const objectUrl = `${gw.address}/v1/images/objects/${encodeURIComponent(pixels.objectId)}.png`;
    expect(pixels.capability).toMatch(/^v1\./);
    const png = await fetch(`${objectUrl}?capability=${encodeURIComponent(pixels.capability)}`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    expect(png.status).toBe(200);
    expect(png.headers.get('content-type')).toBe('image/png');
    expect(decodePng(new Uint8Array(await png.arrayBuffer()))).toMatchObject({ width: 256, height: 256 });
    expect((await fetch(`${objectUrl}?capability=${encodeURIComponent(pixels.capability)}`)).status).toBe(401);
    // Knowing the id is not enough: without the ref's capability, or with another object's, it
    // is refused, the same way whether or not the object exists.
    for (const path of [
      `/v1/images/objects/${encodeURIComponent(pixels.objectId)}.png`,
      `/v1/images/objects/${encodeURIComponent('nope:pixels:0')}.png?capability=${encodeURIComponent(pixels.capability)}`,
    ]) {
      const refused = await call('GET', path);
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('capability_required');
    }

    const status = await call('GET', '/api/v1/status');
    expect(status.status).toBe(200);
    expect(status.body.pools.map((p: { pool: string }) => p.pool)).toEqual(['dit-tiny', 'encoder-tiny', 'vae-encoder-tiny', 'vae-tiny']);
    expect(status.body.pools[0].instances[0]).toMatchObject({
      nodeId: NODE,
      breaker: 'BREAKER_STATE_CLOSED',
      available: true,
      address: expect.stringMatching(/:\d+$/),
    });
    expect(status.body.recentRequests[0]).toMatchObject({
      reqId: done.reqId,
      status: 'REQUEST_STATUS_COMPLETED',
      prompt: 'a red circle on a blue background',
    });
    expect(status.body.recentRequests[0].timings).toHaveLength(3);
  });

  it('routes every binding httpBindings() lists to its service', async () => {
    const bindings = httpBindings();
    for (const b of bindings) {
      const path = b.pathTemplate.replace(/\{[^}]+\}/g, 'no-such-id');
      const r = await call(b.httpMethod, path, b.body ? {} : undefined);
      // An answer from the service behind the route (a 4xx about the input), never "no route".
      expect(r.body?.error?.reason, `${b.httpMethod} ${b.pathTemplate}`).not.toBe('UNKNOWN_ROUTE');
      expect(r.status, `${b.httpMethod} ${b.pathTemplate}: ${r.text}`).not.toBe(405);
      expect(r.status, `${b.httpMethod} ${b.pathTemplate}: ${r.text}`).toBeLessThan(500);
      if (r.status >= 400)
        expect(r.body.error.reason).toMatch(/^(REQUEST_NOT_FOUND|OBJECT_NOT_FOUND|INVALID_PARAMETER|CAPABILITY_REQUIRED)$/);
    }
    const metrics = await (await fetch(`${gw.adminAddress}/metrics`)).text();
    for (const b of bindings) {
      const id = `${b.service.split('.').at(-1)}.${b.method}`;
      expect(metrics, id).toContain(`route="${id}"`);
    }
  });

  it('maps errors to HTTP with the reason code and the field', async () => {
    const unknown = await call('POST', '/api/v1/generate', { model: 'no/such-model', params: { prompt: 'x' } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: 404, status: 'NOT_FOUND', reason: 'UNKNOWN_MODEL', field: 'model' });
    expect(unknown.body.error.details).toContainEqual(
      expect.objectContaining({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'UNKNOWN_MODEL' }),
    );

    const width = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'x', width: 63 } });
    expect(width.status).toBe(400);
    expect(width.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', reason: 'INVALID_PARAMETER', field: 'width' });
    expect(width.body.error.message).toMatch(/width/);

    // A model whose pools have no instance in this mesh.
    const pool = await call('POST', '/api/v1/requests', { model: 'diffmesh/synthetic-dit-image', params: { prompt: 'x' } });
    expect(pool.status).toBe(503);
    expect(pool.body.error).toMatchObject({ status: 'UNAVAILABLE', reason: 'POOL_UNAVAILABLE' });
    expect(Number(pool.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    const missing = await call('GET', '/api/v1/requests/not-a-request');
    expect(missing.status).toBe(404);
    expect(missing.body.error.reason).toBe('REQUEST_NOT_FOUND');
  });

  it('answers bad input with a 4xx naming the problem and keeps serving', async () => {
    const malformed = await call('POST', '/api/v1/requests', '{"model": "x", "params": {');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.message).toMatch(/not valid JSON/);

    const noPrompt = await call('POST', '/api/v1/requests', { model: MODEL, params: { width: 64 } });
    expect(noPrompt.status).toBe(400);
    expect(noPrompt.body.error.field).toBe('prompt');

    const typo = await call('POST', '/api/v1/requests', { model: MODEL, params: { promt: 'x' } });
    expect(typo.status).toBe(400);
    expect(typo.body.error.field).toBe('params.promt');

    const wrongType = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'x', width: 'wide' } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error.field).toBe('params.width');

    const long = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'x'.repeat(1001) } });
    expect(long.status).toBe(400);
    expect(long.body.error.field).toBe('params.prompt');

    const big = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'x', negativePrompt: 'y'.repeat(100_000) } });
    expect(big.status).toBe(413);
    expect(big.body.error.message).toMatch(/65536 bytes/);

    // The same without a declared length (chunked upload).
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${gw.address}/api/v1/requests`,
        { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.write(`{"model": "${MODEL}", "params": {"prompt": "`);
      for (let i = 0; i < 10; i++) req.write('z'.repeat(10_000));
      req.end('"}}');
    });
    expect(chunked).toBe(413);

    const notAnObject = await call('POST', '/api/v1/requests', '[1, 2]');
    expect(notAnObject.status).toBe(400);

    // Garbage that is not HTTP at all.
    const socket = connect(Number(new URL(gw.address).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.end('NOT HTTP\r\n\r\n');
    const reply = await new Promise<string>((resolve) => {
      let data = '';
      socket.on('data', (d: Buffer) => (data += d.toString()));
      socket.on('close', () => resolve(data));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400/);

    const after = await call('GET', '/api/v1/models');
    expect(after.status).toBe(200);
    expect(after.body.models.map((m: { name: string }) => m.name)).toContain(MODEL);
  });

  it('cancels the gRPC call, and so the request, when the client disconnects', async () => {
    const controller = new AbortController();
    const res = await fetch(`${gw.address}/api/v1/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: MODEL, params: { prompt: 'a gray square', width: 256, height: 256, num_inference_steps: 200 } }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    let reqId = '';
    while (!reqId) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended early');
      text += Buffer.from(value).toString();
      const line = text.split('\n').find((l) => l.includes('stepProgress') && l.includes('STAGE_NAME_DENOISING'));
      if (line) reqId = JSON.parse(line).result.events[0].reqId;
    }
    controller.abort();
    // Watch sends the request's final event once it has ended.
    const watched = await call('GET', `/api/v1/requests/${reqId}:watch`);
    const last = watched.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .at(-1);
    expect(last.result.events.at(-1).cancelled).toBeDefined();
    const state = await call('GET', `/api/v1/requests/${reqId}`);
    expect(state.body.status).toBe('REQUEST_STATUS_CANCELLED');
  });

  it('serves an OpenAPI 3 document of every route', async () => {
    const res = await fetch(`${gw.address}/openapi.json`); // no key needed
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toMatch(/^3\./);
    for (const b of httpBindings()) expect(doc.paths[b.pathTemplate]?.[b.httpMethod.toLowerCase()], b.pathTemplate).toBeDefined();
    expect(doc.paths['/v1/images/generations'].post).toBeDefined();
  });
});

/** Share of pixels that are clearly red or clearly blue. */
function redBlueShare(png: Uint8Array): { width: number; height: number; share: number; red: number; blue: number } {
  const { width, height, rgb } = decodePng(png);
  let red = 0;
  let blue = 0;
  const n = width * height;
  for (let i = 0; i < n; i++) {
    const [r, g, b] = [rgb[i * 3], rgb[i * 3 + 1], rgb[i * 3 + 2]];
    if (r > 128 && r > g + 50 && r > b + 50) red++;
    else if (b > 128 && b > r + 50 && b > g + 50) blue++;
  }
  return { width, height, share: (red + blue) / n, red, blue };
}

describe('OpenAI-compatible endpoints', () => {
  const prompt = 'a red circle on a blue background';

  it('generates a b64_json PNG whose pixels follow the prompt', async () => {
    const r = await call('POST', '/v1/images/generations', {
      prompt,
      size: '256x256',
      response_format: 'b64_json',
      num_inference_steps: 20,
      seed: 7,
    });
    expect(r.status).toBe(200);
    expect(r.body.created).toBeGreaterThan(1_600_000_000);
    expect(r.body.data).toHaveLength(1);
    const img = redBlueShare(Buffer.from(r.body.data[0].b64_json, 'base64'));
    expect([img.width, img.height]).toEqual([256, 256]);
    expect(img.share).toBeGreaterThan(0.5);
    expect(img.red).toBeGreaterThan(0);
    expect(img.blue).toBeGreaterThan(img.red);
  });

  it('works with the official openai client: n images with consecutive seeds, b64_json and url', async () => {
    const client = new OpenAI({ baseURL: `${gw.address}/v1`, apiKey: KEY, maxRetries: 0 });
    // A base seed (diffmesh's extension of the API) whose next seed draws another picture: 18
    // pictures fit this prompt (2 sizes × 9 places), so two random seeds may draw the same one.
    const params = { model: MODEL, prompt, n: 2, size: '256x256', response_format: 'b64_json', seed: 41 } as const;
    const b64 = await client.images.generate(params as Omit<typeof params, 'seed'>);
    expect(b64.data).toHaveLength(2);
    const pngs = b64.data!.map((d) => Buffer.from(d.b64_json!, 'base64'));
    for (const png of pngs) expect(redBlueShare(png)).toMatchObject({ width: 256, height: 256 });
    expect(pngs[0].equals(pngs[1])).toBe(false); // consecutive seeds, 41 and 42
    // The same base seed gives the same images again.
    const again = await client.images.generate(params as Omit<typeof params, 'seed'>);
    expect(again.data!.map((d) => d.b64_json)).toEqual(b64.data!.map((d) => d.b64_json));

    const url = await client.images.generate({ model: MODEL, prompt, size: '256x256', response_format: 'url' });
    const link = url.data![0].url!;
    expect(link).toMatch(new RegExp(`^${gw.address}/v1/images/results/`));
    const fetched = await fetch(link); // the id is the capability: no key
    expect(fetched.status).toBe(200);
    expect(fetched.headers.get('content-type')).toBe('image/png');
    expect(redBlueShare(new Uint8Array(await fetched.arrayBuffer())).width).toBe(256);

    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain(MODEL);

    const err = await client.images.generate({ model: MODEL, prompt, size: '250x256' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('size');
  });

  it('names the parameter at fault OpenAI-style', async () => {
    const noPrompt = await call('POST', '/v1/images/generations', { n: 1 });
    expect(noPrompt.status).toBe(400);
    expect(noPrompt.body.error).toMatchObject({ type: 'invalid_request_error', param: 'prompt', code: 'invalid_parameter' });
    const n = await call('POST', '/v1/images/generations', { prompt, n: 5 });
    expect(n.body.error.param).toBe('n');
    const model = await call('POST', '/v1/images/generations', { prompt, model: 'nope/nope' });
    expect(model.status).toBe(404);
    expect(model.body.error).toMatchObject({ param: 'model', code: 'unknown_model', type: 'not_found_error' });
    const steps = await call('POST', '/v1/images/generations', { prompt, num_inference_steps: 5000 });
    expect(steps.body.error.param).toBe('num_inference_steps');
    // A deadline: an RFC 3339 time or ms since the epoch; not a word, not the past.
    const word = await call('POST', '/v1/images/generations', { prompt, deadline: 'soon' });
    expect(word.status).toBe(400);
    expect(word.body.error.param).toBe('deadline');
    const past = await call('POST', '/v1/images/generations', { prompt, deadline: new Date(Date.now() - 60_000).toISOString() });
    expect(past.status).toBe(400);
    expect(past.body.error).toMatchObject({ param: 'deadline', code: 'invalid_parameter' });
  });

  it('keeps at most max-image-results url results, evicting the oldest', async () => {
    const g = await gateway({ maxImageResults: 2 });
    const urls: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await call(
        'POST',
        '/v1/images/generations',
        { prompt: `a red circle ${i}`, size: '64x64', num_inference_steps: 1, response_format: 'url' },
        {},
        g.address,
      );
      expect(r.status, r.text).toBe(200);
      urls.push(r.body.data[0].url);
    }
    const evicted = await fetch(urls[0]);
    expect(evicted.status).toBe(404);
    expect(((await evicted.json()) as { error: unknown }).error).toMatchObject({
      type: 'not_found_error',
      param: 'result_id',
      code: 'object_not_found',
    });
    for (const url of urls.slice(1)) expect((await fetch(url)).status).toBe(200);
  });

  it('runs a video job: create, poll to completed, download the clip', async () => {
    const created = await call('POST', '/v1/videos', { prompt: 'a yellow circle', size: '64x64', num_frames: 8, num_inference_steps: 4 });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      object: 'video',
      status: expect.stringMatching(/^(queued|in_progress)$/),
      model: MODEL,
      size: '64x64',
    });
    const id: string = created.body.id;
    const done = await until('the video job to complete', async () => {
      const r = await call('GET', `/v1/videos/${id}`);
      return r.body.status === 'completed' || r.body.status === 'failed' ? r.body : undefined;
    });
    expect(done).toMatchObject({ status: 'completed', progress: 100, completed_at: expect.any(Number) });
    const res = await fetch(`${gw.address}/v1/videos/${id}/content`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    const format = res.headers.get('x-diffmesh-video-format');
    expect(res.headers.get('content-type')).toBe(format === 'mp4' ? 'video/mp4' : 'image/gif');
    const info = await probeVideo(new Uint8Array(await res.arrayBuffer()));
    expect(info).toMatchObject({ format, frames: 8, width: 64, height: 64 });
    const thumb = await fetch(`${gw.address}/v1/videos/${id}/content?variant=thumbnail`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(decodePng(new Uint8Array(await thumb.arrayBuffer())).width).toBe(64);
  });

  it('creates a video job with the openai client (multipart form)', async () => {
    const client = new OpenAI({ baseURL: `${gw.address}/v1`, apiKey: KEY, maxRetries: 0 });
    const job = await client.videos.create({ prompt: 'a pink square', model: MODEL, seconds: '1' as '4', size: '64x64' as '720x1280' });
    expect(job).toMatchObject({ object: 'video', model: MODEL, seconds: '1', size: '64x64' });
    const again = await client.videos.retrieve(job.id);
    expect(again.id).toBe(job.id);
  });

  it('cancels a running video job on DELETE', async () => {
    const created = await call('POST', '/v1/videos', {
      prompt: 'a gray square',
      size: '256x256',
      num_frames: 32,
      num_inference_steps: 200,
    });
    const id: string = created.body.id;
    await until('the job to start', async () => ((await call('GET', `/v1/videos/${id}`)).body.status === 'in_progress' ? true : undefined));
    const del = await call('DELETE', `/v1/videos/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id, status: 'cancelled' });
    expect((await call('GET', `/v1/videos/${id}`)).body.status).toBe('cancelled');
    // The scheduler itself says so.
    const state = await schedulerGet(mesh.schedulerAddress, created.body.request_id);
    expect(state.status).toBe('REQUEST_STATUS_CANCELLED');
    const content = await call('GET', `/v1/videos/${id}/content`);
    expect(content.status).toBe(400);
  });
});

describe('security at the edge', () => {
  it('refuses a missing or wrong API key with 401', async () => {
    const none = await fetch(`${gw.address}/v1/models`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(((await none.json()) as { error: { type: string } }).error.type).toBe('authentication_error');
    const wrong = await call('GET', '/api/v1/models', undefined, { authorization: 'Bearer nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.reason).toBe('UNAUTHENTICATED');
    const client = new OpenAI({ baseURL: `${gw.address}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await expect(client.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('rate-limits each key with 429 and Retry-After', async () => {
    const limited = await gateway({ rateLimitPerMinute: 2 });
    const codes: number[] = [];
    let last: Reply | undefined;
    for (let i = 0; i < 3; i++) {
      last = await call('GET', '/v1/models', undefined, {}, limited.address);
      codes.push(last.status);
    }
    expect(codes).toEqual([200, 200, 429]);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(last!.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
    const other = await call('GET', '/v1/models', undefined, {}, gw.address);
    expect(other.status).toBe(200);
  });

  it('limits failed authentication attempts per client address with 429 and Retry-After', async () => {
    const g = await gateway({ authFailuresPerMinute: 3 });
    for (let i = 0; i < 3; i++) {
      const wrong = await call('GET', '/v1/models', undefined, { authorization: `Bearer guess-${i}` }, g.address);
      expect(wrong.status).toBe(401);
    }
    const limited = await call('GET', '/v1/models', undefined, { authorization: 'Bearer guess-3' }, g.address);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
    expect(limited.body.error.message).toMatch(/failed authentication attempts/);
    // A right guess is refused too while the address is locked out, on every route style.
    const right = await call('GET', '/api/v1/models', undefined, {}, g.address);
    expect(right.status).toBe(429);
    expect(right.body.error).toMatchObject({ status: 'RESOURCE_EXHAUSTED', reason: 'RATE_LIMITED' });
    // Open routes need no key and stay open.
    expect((await fetch(`${g.address}/openapi.json`)).status).toBe(200);
  });

  it('says whose rate limit ran out: the API key, or the client address when authentication is off', async () => {
    const open = await gateway({ apiKeys: [], rateLimitPerMinute: 1 });
    expect((await call('GET', '/v1/models', undefined, {}, open.address)).status).toBe(200);
    const limited = await call('GET', '/v1/models', undefined, {}, open.address);
    expect(limited.status).toBe(429);
    expect(limited.body.error.message).toBe('rate limit exceeded for this client address; retry later');
    const keyed = await gateway({ rateLimitPerMinute: 1 });
    await call('GET', '/v1/models', undefined, {}, keyed.address);
    expect((await call('GET', '/v1/models', undefined, {}, keyed.address)).body.error.message).toBe(
      'rate limit exceeded for this API key; retry later',
    );
  });

  it('scopes video jobs to the API key that created them', async () => {
    const OTHER = 'dm-test-key-other-987654321';
    const g = await gateway({ apiKeys: [KEY, OTHER] });
    const as = (key: string) => ({ authorization: `Bearer ${key}` });
    const created = await call(
      'POST',
      '/v1/videos',
      { prompt: 'a secret square', size: '64x64', num_frames: 2, num_inference_steps: 1 },
      as(KEY),
      g.address,
    );
    expect(created.status, created.text).toBe(200);
    const id: string = created.body.id;
    const mine = await call('GET', '/v1/videos', undefined, as(KEY), g.address);
    expect(mine.body.data.map((v: { id: string }) => v.id)).toEqual([id]);
    const theirs = await call('GET', '/v1/videos', undefined, as(OTHER), g.address);
    expect(theirs.status).toBe(200);
    expect(theirs.body.data).toEqual([]);
    for (const [method, path] of [
      ['GET', `/v1/videos/${id}`],
      ['GET', `/v1/videos/${id}/content`],
      ['DELETE', `/v1/videos/${id}`],
    ]) {
      const r = await call(method, path, undefined, as(OTHER), g.address);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.error).toMatchObject({ type: 'not_found_error', param: 'video_id' });
      expect(r.text).not.toContain('secret');
    }
    expect((await call('GET', `/v1/videos/${id}`, undefined, as(KEY), g.address)).body.prompt).toBe('a secret square');
  });

  it('serves health and metrics on the admin port only, without a key; CORS is off by default', async () => {
    const health = await fetch(`${gw.adminAddress}/healthz`);
    expect(health.status).toBe(200);
    const metrics = await (await fetch(`${gw.adminAddress}/metrics`)).text();
    expect(metrics).toMatch(/diffmesh_gateway_http_requests_total\{route="openai\.images\.generations",method="POST",code="200"\}/);
    expect((await call('GET', '/metrics')).status).toBe(404);
    const cors = await fetch(`${gw.address}/v1/models`, { headers: { authorization: `Bearer ${KEY}`, origin: 'https://app.example' } });
    expect(cors.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers CORS for allowed origins only', async () => {
    const g = await gateway({ corsOrigins: ['https://app.example'] });
    const pre = await fetch(`${g.address}/v1/images/generations`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const denied = await fetch(`${g.address}/v1/models`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    expect(denied.status).toBe(403);
  });
});

/** A request through node:http, which sends header values byte for byte (latin1). */
function rawCall(method: string, path: string, headers: Record<string, string>, body?: string, base = gw.address): Promise<Reply> {
  return new Promise<Reply>((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers: { authorization: `Bearer ${KEY}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        resolve({ status: res.statusCode ?? 0, headers: h, body: parsed, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Asserts a refusal: its status, and the field at fault (`field` or OpenAI's `param`). */
function expectRefusal(r: Reply, status: number, field: string): void {
  expect(r.status, r.text.slice(0, 300)).toBe(status);
  expect(r.body.error.field ?? r.body.error.param).toBe(field);
}

describe('malformed input: a 4xx naming the field, never a 500', () => {
  it('refuses a forwarded header that gRPC metadata cannot carry (x-request-id, traceparent, tracestate)', async () => {
    for (const name of ['x-request-id', 'traceparent', 'tracestate']) {
      const r = await rawCall('GET', '/api/v1/models', { [name]: 'caf\u00e9' });
      expect(r.status, `${name}: ${r.text}`).toBe(400);
      expect(r.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', reason: 'INVALID_PARAMETER', field: name });
    }
    const ok = await rawCall('GET', '/api/v1/models', { 'x-request-id': 'req-123' });
    expect(ok.status).toBe(200);
  });

  it('describes a bad value by its type and a short preview, however deep or large it is', async () => {
    const roomy = await gateway({ maxBodyBytes: 8 * 1024 * 1024 });
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    for (const [path, param] of [
      ['/v1/images/generations', 'n'],
      ['/v1/images/generations', 'num_inference_steps'],
      ['/v1/images/generations', 'seed'],
      ['/v1/images/generations', 'size'],
      ['/v1/videos', 'seconds'],
    ]) {
      const r = await call('POST', path, `{"prompt":"x","${param}":${deep}}`, {}, roomy.address);
      expect(r.status, `${path} ${param}: ${r.text.slice(0, 200)}`).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param, code: 'invalid_parameter' });
      expect(r.body.error.message).toMatch(/an array/);
    }
    const huge = await call(
      'POST',
      '/v1/images/generations',
      { prompt: Array.from({ length: 300_000 }, () => 'abcdefgh') },
      {},
      roomy.address,
    );
    expect(huge.status).toBe(400);
    expect(huge.body.error).toMatchObject({ param: 'prompt', message: 'prompt: expected a string, got an array' });
    const longString = await call('POST', '/v1/videos', { prompt: 'x', size: 'y'.repeat(3_000_000) }, {}, roomy.address);
    expectRefusal(longString, 400, 'size');
    expect(longString.text.length).toBeLessThan(1000);
    const seed = await call('POST', '/v1/images/generations', { prompt: 'x', seed: '9'.repeat(3_000_000) }, {}, roomy.address);
    expectRefusal(seed, 400, 'seed');
    expect(seed.text.length).toBeLessThan(1000);
    const model = await call('POST', '/v1/images/generations', { prompt: 'x', model: 'm'.repeat(3_000_000) }, {}, roomy.address);
    expect(model.status).toBe(404);
    expect(model.body.error).toMatchObject({ param: 'model', code: 'unknown_model' });
    expect(model.text.length).toBeLessThan(1000);
    const key = await call('POST', '/v1/images/generations', { prompt: 'x', ['k'.repeat(3_000_000)]: 1 }, {}, roomy.address);
    expectRefusal(key, 400, `${'k'.repeat(64)}…`);
    expect(key.text.length).toBeLessThan(1000);
    const proto = await call(
      'POST',
      '/api/v1/requests',
      { model: MODEL, params: { width: '9'.repeat(3_000_000), prompt: 'x' } },
      {},
      roomy.address,
    );
    expectRefusal(proto, 400, 'params.width');
    expect(proto.text.length).toBeLessThan(1000);
  });

  it('refuses numbers a uint32 field cannot hold instead of letting them wrap around', async () => {
    const steps = await call('POST', '/v1/images/generations', { prompt: 'x', size: '64x64', num_inference_steps: 2 ** 32 + 1 });
    expect(steps.status).toBe(400);
    expect(steps.body.error).toMatchObject({ param: 'num_inference_steps', code: 'invalid_parameter' });
    for (const [body, param] of [
      [{ num_frames: 2 ** 32 + 1 }, 'num_frames'],
      [{ num_inference_steps: 2 ** 32 + 1 }, 'num_inference_steps'],
      [{ seconds: 536870912.125 }, 'seconds'], // × 8 fps = 2^32 + 1 frames
      [{ seconds: '536870912.125' }, 'seconds'],
    ] as const) {
      const r = await call('POST', '/v1/videos', { prompt: 'x', size: '64x64', fps: 8, ...body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toMatchObject({ param, code: 'invalid_parameter' });
    }
    const long = await call('POST', '/v1/videos', { prompt: 'x', size: '64x64', fps: 8, seconds: 1e9 });
    expectRefusal(long, 400, 'seconds');
    expect(long.body.error.message).toContain('8000000000 frames');
  });

  it('holds concurrent video creations to max-video-jobs', async () => {
    const capped = await gateway({ maxVideoJobs: 2 });
    expect((await call('GET', '/v1/models', undefined, {}, capped.address)).status).toBe(200);
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(
          'POST',
          '/v1/videos',
          { prompt: `a slow square ${i}`, size: '64x64', num_frames: 8, num_inference_steps: 200 },
          {},
          capped.address,
        ),
      ),
    );
    const created = replies.filter((r) => r.status === 200);
    try {
      expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 429, 429, 429, 429]);
      for (const r of replies.filter((x) => x.status === 429)) {
        expect(r.body.error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_requests' });
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      expect((await call('GET', '/v1/videos', undefined, {}, capped.address)).body.data).toHaveLength(2);
    } finally {
      for (const r of created) await call('DELETE', `/v1/videos/${r.body.id}`, undefined, {}, capped.address);
    }
    // A creation the scheduler refuses gives its slot back.
    const one = await gateway({ maxVideoJobs: 1 });
    for (let i = 0; i < 3; i++) {
      const refused = await call('POST', '/v1/videos', { prompt: 'x', size: '63x64', num_frames: 2 }, {}, one.address);
      expectRefusal(refused, 400, 'size');
    }
    const job = await call(
      'POST',
      '/v1/videos',
      { prompt: 'a small square', size: '64x64', num_frames: 2, num_inference_steps: 2 },
      {},
      one.address,
    );
    expect(job.status, job.text).toBe(200);
  });

  it('counts the prompt limit in code points, as the scheduler does', async () => {
    const emoji = '\u{1F600}';
    const fits = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: emoji.repeat(600), ...small } });
    expect(fits.status, fits.text).toBe(200);
    const image = await call('POST', '/v1/images/generations', { prompt: emoji.repeat(600), size: '64x64', num_inference_steps: 1 });
    expect(image.status, image.text).toBe(200);
    const tooLong = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: 'x', negativePrompt: emoji.repeat(1001) } });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toMatchObject({
      field: 'params.negative_prompt',
      message: 'params.negative_prompt: is 1001 characters long; the limit is 1000',
    });
    const tooLongImage = await call('POST', '/v1/images/generations', { prompt: emoji.repeat(1001) });
    expect(tooLongImage.status).toBe(400);
    expect(tooLongImage.body.error).toMatchObject({ param: 'prompt', message: 'prompt: is 1001 characters long; the limit is 1000' });
  });

  it('reads a JSON body sent as a form (curl -d) the same way on both OpenAI POST routes', async () => {
    const curl = { 'content-type': 'application/x-www-form-urlencoded' };
    const video = await call(
      'POST',
      '/v1/videos',
      JSON.stringify({ prompt: 'a small square', size: '64x64', num_frames: 2, num_inference_steps: 1 }),
      curl,
    );
    expect(video.status, video.text).toBe(200);
    expect(video.body).toMatchObject({ object: 'video', size: '64x64', num_frames: 2 });
    const typo = await call('POST', '/v1/videos', '\n {"prompt": "x", "sise": "64x64"}', curl);
    expectRefusal(typo, 400, 'sise');
    const image = await call(
      'POST',
      '/v1/images/generations',
      JSON.stringify({ prompt: 'a red circle', size: '64x64', num_inference_steps: 1 }),
      curl,
    );
    expect(image.status, image.text).toBe(200);
    // A real form works on both too.
    const form = await call('POST', '/v1/images/generations', 'prompt=a+red+circle&size=64x64&num_inference_steps=1', curl);
    expect(form.status, form.text).toBe(200);
    const badForm = await call('POST', '/v1/images/generations', 'prompt=a+red+circle&n=five', curl);
    expectRefusal(badForm, 400, 'n');
  });

  it('refuses a scalar query parameter given twice, and query parameters a body route would ignore', async () => {
    const twice = await call('GET', '/api/v1/objects/no-such-object/content?length=1&length=2');
    expectRefusal(twice, 400, 'length');
    const ignored = await call('POST', `/api/v1/requests?model=${MODEL}`, { params: { prompt: 'x' } });
    expectRefusal(ignored, 400, 'model');
  });

  it('looks fields up as own properties only (constructor, __proto__, toString)', async () => {
    for (const [body, field] of [
      ['{"constructor": 1}', 'constructor'],
      ['{"__proto__": {"model": "x"}}', '__proto__'],
      [`{"model": "${MODEL}", "params": {"prompt": "x", "toString": null}}`, 'params.toString'],
    ]) {
      const r = await call('POST', '/api/v1/requests', body);
      expect(r.status, body).toBe(400);
      expect(r.body.error).toMatchObject({ reason: 'INVALID_PARAMETER', field });
      expect(r.body.error.message).toMatch(/unknown field/);
    }
    const openai = await call('POST', '/v1/images/generations', '{"prompt": "x", "constructor": 1}');
    expectRefusal(openai, 400, 'constructor');
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const proto = await call('POST', '/v1/images/generations', 'prompt=x&__proto__=y', form);
    expectRefusal(proto, 400, '__proto__');
    const repeated = await call('POST', '/v1/videos', 'prompt=a&prompt=b', form);
    expectRefusal(repeated, 400, 'prompt');
  });

  it('refuses unknown or repeated query parameters on the /v1 routes, and pages the video list', async () => {
    const unknown = await call('GET', '/v1/models?verbose=1');
    expectRefusal(unknown, 400, 'verbose');
    const twice = await call('GET', '/v1/videos/video_x/content?variant=thumbnail&variant=video');
    expectRefusal(twice, 400, 'variant');
    const order = await call('GET', '/v1/videos?order=up');
    expectRefusal(order, 400, 'order');

    const g = await gateway();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await call(
        'POST',
        '/v1/videos',
        { prompt: `a tiny square ${i}`, size: '64x64', num_frames: 2, num_inference_steps: 1 },
        {},
        g.address,
      );
      expect(r.status, r.text).toBe(200);
      ids.push(r.body.id);
    }
    const first = await call('GET', '/v1/videos?limit=2', undefined, {}, g.address);
    expect(first.body).toMatchObject({ has_more: true, first_id: ids[2], last_id: ids[1] });
    const next = await call('GET', `/v1/videos?limit=2&after=${first.body.last_id}`, undefined, {}, g.address);
    expect(next.body).toMatchObject({ has_more: false, data: [expect.objectContaining({ id: ids[0] })] });
    const asc = await call('GET', '/v1/videos?order=asc', undefined, {}, g.address);
    expect(asc.body.data.map((v: { id: string }) => v.id)).toEqual(ids);
  });

  it('answers malformed percent-encoding with a 400 on every route, naming the variable', async () => {
    for (const [path, field] of [
      ['/api/v1/requests/%ZZ', 'req_id'],
      ['/api/v1/requests/%ZZ:watch', 'req_id'],
      ['/api/v1/objects/a%E0%A4%A', 'object_id'],
      ['/api/v1/models?x=%ZZ', 'x'],
      ['/v1/videos/%ZZ', 'video_id'],
      ['/v1/models/%ZZ', 'model'],
      ['/v1/images/objects/%ZZ.png', 'object_id'],
      ['/v1/videos?after=%ZZ', 'after'],
    ]) {
      const r = await rawCall('GET', path, {});
      expectRefusal(r, 400, field);
      expect(r.body.error.message, path).toMatch(/malformed percent-encoding/);
    }
    const nowhere = await rawCall('GET', '/api/v1/%ZZ', {});
    expect(nowhere.status).toBe(400);
    expect(nowhere.body.error.status).toBe('INVALID_ARGUMENT');
    // A path that matches no route names the path (found by the fuzz suite: it named nothing).
    expect(nowhere.body.error.field).toBe('path');
  });
});

describe('scheduler failover', () => {
  it('moves a call to the next scheduler when one refuses connections', async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const dead = `127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise<void>((r) => probe.close(() => r()));
    const g = await gateway({ natsUrl: '', schedulerAddresses: [dead, mesh.schedulerAddress] });
    for (let i = 0; i < 3; i++) {
      const r = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: `a cyan square ${i}`, ...small } }, {}, g.address);
      expect(r.status, r.text).toBe(200);
      // Get goes to the scheduler that took the request.
      expect((await call('GET', `/api/v1/requests/${r.body.reqId}`, undefined, {}, g.address)).status).toBe(200);
    }
    const metrics = await (await fetch(`${g.adminAddress}/metrics`)).text();
    expect(metrics).toMatch(/diffmesh_gateway_upstream_failovers_total\{pool="scheduler"\} [1-9]/);
  });

  it('keeps serving when one of two discovered schedulers is killed', async () => {
    const second = await mesh.supervisor.start({
      name: 'scheduler-2',
      entry: serviceEntry('scheduler'),
      args: ['--node-id', NODE, '--log-level', 'info', '--nats', mesh.natsUrl, '--tensor', mesh.tensorAddress],
      readyPrefix: 'scheduler listening on ',
    });
    await until('the gateway to see two schedulers', async () => (gw.schedulers.addresses().includes(second.address) ? true : undefined));
    // The new scheduler serves once its discovery has found the stage instances.
    const direct = schedulerStub(second.address);
    try {
      await until('the second scheduler to take requests', async () => {
        try {
          await new Promise((resolve, reject) =>
            (direct.Submit as (r: object, o: object, cb: (e: Error | null, r?: unknown) => void) => void).call(
              direct,
              { model: MODEL, params: { prompt: 'warm-up', width: 64, height: 64, numInferenceSteps: 1 } },
              { deadline: Date.now() + 5000 },
              (e: Error | null, r) => (e ? reject(e) : resolve(r)),
            ),
          );
          return true;
        } catch {
          return undefined;
        }
      });
    } finally {
      direct.close();
    }
    // Requests land on both schedulers; each Get finds the one that holds its request, also
    // through a gateway that never saw them submitted.
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call('POST', '/api/v1/requests', { model: MODEL, params: { prompt: `a red square ${i}`, ...small } });
      expect(r.status, r.text).toBe(200);
      ids.push(r.body.reqId);
    }
    const onFirst = await Promise.all(
      ids.map((id) =>
        schedulerGet(mesh.schedulerAddress, id).then(
          () => true,
          () => false,
        ),
      ),
    );
    expect(onFirst.filter(Boolean).length).toBeGreaterThan(0);
    expect(onFirst.filter(Boolean).length).toBeLessThan(ids.length);
    const fresh = await gateway();
    for (const id of ids) {
      expect((await call('GET', `/api/v1/requests/${id}`)).status).toBe(200);
      expect((await call('GET', `/api/v1/requests/${id}`, undefined, {}, fresh.address)).status).toBe(200);
    }

    const first = mesh.supervisor.get('scheduler')!;
    first.child.kill('SIGKILL');
    await first.exited;
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        call('POST', '/v1/images/generations', { prompt: `a green circle ${i}`, size: '64x64', num_inference_steps: 2 }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    for (const r of results) expect(decodePng(Buffer.from(r.body.data[0].b64_json, 'base64')).width).toBe(64);
  });
});
