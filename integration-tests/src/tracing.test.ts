import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, last, startTestMesh, type TestMesh } from './harness.js';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

// A mesh whose every process exports its spans over OTLP/HTTP JSON to a receiver in this
// test process. Objects always go through tensor-svc (no inline refs), and the stage
// services run on another node id than tensor-svc, so every tensor read is a Get stream
// whose server side must join the trace too.
let receiver: OtlpReceiver;
let t: TestMesh;
beforeAll(async () => {
  receiver = await OtlpReceiver.start();
  t = await startTestMesh({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    },
    stageArgs: ['--inline-max-bytes', '0', '--node-id', 'stage-node'],
    gateway: { apiKeys: ['trace-key'] },
  });
}, 120_000);
afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

const STEPS = 4;

/** Minimum number of spans per `service/name` one request of the tiny model produces. */
const EXPECTED: Record<string, number> = {
  'scheduler/diffmesh.request': 1,
  'scheduler/diffmesh.queue_wait': 3,
  'scheduler/diffmesh.dispatch': 3,
  'encoder-svc/diffmesh.stage.execute': 1,
  'encoder-svc/diffmesh.model.run': 1,
  'encoder-svc/diffmesh.tensor.put': 2,
  'dit-svc/diffmesh.stage.execute': 1,
  'dit-svc/diffmesh.tensor.get': 2,
  'dit-svc/diffmesh.model.run': STEPS,
  'dit-svc/diffmesh.tensor.put': 1,
  'vae-svc/diffmesh.stage.execute': 1,
  'vae-svc/diffmesh.tensor.get': 1,
  'vae-svc/diffmesh.model.run': 1,
  'vae-svc/diffmesh.tensor.put': 1,
  'tensor-svc/diffmesh.tensor.Put': 4,
  'tensor-svc/diffmesh.tensor.Get': 3,
};

function counts(spans: ReceivedSpan[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of spans) out[`${s.serviceName}/${s.name}`] = (out[`${s.serviceName}/${s.name}`] ?? 0) + 1;
  return out;
}

function one(spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(pred);
  if (found.length !== 1) throw new Error(`expected one ${what}, found ${found.length}`);
  return found[0];
}

