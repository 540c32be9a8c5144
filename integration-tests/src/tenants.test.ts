// Tenants end to end: a mesh of processes (nats-server, tensor-svc, scheduler, stages) whose
// scheduler and gateway read one tenants file. Two API keys of different tenants each see
// only their own requests, through the gateway's HTTP routes (the status page's API
// included) and through the scheduler's gRPC API; an admin key sees both. A tenant's limits in
// the file are the scheduler's quotas: over one, the gateway answers 429 with Retry-After.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelsRoot } from '@diffmesh/models';
import { startLocalMesh, type LocalMesh } from '@diffmesh/cli';
import { SchedulerClient } from '@diffmesh/client';
import { fromWire, silentLogger } from '@diffmesh/core';
import { gatewayConfigFrom, startGateway, type RunningGateway } from '@diffmesh/gateway';

const MODEL = 'diffmesh/tiny-shapes';
const KEYS = {
  acme: 'acme-key-0123456789abcdef',
  globex: 'globex-key-0123456789abcdef',
  ops: 'ops-key-0123456789abcdef',
  metered: 'metered-key-0123456789abcdef',
};

let mesh: LocalMesh;
let gw: RunningGateway;

beforeAll(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tenants-it-'));
  const tenantsFile = path.join(dir, 'tenants.yaml');
  writeFileSync(
    tenantsFile,
    [
      'tenants:',
      `  - { name: acme, apiKeys: [${KEYS.acme}] }`,
      `  - { name: globex, apiKeys: [${KEYS.globex}] }`,
      `  - { name: ops, apiKeys: [${KEYS.ops}], admin: true }`,
      `  - { name: metered, apiKeys: [${KEYS.metered}], limits: { requestsPerMinute: 1 } }`,
      '',
    ].join('\n'),
  );
  mesh = await startLocalMesh({ modelsDirs: [defaultModelsRoot()], models: [MODEL], threads: 1, tenantsFile, log: silentLogger() });
  gw = await startGateway(
    gatewayConfigFrom({ listen: '127.0.0.1:0', adminListen: '127.0.0.1:0', natsUrl: mesh.natsUrl, tenantsFile }),
    silentLogger(),
  );
}, 120_000);

afterAll(async () => {
  await gw?.stop(1000);
  await mesh?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function http(key: string | undefined, method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(gw.address + route, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = res.headers.get('content-type')?.startsWith('application/json');
  return { status: res.status, body: json ? await res.json() : await res.arrayBuffer() };
}

async function generate(key: string, prompt: string): Promise<string> {
  const res = await http(key, 'POST', '/api/v1/requests', { model: MODEL, params: { prompt, numInferenceSteps: 2 } });
  expect(res.status).toBe(200);
  const id = res.body.reqId as string;
  for (let i = 0; i < 300; i++) {
    const got = await http(key, 'GET', `/api/v1/requests/${encodeURIComponent(id)}`);
    if (got.body?.status === 'REQUEST_STATUS_COMPLETED') return id;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`request ${id} did not complete`);
}

describe('tenants through the gateway and the scheduler', () => {
  it('each key sees only its tenant’s requests over HTTP; another tenant’s id is a 404 like an unknown one; an admin sees all', async () => {
    const a = await generate(KEYS.acme, 'a red circle for acme');
    const b = await generate(KEYS.globex, 'a blue square for globex');

    const unknown = await http(KEYS.globex, 'GET', '/api/v1/requests/no-such-request');
    const foreign = await http(KEYS.globex, 'GET', `/api/v1/requests/${a}`);
    expect(foreign.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(foreign.body.error.reason).toBe(unknown.body.error.reason);
    expect(JSON.stringify(foreign.body)).not.toContain('acme');

    expect((await http(KEYS.globex, 'POST', `/api/v1/requests/${a}:cancel`, {})).status).toBe(404);
    expect((await http(KEYS.globex, 'GET', `/api/v1/requests/${a}/result`)).status).toBe(404);
    expect((await http(KEYS.acme, 'GET', `/api/v1/requests/${a}/result`)).status).toBe(200);

    // The status page's API: each tenant's recent prompts only.
    const prompts = async (key: string): Promise<string[]> =>
      ((await http(key, 'GET', '/api/v1/status')).body.recentRequests as Array<{ prompt: string }>).map((r) => r.prompt).sort();
    expect(await prompts(KEYS.acme)).toEqual(['a red circle for acme']);
    expect(await prompts(KEYS.globex)).toEqual(['a blue square for globex']);
    expect(await prompts(KEYS.ops)).toEqual(['a blue square for globex', 'a red circle for acme']);
    expect((await http(KEYS.ops, 'GET', `/api/v1/requests/${b}`)).status).toBe(200);

    // Without a key, or with one the file does not list: 401.
    expect((await http(undefined, 'GET', '/api/v1/status')).status).toBe(401);
    expect((await http('not-a-key-of-anyone-0123', 'GET', '/api/v1/status')).status).toBe(401);
  });

  it('the OpenAI routes call the scheduler as the caller: its models, and its images in its own recent requests', async () => {
    expect((await http(KEYS.globex, 'GET', '/v1/models')).status).toBe(200);
    const img = await http(KEYS.globex, 'POST', '/v1/images/generations', {
      model: MODEL,
      prompt: 'an openai-route picture for globex',
      size: '64x64',
      response_format: 'b64_json',
      num_inference_steps: 2,
    });
    expect(img.status).toBe(200);
    expect(img.body.data).toHaveLength(1);
    const prompts = async (key: string): Promise<string[]> =>
      ((await http(key, 'GET', '/api/v1/status')).body.recentRequests as Array<{ prompt: string }>).map((r) => r.prompt);
    expect(await prompts(KEYS.globex)).toContain('an openai-route picture for globex');
    expect(await prompts(KEYS.acme)).not.toContain('an openai-route picture for globex');
  });

  it('the scheduler’s gRPC API scopes the same way, and refuses a caller without credentials', async () => {
    const client = new SchedulerClient({ addresses: [mesh.schedulerAddress], log: silentLogger() });
    try {
      const acme = client.withApiKey(KEYS.acme);
      const globex = client.withApiKey(KEYS.globex);
      const { reqId } = await acme.submit({ model: MODEL, params: { prompt: 'grpc acme', numInferenceSteps: 2 } });
      expect((await acme.get(reqId)).reqId).toBe(reqId);
      const err = fromWire(await globex.get(reqId).catch((e: unknown) => e));
      expect(err.code).toBe(grpc.status.NOT_FOUND);
      expect(err.message).toBe(`request "${reqId}" not found`);
      const anonymous = fromWire(await client.status().catch((e: unknown) => e));
      expect(anonymous.code).toBe(grpc.status.UNAUTHENTICATED);
    } finally {
      await client.close();
    }
  });

  it('answers a request over its tenant’s limit 429 with a Retry-After until the tenant may send again', async () => {
    const body = { model: MODEL, params: { prompt: 'metered', numInferenceSteps: 2 } };
    expect((await http(KEYS.metered, 'POST', '/api/v1/requests', body)).status).toBe(200);
    const res = await fetch(`${gw.address}/api/v1/requests`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.metered}` },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(429);
    // One request a minute: the next one in about a minute.
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(50);
    expect(JSON.stringify(await res.json())).toMatch(/TENANT_QUOTA|requests per minute/);
    // Other tenants are not affected.
    expect((await http(KEYS.acme, 'POST', '/api/v1/requests', body)).status).toBe(200);
  });
});
