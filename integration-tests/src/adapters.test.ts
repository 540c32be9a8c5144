/**
 * LoRA adapters through a mesh of processes: dit-svc instances with `--lora-dir` report the
 * adapters they hold and can load, two requests with different adapters share denoiser runs on
 * one instance (`--max-batch 2`) and each ends with the picture it gets alone, the scheduler
 * sends a request to the instance that holds (or has) its adapters, and a name no instance has
 * is refused at Submit (gRPC INVALID_ARGUMENT, HTTP 400 naming the field).
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { Code, type RequestEvent } from '@diffmesh/core';
import { buildSdDir, writeTestLora } from '@diffmesh/models';
import type { Instance } from '@diffmesh/discovery';
import { generate, last, startTestMesh, submit, until, type TestMesh } from './harness.js';
import { OtlpReceiver } from './otlp-receiver.js';

const MODEL = 'test/sd-lora';
const KEY = 'adapters-test-key';
/** The test UNet's width (its attention block's, which the LoRA files update). */
const D = 32;

let root: string;
let t: TestMesh;
/** Every process's spans (OTLP/HTTP JSON). */
let receiver: OtlpReceiver;
/** Adapter folders of the two denoisers: a has ink and pencil; b has those and oil. */
let loraA: string;
let loraB: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-mesh-adapters-'));
  // One timestep per batch item: requests at different steps share a run.
  await buildSdDir(path.join(root, 'sd'), { attentionBlock: true, hiddenSize: D, timestepShape: 'batch', timestepType: 'float32' });
  loraA = path.join(root, 'loras-a');
  loraB = path.join(root, 'loras-b');
  await mkdir(loraA);
  await mkdir(loraB);
  await writeTestLora(path.join(loraA, 'ink.safetensors'), { format: 'peft', crossAttentionDim: D, alpha: 2, seed: 31 });
  await writeTestLora(path.join(loraA, 'pencil.safetensors'), { format: 'kohya', crossAttentionDim: D, rank: 2, seed: 32 });
  for (const f of ['ink', 'pencil']) await copyFile(path.join(loraA, `${f}.safetensors`), path.join(loraB, `${f}.safetensors`));
  await writeTestLora(path.join(loraB, 'oil.safetensors'), { format: 'peft', crossAttentionDim: D, seed: 33 });
  const plansFile = path.join(root, 'plans.yaml');
  const stages = [
    { name: 'text_encoding', pool: 'encoder-sd-lora' },
    { name: 'denoising', pool: 'dit-sd-lora' },
    { name: 'vae_decoding', pool: 'vae-sd-lora' },
  ];
  await writeFile(plansFile, stringify({ version: 1, plans: [{ model: MODEL, directory: './sd', stages }] }));
  // The denoisers are started below, each with its own adapter folder.
  receiver = await OtlpReceiver.start();
  t = await startTestMesh({
    plansFile,
    models: [MODEL],
    replicas: { 'dit-svc': 0 },
    gateway: { apiKeys: [KEY] },
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' },
  });
  const spec = t.mesh.stageSpecs.find((s) => s.service === 'dit-svc');
  if (!spec) throw new Error('no dit-svc in the mesh');
  await t.mesh.addStage({ ...spec, capacity: 2, args: ['--max-batch', '2', '--lora-dir', loraA] }, 'dit-a');
}, 240_000);

afterAll(async () => {
  await t?.stop();
  await receiver?.close();
  await rm(root, { recursive: true, force: true });
});

/** Enough steps that two requests sent together overlap on the denoiser by many of them. */
const params = (seed: string, adapters: string[], steps = 120) => ({
  prompt: 'a red cat',
  guidanceScale: 1,
  numInferenceSteps: steps,
  width: 128,
  height: 128,
  seed,
  adapters: adapters.map((name) => ({ name, scale: 1 })),
});