describe('distributed tracing across the mesh', () => {
  it('records one trace per request, continuing the client trace through every service', async () => {
    const traceId = randomBytes(16).toString('hex');
    const clientSpanId = randomBytes(8).toString('hex');
    const events = await generate(t.client, {
      params: { prompt: 'a red circle on a blue background', width: 64, height: 64, numInferenceSteps: STEPS },
      metadata: { traceparent: `00-${traceId}-${clientSpanId}-01` },
    });
    const end = last(events);
    expect(end.type).toBe('completed');
    const reqId = end.reqId;

    const spans = (
      await receiver.waitFor((all) => {
        const c = counts(all.filter((s) => s.traceId === traceId));
        return Object.entries(EXPECTED).every(([k, n]) => (c[k] ?? 0) >= n);
      }, 30_000)
    ).filter((s) => s.traceId === traceId);

    // Exactly the spans a request makes: nothing duplicated, nothing of this request elsewhere.
    expect(counts(spans)).toEqual(EXPECTED);
    const ofRequest = receiver.spans.filter((s) => s.attributes['diffmesh.request_id'] === reqId);
    expect(ofRequest.length).toBeGreaterThan(0);
    expect(ofRequest.every((s) => s.traceId === traceId)).toBe(true);
    expect(new Set(spans.map((s) => s.serviceName))).toEqual(new Set(['scheduler', 'encoder-svc', 'dit-svc', 'vae-svc', 'tensor-svc']));

    // Parent links: the request span is the only child of the client's span; every other
    // span's parent is in the trace.
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    expect(byId.size).toBe(spans.length);
    const request = one(spans, (s) => s.name === 'diffmesh.request', 'request span');
    expect(request.parentSpanId).toBe(clientSpanId);
    expect(request.kind).toBe(2); // SERVER
    for (const s of spans) {
      if (s === request) continue;
      expect(byId.has(s.parentSpanId), `${s.serviceName}/${s.name} has its parent in the trace`).toBe(true);
    }
    const parentOf = (s: ReceivedSpan): ReceivedSpan => byId.get(s.parentSpanId)!;

    // The scheduler: request → queue wait and dispatch per stage.
    expect(request.attributes).toMatchObject({
      'diffmesh.request_id': reqId,
      'diffmesh.model': 'diffmesh/tiny-shapes',
      'diffmesh.request.status': 'completed',
    });
    const pools: Record<string, string> = { text_encoding: 'encoder-tiny', denoising: 'dit-tiny', vae_decoding: 'vae-tiny' };
    const services: Record<string, string> = { text_encoding: 'encoder-svc', denoising: 'dit-svc', vae_decoding: 'vae-svc' };
    for (const [stage, pool] of Object.entries(pools)) {
      const wait = one(
        spans,
        (s) => s.name === 'diffmesh.queue_wait' && s.attributes['diffmesh.stage'] === stage,
        `queue wait of ${stage}`,
      );
      expect(parentOf(wait)).toBe(request);
      expect(wait.attributes).toMatchObject({ 'diffmesh.pool': pool, 'diffmesh.request_id': reqId, 'diffmesh.outcome': 'ok' });

      const dispatch = one(
        spans,
        (s) => s.name === 'diffmesh.dispatch' && s.attributes['diffmesh.stage'] === stage,
        `dispatch of ${stage}`,
      );
      expect(parentOf(dispatch)).toBe(request);
      expect(dispatch.attributes).toMatchObject({
        'diffmesh.pool': pool,
        'diffmesh.request_id': reqId,
        'diffmesh.attempt': 1,
        'diffmesh.instance_id': `${services[stage]}-1`,
        'diffmesh.outcome': 'ok',
      });

      // The stage service continues from the dispatch span.
      const execute = one(
        spans,
        (s) => s.name === 'diffmesh.stage.execute' && s.attributes['diffmesh.stage'] === stage,
        `execute of ${stage}`,
      );
      expect(execute.serviceName).toBe(services[stage]);
      expect(parentOf(execute)).toBe(dispatch);
      expect(execute.attributes).toMatchObject({
        'diffmesh.pool': pool,
        'diffmesh.request_id': reqId,
        'diffmesh.instance_id': `${services[stage]}-1`,
        'diffmesh.step_count': stage === 'denoising' ? STEPS : 1,
        'diffmesh.steps_done': stage === 'denoising' ? STEPS : 1,
        'diffmesh.outcome': 'ok',
      });

      // Model runs and tensor transfers of the stage happen inside its execute span.
      const own = spans.filter((s) => s.serviceName === services[stage] && s !== execute);
      expect(own.length).toBeGreaterThan(0);
      for (const s of own) expect(parentOf(s), `${s.serviceName}/${s.name} is a child of the execute span`).toBe(execute);
    }

    // One model-run span per denoiser step, with step and batch size.
    const steps = spans.filter((s) => s.serviceName === 'dit-svc' && s.name === 'diffmesh.model.run');
    expect(steps.map((s) => s.attributes['diffmesh.step']).sort()).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    for (const s of steps) {
      expect(s.attributes['diffmesh.stage']).toBe('denoising');
      expect(s.attributes['diffmesh.batch_size']).toBeGreaterThanOrEqual(1);
    }

    // Tensor transfers: each tensor-svc span is the server side of one client span, same bytes.
    const servers = spans.filter((s) => s.serviceName === 'tensor-svc');
    for (const server of servers) {
      const client = parentOf(server);
      expect(client.name).toBe(server.name === 'diffmesh.tensor.Put' ? 'diffmesh.tensor.put' : 'diffmesh.tensor.get');
      expect(server.kind).toBe(2); // SERVER
      expect(client.kind).toBe(3); // CLIENT
      const bytes = client.attributes['diffmesh.tensor.bytes'];
      expect(bytes).toBeGreaterThan(0);
      expect(server.attributes['diffmesh.tensor.bytes']).toBe(bytes);
      expect(server.attributes['diffmesh.tensor.object_id']).toBe(client.attributes['diffmesh.tensor.object_id']);
      expect(client.attributes['diffmesh.tensor.owner_address']).toBe(t.mesh.tensorAddress);
    }
    for (const get of spans.filter((s) => s.name === 'diffmesh.tensor.get')) {
      expect(get.attributes).toMatchObject({ 'diffmesh.tensor.path': 'grpc', 'diffmesh.tensor.same_node': false });
    }
    const pixels = one(spans, (s) => s.name === 'diffmesh.tensor.put' && s.serviceName === 'vae-svc', 'pixels put');
    expect(pixels.attributes).toMatchObject({ 'diffmesh.tensor.name': 'pixels', 'diffmesh.tensor.bytes': 64 * 64 * 3 });
  });

  // Submit is a call of its own; an OpenAI image request travels as a message on the
  // gateway's Session stream, with the trace context in the message.
  it.each([
    [
      '/api/v1/requests (a Submit call)',
      '/api/v1/requests',
      { model: 'diffmesh/tiny-shapes', params: { prompt: 'a white circle', width: 64, height: 64, num_inference_steps: 2 } },
    ],
    [
      '/v1/images/generations (a Session message)',
      '/v1/images/generations',
      { model: 'diffmesh/tiny-shapes', prompt: 'a white circle', size: '64x64', num_inference_steps: 2 },
    ],
  ])('starts the trace at the gateway for an HTTP request and carries it to the scheduler: %s', async (_label, route, body) => {
    const traceId = randomBytes(16).toString('hex');
    const clientSpanId = randomBytes(8).toString('hex');
    const res = await fetch(`${t.mesh.gatewayUrl}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer trace-key', traceparent: `00-${traceId}-${clientSpanId}-01` },
      body: JSON.stringify(body),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const reqId = ((await res.json()) as { reqId?: string }).reqId;
    const spans = await receiver.waitFor(
      (all) =>
        all.some((s) => s.traceId === traceId && s.serviceName === 'gateway') &&
        // Each service exports in its own batches: wait for the request span as well.
        all.some((s) => s.traceId === traceId && s.name === 'diffmesh.request') &&
        all.some((s) => s.traceId === traceId && s.name === 'diffmesh.stage.execute' && s.attributes['diffmesh.stage'] === 'vae_decoding'),
      30_000,
    );
    const gateway = one(spans, (s) => s.traceId === traceId && s.name === 'diffmesh.gateway.request', 'gateway span');
    expect(gateway.parentSpanId).toBe(clientSpanId);
    const request = one(spans, (s) => s.traceId === traceId && s.name === 'diffmesh.request', 'request span');
    if (reqId) expect(request.attributes['diffmesh.request_id']).toBe(reqId);
    expect(request.parentSpanId).toBe(gateway.spanId);
    const services = new Set(spans.filter((s) => s.traceId === traceId).map((s) => s.serviceName));
    for (const name of ['gateway', 'scheduler', 'encoder-svc', 'dit-svc', 'vae-svc', 'tensor-svc']) expect(services).toContain(name);
  });

  it('starts a new trace for a request without a client trace context', async () => {
    const events = await generate(t.client, { params: { prompt: 'a blue square', width: 64, height: 64, numInferenceSteps: 2 } });
    const end = last(events);
    expect(end.type).toBe('completed');
    const mine = (s: ReceivedSpan): boolean => s.attributes['diffmesh.request_id'] === end.reqId;
    const spans = await receiver.waitFor(
      (all) =>
        all.some((s) => mine(s) && s.name === 'diffmesh.request') &&
        all.some((s) => mine(s) && s.name === 'diffmesh.stage.execute' && s.attributes['diffmesh.stage'] === 'vae_decoding'),
      30_000,
    );
    const request = one(spans, (s) => mine(s) && s.name === 'diffmesh.request', 'request span');
    expect(request.parentSpanId).toBe('');
    const ofRequest = spans.filter(mine);
    expect(new Set(ofRequest.map((s) => s.traceId))).toEqual(new Set([request.traceId]));
  });
});
