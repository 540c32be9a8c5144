// The deployment as a platform engineer meets it: diffmesh's image built from
// deploy/docker/Dockerfile, the compose stack of deploy/compose/compose.yaml brought up with
// authentication on (its own CA, client certificates, NATS nkeys, an API key), pictures made
// through the gateway's HTTP and over gRPC, then containers SIGKILLed under a stream of
// requests (a dit-svc, the scheduler with its JetStream queue, tensor-svc): the restart policy
// brings each back and every accepted request completes, once. A second node
// (deploy/compose/compose.node.yaml, its own project on the first one's network and
// credentials) joins with its own tensor-svc and VAE, decodes what the first node denoised
// across the nodes over mutual TLS, and refuses callers without the mesh's certificate.
// `down` then drains within the grace period. Needs a Docker engine: as root, integration-tests/scripts/ensure-docker.sh
// installs docker.io and starts dockerd; elsewhere the test is skipped with the reason.
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerStub, type SchedulerStub } from '@diffmesh/client';
import { Code, loadTlsFiles, silentLogger, type ObjectRef, type RequestEvent } from '@diffmesh/core';
import { decodePng } from '@diffmesh/media';
import { InlineTensorStore, RemoteTensorStore } from '@diffmesh/tensor-client';
import { get, last, rejection, submit, tensorGets, until, watch, type RequestSpec } from './harness.js';
import { buildImage, COMPOSE_NODE_FILE, ComposeStack, ensureDocker, REPO_ROOT, run, type DieEvent } from './compose-stack.js';

const root = process.getuid?.() === 0;
const docker = root ? ensureDocker() : { ok: false as const, reason: 'runs as root only (it SIGKILLs container processes from the host)' };
const skip = docker.ok ? undefined : docker.reason;
// DIFFMESH_COMPOSE_TEST_IMAGE: another tag, where several checkouts share one Docker engine.
const IMAGE = process.env.DIFFMESH_COMPOSE_TEST_IMAGE || 'diffmesh:compose-test';
const PARAMS = { width: 64, height: 64, numInferenceSteps: 4 } as const;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
/** Measurements printed at the end (times vary with the machine: a record, not assertions). */
const report: string[] = [];

let stack: ComposeStack;
/** The second node's project (compose.node.yaml), while it runs. */
let node2: ComposeStack | undefined;
let httpUrl: string;
let grpcAddress: string;
let apiKey: string;
let client: SchedulerStub;
let certDir: string;