/** Runs a request to the end: its pixels, its id and the instance its denoising ran on. */
async function run(seed: string, adapters: string[], steps?: number): Promise<{ pixels: Buffer; reqId: string; instance: string }> {
  const events = await generate(t.client, { model: MODEL, params: params(seed, adapters, steps) });
  const end = last(events);
  if (end.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(end)}`);
  const started = events.find(
    (e): e is Extract<RequestEvent, { type: 'stage_started' }> => e.type === 'stage_started' && e.stage === 'denoising',
  );
  return { pixels: Buffer.from((await t.store.get(end.outputs.pixels)).data), reqId: end.reqId, instance: started?.instanceId ?? '' };
}

async function instance(id: string): Promise<Instance> {
  return until(`${id} in discovery`, async () => (await t.mesh.discovery.instances()).find((i) => i.id === id));
}

/** The value of one series of a Prometheus text page (0 when absent). */
function series(page: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of page.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([^\s{]+)(\{([^}]*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[4]);
  }
  return 0;
}

async function metrics(id: string): Promise<string> {
  const url = (await instance(id)).metadata.metrics_url;
  if (!url) throw new Error(`${id} serves no metrics`);
  return (await fetch(url)).text();
}

/** Denoiser runs of an instance, and those that carried more than one latent. */
async function runs(id: string): Promise<{ all: number; shared: number }> {
  const page = await metrics(id);
  const all = series(page, 'diffmesh_denoise_batch_size_count');
  return { all, shared: all - series(page, 'diffmesh_denoise_batch_size_bucket', { le: '1' }) };
}

describe('LoRA adapters in a mesh of processes', () => {
  it('two requests with different adapters share denoiser runs, and each ends with the picture it gets alone', async () => {
    const soloInk = await run('3', ['ink']);
    const soloPencil = await run('4', ['pencil']);
    expect(soloInk.pixels.equals(soloPencil.pixels)).toBe(false);
    const before = await runs('dit-a');
    const [ink, pencil] = await Promise.all([run('3', ['ink']), run('4', ['pencil'])]);
    const after = await runs('dit-a');
    // Started within a few milliseconds of each other, they overlap for nearly all of their steps.
    expect(after.shared - before.shared).toBeGreaterThan(0);
    expect(ink.pixels.equals(soloInk.pixels)).toBe(true);
    expect(pencil.pixels.equals(soloPencil.pixels)).toBe(true);
    // Each adapter was read from its file once; every later task found it loaded.
    const page = await metrics('dit-a');
    expect(series(page, 'diffmesh_dit_adapter_lookups_total', { outcome: 'load' })).toBe(2);
    expect(series(page, 'diffmesh_dit_adapter_lookups_total', { outcome: 'hit' })).toBe(2);
    expect(series(page, 'diffmesh_dit_adapters', { state: 'held' })).toBe(2);
    expect(series(page, 'diffmesh_dit_adapters', { state: 'available' })).toBe(2);
  });

  it('sends a request to the instance that holds its adapters, or to the one that has their files', async () => {
    const spec = t.mesh.stageSpecs.find((s) => s.service === 'dit-svc');
    if (!spec) throw new Error('no dit-svc in the mesh');
    await t.mesh.addStage({ ...spec, capacity: 2, args: ['--max-batch', '2', '--lora-dir', loraB] }, 'dit-b');
    // dit-b has never had a task (the least recently used), yet ink goes where it is loaded.
    await until('dit-b dispatchable', async () => ((await instance('dit-b')).load?.adaptersAvailable === 3 ? true : undefined));
    const ink = await run('5', ['ink']);
    expect(ink.instance).toBe('dit-a');
    expect((await run('6', ['pencil'])).instance).toBe('dit-a');
    // Only dit-b has oil.
    const oil = await run('7', ['oil']);
    expect(oil.instance).toBe('dit-b');
    expect((await run('8', ['oil', 'ink'])).instance).toBe('dit-b');
    // The dispatch spans say whether the instance held the adapters, as it reported.
    const dispatch = async (reqId: string) =>
      (
        await receiver.waitFor(
          (all) =>
            all.some(
              (x) =>
                x.name === 'diffmesh.dispatch' &&
                x.attributes['diffmesh.request_id'] === reqId &&
                x.attributes['diffmesh.stage'] === 'denoising',
            ),
          30_000,
        )
      ).find(
        (x) =>
          x.name === 'diffmesh.dispatch' && x.attributes['diffmesh.request_id'] === reqId && x.attributes['diffmesh.stage'] === 'denoising',
      );
    expect((await dispatch(ink.reqId))?.attributes).toMatchObject({
      'diffmesh.adapters': 1,
      'diffmesh.adapters.held': true,
      'diffmesh.adapters.reported': true,
    });
    expect((await dispatch(oil.reqId))?.attributes).toMatchObject({ 'diffmesh.adapters.held': false, 'diffmesh.adapters.reported': true });
    const scheduler = (await t.mesh.discovery.instances()).find((i) => i.name === 'scheduler');
    const page = await (await fetch(scheduler?.metadata.metrics_url ?? '')).text();
    expect(series(page, 'diffmesh_scheduler_adapter_dispatches_total', { pool: 'dit-sd-lora', held: 'true' })).toBeGreaterThanOrEqual(2);
    expect(series(page, 'diffmesh_scheduler_adapter_dispatches_total', { pool: 'dit-sd-lora', held: 'false' })).toBeGreaterThanOrEqual(1);

    // `diffmesh status` shows each denoiser's adapters held/available.
    const bin = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'status', '--nats', t.mesh.natsUrl], { timeout: 30_000 });
    expect(stdout).toMatch(/^NAME\s.*\sLOAD\s+ADAPTERS\s+ID$/m);
    expect(stdout).toMatch(/\s2\/2\s+dit-a$/m);
    expect(stdout).toMatch(/\s2\/3\s+dit-b$/m);
    expect(stdout).toMatch(/^encoder-svc\s.*\s-\s+\S+$/m);
  });

  it('refuses at Submit an adapter no denoiser has, naming the field (gRPC and HTTP)', async () => {
    const err = await submit(t.client, { model: MODEL, params: params('9', ['ink', 'watercolour']) }).then(
      () => undefined,
      (e: unknown) => e as { code: number; reason: string; field?: string; message: string },
    );
    expect(err).toMatchObject({ code: Code.INVALID_ARGUMENT, reason: 'INVALID_PARAMETER', field: 'adapters[1].name' });
    expect(err?.message).toMatch(/no instance of pool "dit-sd-lora" has an adapter named watercolour \(it has ink, oil, pencil\)/);
    const res = await fetch(`${t.mesh.gatewayUrl}/api/v1/requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, params: { prompt: 'x', adapters: [{ name: 'watercolour', scale: 1 }] } }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { field: string; reason: string } };
    expect(body.error).toMatchObject({ field: 'adapters[0].name', reason: 'INVALID_PARAMETER' });
  });
});