describe.skipIf(skip)(`the compose stack in containers${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    if (!docker.ok) return;
    let t = Date.now();
    await buildImage(IMAGE, docker.baseImage);
    report.push(`image build ${seconds(Date.now() - t)}`);
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    stack = new ComposeStack(`dmtest${process.pid}`, docker.compose, {
      DIFFMESH_IMAGE: IMAGE,
      DIFFMESH_NATS_IMAGE: docker.natsImage,
      DIFFMESH_HTTP_PORT: String(httpPort),
      DIFFMESH_GRPC_PORT: String(grpcPort),
      DIFFMESH_DIT_THREADS: '1',
    });
    httpUrl = `http://127.0.0.1:${httpPort}`;
    grpcAddress = `127.0.0.1:${grpcPort}`;
    t = Date.now();
    // Two dit-svc: the one killed below leaves its pool served, as in any deployment that
    // cares about a stage surviving an instance.
    await stack.exec(['up', '-d', '--no-build', '--scale', 'dit-svc=2'], 300_000);
    apiKey = /gateway API key[^:]*: (\S+)/.exec(await stack.exec(['logs', '--no-color', 'credentials']))?.[1] ?? '';
    await until(
      'a picture through the gateway',
      async () => ((await generateHttp('a red circle')).status === 200 ? true : undefined),
      180_000,
    );
    report.push(`up → first picture ${seconds(Date.now() - t)}`);
    certDir = await mkdtemp(path.join(tmpdir(), 'diffmesh-compose-'));
    for (const f of ['ca.pem', 'client.pem', 'client-key.pem'])
      await writeFile(path.join(certDir, f), await stack.readFile('gateway', `/credentials/${f}`), { mode: 0o600 });
    client = schedulerStub(grpcAddress, tlsFiles(true));
  }, 900_000);

  afterAll(async () => {
    client?.close();
    // The second node first: its containers hold the first node's network.
    if (node2) await node2.exec(['down', '-t', '5']).catch(() => undefined);
    if (stack) await stack.exec(['down', '-v', '-t', '5']).catch(() => undefined);
    if (certDir) await rm(certDir, { recursive: true, force: true });
    if (report.length) process.stdout.write(`compose stack: ${report.join('; ')}\n`);
  }, 120_000);

  function tlsFiles(withCert: boolean) {
    const f = (n: string) => path.join(certDir, n);
    return loadTlsFiles({
      ca: f('ca.pem'),
      cert: withCert ? f('client.pem') : '',
      key: withCert ? f('client-key.pem') : '',
      requireClientCert: false,
      serverName: 'diffmesh.mesh',
    });
  }

  function generateHttp(prompt: string, key = apiKey) {
    return fetch(`${httpUrl}/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ model: 'diffmesh/tiny-shapes', prompt, size: '64x64', response_format: 'b64_json', num_inference_steps: 4 }),
      signal: AbortSignal.timeout(60_000),
    }).catch(() => ({ status: 0, json: async () => ({}) }));
  }

  it('runs as a non-root user on a read-only root filesystem, healthy, and answers --version', async () => {
    const version = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    expect((await run('docker', ['run', '--rm', '--read-only', IMAGE, '--version'])).trim()).toMatch(
      new RegExp(`^diffmesh ${version} \\(node `),
    );
    expect((await run('docker', ['run', '--rm', '--read-only', '--entrypoint', 'id', IMAGE, '-u'])).trim()).toBe('10001');
    // Every service of the stack runs read-only (compose's read_only) and its HEALTHCHECK passed.
    for (const service of ['tensor-svc', 'scheduler', 'encoder-svc', 'dit-svc', 'vae-svc', 'gateway']) {
      const s = await until(
        `${service} healthy`,
        async () => {
          const st = await stack.state(service);
          return st.health === 'healthy' ? st : undefined;
        },
        60_000,
      );
      expect(s.readOnly).toBe(true);
    }
  });

  it('serves a picture over HTTP only with the API key printed once by the credentials service', async () => {
    expect(apiKey).toMatch(/^dm-/);
    const res = await generateHttp('a blue square on a white background');
    expect(res.status).toBe(200);
    const png = Buffer.from(((await res.json()) as { data: Array<{ b64_json: string }> }).data[0].b64_json, 'base64');
    expect(decodePng(png).width).toBe(64);
    expect((await generateHttp('a blue square', '')).status).toBe(401);
    expect((await generateHttp('a blue square', 'dm-wrong')).status).toBe(401);
    // Printed once: a second run of the credentials service reuses the key without printing it.
    await stack.exec(['up', '--no-build', '--no-deps', 'credentials']);
    expect((await stack.exec(['logs', '--no-color', 'credentials'])).match(/gateway API key/g)).toHaveLength(1);
  });

  it('generates over gRPC with the mesh client certificate, and refuses plaintext and certificate-less clients', async () => {
    const events = await generateGrpc('a green circle on a white background');
    expect(events.filter((e) => e.type === 'completed')).toHaveLength(1);
    const plain = schedulerStub(grpcAddress);
    const noCert = schedulerStub(grpcAddress, tlsFiles(false));
    try {
      expect((await rejection(submit(plain, { params: { prompt: 'x' } }, 5000))).code).toBe(Code.UNAVAILABLE);
      expect((await rejection(submit(noCert, { params: { prompt: 'x' } }, 5000))).code).toBe(Code.UNAVAILABLE);
    } finally {
      plain.close();
      noCert.close();
    }
  });

  async function generateGrpc(prompt: string, params: Omit<RequestSpec['params'], 'prompt'> = PARAMS): Promise<RequestEvent[]> {
    const { reqId } = await submit(client, { params: { ...params, prompt } });
    return watch(client, reqId);
  }

  /** A reader of one tensor-svc with these TLS files (or none), never through shared memory. */
  function tensorReader(address: string, tls: ReturnType<typeof tlsFiles> | undefined): InlineTensorStore {
    return new InlineTensorStore(
      new RemoteTensorStore({ address, nodeId: 'compose-test', log: silentLogger(), sameNodeReads: false, ...(tls ? { tls } : {}) }),
    );
  }

  it("adds a second node (compose.node.yaml) whose VAE decodes the first node's latents over mutual TLS, and whose tensor-svc refuses callers without a certificate", async () => {
    node2 = new ComposeStack(
      `${stack.project}n2`,
      docker.ok ? docker.compose : [],
      { DIFFMESH_IMAGE: IMAGE, DIFFMESH_MESH_PROJECT: stack.project, DIFFMESH_NODE_ID: 'node2' },
      COMPOSE_NODE_FILE,
    );
    const t = Date.now();
    // The same image, no build: node 2 runs its tensor-svc and a VAE only.
    await node2.exec(['up', '-d', '--no-build', 'node-tensor-svc', 'node-vae-svc'], 300_000);
    await until('node 2 VAE healthy', async () => ((await node2!.state('node-vae-svc')).health === 'healthy' ? true : undefined), 120_000);
    // The first node's VAE stops (it deregisters first): every decode now runs on node 2.
    await stack.exec(['stop', 'vae-svc'], 120_000);
    try {
      await until(
        'a picture decoded on node 2',
        async () => ((await generateHttp('a red circle')).status === 200 ? true : undefined),
        120_000,
      );
      report.push(`node 2 up → first picture decoded there ${seconds(Date.now() - t)}`);

      const node1Tensor = await stack.ip('tensor-svc');
      const before = await tensorGets(node1Tensor);
      // 8 frames of 256×256: the latents (3×8×32×32 float32, 96 KiB) pass the stages' inline
      // limit, so the denoiser on node 1 stores them in node 1's tensor-svc.
      const events = await generateGrpc('a blue square on a white background', {
        width: 256,
        height: 256,
        numFrames: 8,
        numInferenceSteps: 4,
      });
      const end = last(events);
      if (end.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(end)}`);
      const ranOn: Record<string, string> = {};
      const made: Record<string, ObjectRef[]> = {};
      for (const e of events) {
        if (e.type === 'stage_started') ranOn[e.stage] = e.instanceId;
        if (e.type === 'stage_finished') made[e.stage] = Object.values(e.outputs);
      }
      // Instance ids of node 2 start with its node id (`$(HOSTNAME)` expanded by the entrypoint).
      expect(ranOn.vae_decoding).toMatch(/^node2-vae-svc-[0-9a-f]{12}$/);
      expect(ranOn.denoising).toMatch(/^dit-svc-/);
      expect(made.denoising.length).toBeGreaterThan(0);
      expect(new Set(made.denoising.map((r) => `${r.ownerNodeId} ${r.ownerAddress}`))).toEqual(new Set([`compose ${node1Tensor}:7070`]));
      expect(made.vae_decoding.map((r) => r.ownerNodeId)).toEqual(['node2']);
      // Node 1's tensor-svc served the latents to node 2's VAE: a Get stream of at least their bytes.
      const after = await tensorGets(node1Tensor);
      expect(after.gets).toBeGreaterThan(before.gets);
      expect(after.getBytes - before.getBytes).toBeGreaterThanOrEqual(Math.max(...made.denoising.map((r) => r.sizeBytes)));

      // The frames live in node 2's tensor-svc: the mesh's client certificate with the ref's
      // capability reads them; a bare id, a reader without a certificate, plaintext: refused.
      const pixels = end.outputs.pixels;
      expect(pixels.ownerAddress).toBe(`${await node2.ip('node-tensor-svc')}:7070`);
      const readers = [tlsFiles(true), tlsFiles(false), undefined].map((tls) => tensorReader(pixels.ownerAddress, tls));
      const [good, noCert, plain] = readers;
      try {
        expect(pixels.sizeBytes).toBeGreaterThanOrEqual(8 * 256 * 256 * 3);
        expect((await good.get(pixels)).data.byteLength).toBe(pixels.sizeBytes);
        const bare = await rejection(good.get(pixels.objectId));
        expect([bare.code, bare.reason]).toEqual([Code.PERMISSION_DENIED, 'CAPABILITY_REQUIRED']);
        expect((await rejection(noCert.get(pixels))).code).toBe(Code.UNAVAILABLE);
        expect((await rejection(plain.get(pixels))).code).toBe(Code.UNAVAILABLE);
      } finally {
        await Promise.all(readers.map((r) => r.close()));
      }
    } finally {
      // Node 2 leaves, the first node's VAE comes back for what follows (after a failure too).
      await node2?.exec(['down', '-t', '45'], 120_000);
      node2 = undefined;
      await stack.exec(['start', 'vae-svc'], 120_000);
    }
    await until('vae-svc healthy again', async () => ((await stack.state('vae-svc')).health === 'healthy' ? true : undefined), 120_000);
  }, 600_000);

  it('completes every accepted request once while a dit-svc, the scheduler and tensor-svc are SIGKILLed', async () => {
    const accepted: string[] = [];
    let refused = 0;
    let n = 0;
    let streaming = true;
    // A steady stream of requests, one every 400 ms, for the whole kill sequence.
    const stream = (async () => {
      while (streaming) {
        const requestId = `kill-${++n}`;
        try {
          await submit(client, { requestId, params: { prompt: `a red circle ${n}`, seed: String(n), ...PARAMS } }, 5000);
          accepted.push(requestId);
        } catch {
          refused += 1;
        }
        await new Promise((r) => setTimeout(r, 400));
      }
    })();
    const restarts: string[] = [];
    for (const service of ['dit-svc', 'scheduler', 'tensor-svc']) {
      // Some requests in flight (queued or running) when the container dies.
      const target = accepted.length + 4;
      await until(`requests accepted before killing ${service}`, () => (accepted.length >= target ? true : undefined), 60_000);
      const before = (await stack.state(service)).restarts;
      const t = Date.now();
      await stack.kill(service);
      await until(
        `${service} restarted and healthy`,
        async () => {
          const s = await stack.state(service);
          return s.restarts > before && s.health === 'healthy' ? true : undefined;
        },
        120_000,
      );
      restarts.push(`${service} back healthy in ${seconds(Date.now() - t)}`);
    }
    await new Promise((r) => setTimeout(r, 3000));
    streaming = false;
    await stream;

    const outcome = new Map<string, string>();
    await until(
      'every accepted request finished',
      async () => {
        for (const id of accepted) {
          if (outcome.has(id)) continue;
          const r = await get(client, id).catch(() => undefined);
          if (r && !['REQUEST_STATUS_PENDING', 'REQUEST_STATUS_RUNNING'].includes(String(r.status)))
            outcome.set(id, r.error ? `${String(r.status)}: ${r.error.reason} ${r.error.message}` : String(r.status));
        }
        return outcome.size === accepted.length ? true : undefined;
      },
      240_000,
    );
    // Completed, once: each request's own history has exactly one completion.
    const completions = await Promise.all(
      accepted.map(async (id) => (await watch(client, id)).filter((e) => e.type === 'completed').length),
    );
    const failed = [...outcome].filter(([, s]) => s !== 'REQUEST_STATUS_COMPLETED');
    report.push(
      ...restarts,
      `${n} submitted, ${accepted.length} accepted, ${refused} refused (scheduler down), ${accepted.length - failed.length} completed`,
    );
    expect(failed).toEqual([]);
    expect(completions.every((c) => c === 1)).toBe(true);
    expect(accepted.length).toBeGreaterThan(10);
    // A picture made after the kills is still a picture.
    expect(last(await generateGrpc('a yellow square')).type).toBe('completed');
  }, 600_000);

  it('drains within the grace period on docker compose down (no container killed)', async () => {
    // Work in flight while the stack stops.
    const inFlight = Array.from({ length: 4 }, (_, i) =>
      submit(client, { params: { prompt: `a circle ${i}`, ...PARAMS } }).catch(() => undefined),
    );
    await Promise.all(inFlight);
    const deaths = stack.watchDeaths();
    await new Promise((r) => setTimeout(r, 500));
    const t = Date.now();
    await stack.exec(['down', '-t', '45'], 120_000);
    await new Promise((r) => setTimeout(r, 500));
    const died: DieEvent[] = deaths.stop();
    report.push(`down ${seconds(Date.now() - t)}`);
    const diffmesh = died.filter((d) => ['tensor-svc', 'scheduler', 'encoder-svc', 'dit-svc', 'vae-svc', 'gateway'].includes(d.service));
    expect([...new Set(diffmesh.map((d) => d.service))].sort()).toEqual([
      'dit-svc',
      'encoder-svc',
      'gateway',
      'scheduler',
      'tensor-svc',
      'vae-svc',
    ]);
    expect(diffmesh.filter((d) => d.service === 'dit-svc')).toHaveLength(2);
    // 137 would be a SIGKILL at the end of the grace period: every service exited on its own.
    expect(diffmesh.filter((d) => d.exitCode !== 0)).toEqual([]);
  }, 180_000);
});
