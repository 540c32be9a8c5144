/**
 * The mesh across two nodes: each node is a network namespace with its own address, joined
 * to the other by veth links through a bridge (`createNodeNetwork`), with its own tensor-svc,
 * scheduler and stage processes, all listening on and advertising the node's address.
 * nats-server (with JetStream, the schedulers' shared queue) listens in this process's
 * namespace, on its address on the nodes' subnet. ObjectRefs read by a stage on the other
 * node travel as tensor-svc Get streams over the network stack.
 *
 * Needs root and iproute2 (`netnsSupport()`); elsewhere the tests are skipped with the reason.
 */
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalMesh, type LocalMesh, type StageProcessSpec } from '@diffmesh/cli';
import { SchedulerClient, eventFromWire } from '@diffmesh/client';
import { hostOf, paramsToWire, silentLogger, type GenerationParams, type RequestEvent } from '@diffmesh/core';
import { defaultModelsRoot } from '@diffmesh/models';
import { InlineTensorStore, RemoteTensorStore, defaultShmDir } from '@diffmesh/tensor-client';
import { createNodeNetwork, netnsSupport, startNatsServer, type NodeNetwork, type RunningNatsServer } from '@diffmesh/testing';
import { countOutcomes, followRequest, type Tracked } from './chaos.js';
import { embeddedPixels, tensorGets } from './harness.js';

const support = await netnsSupport();
if (!support.available) console.warn(`multinode tests skipped: ${support.reason}`);

const MODEL = 'diffmesh/tiny-shapes';
const METRICS_PORT = 9464;

/** A request followed to its end, with its events. */
interface Followed extends Tracked {
  events: RequestEvent[];
}

/** Follows `params` as requests through `client`, each under its own id, until all end. */
async function followAll(
  client: SchedulerClient,
  params: Array<Partial<GenerationParams> & { prompt: string }>,
  onEvent?: (r: Followed, e: RequestEvent) => void,
): Promise<Followed[]> {
  const deadline = Date.now() + 60_000;
  const requests = params.map((): Followed => ({ id: `multinode-${randomUUID()}`, accepted: false, ends: [], done: false, events: [] }));
  await Promise.all(
    requests.map((r, i) =>
      followRequest(client, r, { model: MODEL, params: paramsToWire(params[i]), priority: 0 }, deadline, (wire) => {
        const e = eventFromWire(wire);
        if (!e) return;
        r.events.push(e);
        onEvent?.(r, e);
      }),
    ),
  );
  return requests;
}

/** Each stage's instance and outputs, by stage name, from a request's events (the last try of each). */
function stagesOf(r: Followed): Record<string, { instanceId: string; owners: string[]; addresses: string[] }> {
  const out: Record<string, { instanceId: string; owners: string[]; addresses: string[] }> = {};
  for (const e of r.events) {
    if (e.type === 'stage_started') out[e.stage] = { instanceId: e.instanceId, owners: [], addresses: [] };
    if (e.type === 'stage_finished' && out[e.stage]) {
      out[e.stage].owners = Object.values(e.outputs).map((ref) => ref.ownerNodeId);
      out[e.stage].addresses = Object.values(e.outputs).map((ref) => ref.ownerAddress.slice(0, ref.ownerAddress.lastIndexOf(':')));
    }
  }
  return out;
}

describe.skipIf(!support.available)(
  `the mesh on two nodes joined by veth links${support.available ? '' : ` (skipped: ${support.reason})`}`,
  () => {
    let net: NodeNetwork;
    let nats: RunningNatsServer;
    const nodes: LocalMesh[] = [];
    let client: SchedulerClient;

    beforeAll(async () => {
      net = await createNodeNetwork({ nodes: 2 });
      nats = await startNatsServer({ host: net.hostAddress, jetstream: true });
      // node1 runs the text encoder and the VAE, node2 the denoiser: every request's stages
      // alternate between the nodes, so each stage reads its input from the other node.
      for (const [i, node] of net.nodes.entries()) {
        nodes.push(
          await startLocalMesh({
            modelsDirs: [defaultModelsRoot()],
            models: [MODEL],
            threads: 1,
            log: silentLogger(),
            natsUrl: nats.url,
            queue: 'jetstream',
            leaseMs: 3000,
            nodeId: node.netns,
            host: node.address,
            // node2 listens on every interface and advertises its address (--advertise-address).
            ...(i === 1 ? { listenHost: '0.0.0.0' } : {}),
            launcher: node.launcher,
            namePrefix: `${node.name}-`,
            replicas: i === 0 ? { 'dit-svc': 0 } : { 'encoder-svc': 0, 'vae-svc': 0 },
            // Every object goes through tensor-svc (none passed by value inside task messages).
            stageArgs: ['--inline-max-bytes', '0'],
            tensorArgs: ['--metrics-listen', `${node.address}:${METRICS_PORT}`],
            schedulerArgs: ['--max-attempts', '6', '--retry-backoff-ms', '250'],
          }),
        );
      }
      client = new SchedulerClient({ addresses: nodes.map((n) => n.schedulerAddress), reattachTimeoutMs: 30_000 });
    }, 120_000);

    afterAll(async () => {
      try {
        await client?.close();
        for (const n of nodes) await n.stop();
        await nats?.stop();
      } finally {
        // The namespaces and links go whatever happened (with any process left inside).
        await net?.destroy();
        // A killed node's tensor-svc leaves its shared-memory and spill folders behind.
        for (const node of net?.nodes ?? []) {
          await rm(defaultShmDir(node.netns), { recursive: true, force: true });
          await rm(path.join(tmpdir(), `diffmesh-spill-${node.netns}`), { recursive: true, force: true });
        }
      }
    }, 60_000);

    it('runs the stages of each request on both nodes, reading ObjectRefs across them, with the pixels of one node', async () => {
      const [n1, n2] = net.nodes;
      const params = [1, 2, 3].map((i) => ({
        prompt: `a ${['red', 'green', 'blue'][i - 1]} circle on a gray background`,
        seed: String(i),
        width: 128,
        height: 128,
        numInferenceSteps: 8,
      }));
      // Every service registered its node's address (gRPC and metrics), node2's too although
      // they listen on 0.0.0.0 there.
      const expected = nodes.reduce((n, mesh) => n + mesh.supervisor.processes.length, 0);
      let registered = await nodes[0].discovery.instances();
      // Registrations reach a watcher asynchronously (the mesh waited for the stages' only).
      for (let i = 0; i < 75 && registered.length < expected; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        registered = await nodes[0].discovery.instances();
      }
      for (const [i, node] of net.nodes.entries()) {
        const mine = registered.filter((x) => x.nodeId === node.netns);
        expect(mine).toHaveLength(nodes[i].supervisor.processes.length);
        for (const x of mine) {
          expect(hostOf(x.grpcAddress), x.id).toBe(node.address);
          if (x.metadata.metrics_url) expect(new URL(x.metadata.metrics_url).hostname, x.id).toBe(node.address);
        }
      }

      const requests = await followAll(client, params);
      for (const r of requests) {
        expect(r.history, r.id).toEqual([expect.objectContaining({ type: 'completed' })]);
        // Where each stage ran, and which node owns (and at which address serves) what it made.
        const placed = Object.fromEntries(
          Object.entries(stagesOf(r)).map(([stage, s]) => [stage, [s.instanceId, [...new Set(s.owners)], [...new Set(s.addresses)]]]),
        );
        expect(placed).toEqual({
          text_encoding: ['node1-encoder-svc-1', [n1.netns], [n1.address]],
          denoising: ['node2-dit-svc-1', [n2.netns], [n2.address]],
          vae_decoding: ['node1-vae-svc-1', [n1.netns], [n1.address]],
        });
      }
      // The denoiser on node2 read the text embeddings from node1's tensor-svc, the VAE on node1
      // read the latents from node2's: Get streams (same-node readers use shared memory instead).
      const [m1, m2] = await Promise.all([tensorGets(n1.address, METRICS_PORT), tensorGets(n2.address, METRICS_PORT)]);
      expect(m1.gets).toBeGreaterThanOrEqual(requests.length);
      expect(m2.gets).toBeGreaterThanOrEqual(requests.length);
      expect(m1.getBytes).toBeGreaterThan(0);
      expect(m2.getBytes).toBeGreaterThan(0);

      // The same pixels, byte for byte, as the same seeds in one process.
      const reader = new InlineTensorStore(
        new RemoteTensorStore({ address: nodes[0].tensorAddress, nodeId: 'test-client', log: silentLogger() }),
      );
      try {
        const expected = await embeddedPixels(params);
        for (const [i, r] of requests.entries()) {
          const end = r.events.at(-1);
          if (end?.type !== 'completed') throw new Error(`${r.id} ended with ${JSON.stringify(end)}`);
          const got = Buffer.from((await reader.get(end.outputs.pixels)).data);
          expect(got.equals(expected[i]), r.id).toBe(true);
        }
      } finally {
        await reader.close();
      }
    }, 90_000);

    it('loses node2 (every process of it, SIGKILL) mid-run: its tasks run again on node1 and every accepted request completes once', async () => {
      const [n1, n2] = net.nodes;
      // Every stage on both nodes now.
      const spec = (mesh: LocalMesh, service: StageProcessSpec['service']): StageProcessSpec => {
        const s = mesh.stageSpecs.find((x) => x.service === service && !x.stage);
        if (!s) throw new Error(`no ${service} stage`);
        return s;
      };
      await nodes[0].addStage(spec(nodes[0], 'dit-svc'));
      await nodes[1].addStage(spec(nodes[1], 'encoder-svc'));
      await nodes[1].addStage(spec(nodes[1], 'vae-svc'));
      // A first run of the new stages (the first model runs of a process are slow): both text
      // encoders then finish their first requests together, and each request's denoising goes
      // to the denoiser on the node that holds its embeddings while both have free slots.
      const warmUp = await followAll(
        client,
        [1, 2, 3, 4].map((i) => ({ prompt: 'a white circle', seed: String(i), width: 128, height: 128, numInferenceSteps: 4 })),
      );
      expect(countOutcomes(warmUp)).toMatchObject({ submitted: 4, completed: 4 });

      const params = Array.from({ length: 12 }, (_, i) => ({
        prompt: `a ${['red', 'green', 'blue', 'yellow'][i % 4]} square on a black background`,
        seed: String(100 + i),
        width: 128,
        height: 128,
        numInferenceSteps: 24,
      }));
      const onNode2 = (instance: string | undefined): boolean => instance?.startsWith(`${n2.name}-`) === true;
      let killed: Promise<number[]> | undefined;
      /** Each request's latest instance per stage. */
      const runs = new Map<string, Partial<Record<string, string>>>();
      const finished = new Map<string, Set<string>>();
      /** Requests whose denoising ran on node2 when it was killed, and those of them whose inputs node2 held too. */
      const inFlightOnNode2 = new Set<string>();
      const inputsOnNode2 = new Set<string>();
      const requests = await followAll(client, params, (r, e) => {
        if (e.type === 'stage_started') {
          runs.set(r.id, { ...runs.get(r.id), [e.stage]: e.instanceId });
          finished.get(r.id)?.delete(e.stage);
        }
        if (e.type === 'stage_finished') finished.set(r.id, new Set([...(finished.get(r.id) ?? []), e.stage]));
        // Kill node2 once a denoising task there, on text embeddings node2 made, is not yet half done.
        if (killed || e.type !== 'progress' || e.stage !== 'denoising' || e.step > e.totalSteps / 2) return;
        if (!onNode2(runs.get(r.id)?.denoising) || !onNode2(runs.get(r.id)?.text_encoding)) return;
        for (const [id, run] of runs) {
          if (!onNode2(run.denoising) || finished.get(id)?.has('denoising')) continue;
          inFlightOnNode2.add(id);
          if (onNode2(run.text_encoding)) inputsOnNode2.add(id);
        }
        killed = n2.killAll('SIGKILL');
      });
      const pids = await killed;
      const retried = requests.filter((r) => r.events.some((e) => e.type === 'stage_started' && e.attempt > 1)).length;
      /** The instances a request's `stage` started on, in order. */
      const startsOf = (r: Followed, stage: string): string[] =>
        r.events.flatMap((e) => (e.type === 'stage_started' && e.stage === stage ? [e.instanceId] : []));
      console.log(
        `multinode: node2 killed (${pids?.length ?? 0} processes) with ${inFlightOnNode2.size} denoising task(s) in flight there ` +
          `(${inputsOnNode2.size} on inputs node2 held); ${retried} request(s) ran a stage again; ` +
          `${countOutcomes(requests).completed}/${requests.length} completed`,
      );
      expect(pids?.length, 'node2 was never killed: no denoising task ran there on its own text embeddings').toBeGreaterThanOrEqual(5);
      expect(await n2.pids()).toEqual([]);

      // Every accepted request completed, exactly once in its history read from the first event.
      const outcomes = countOutcomes(requests);
      expect(outcomes).toMatchObject({ submitted: 12, completed: 12, failed: {}, lost: 0, duplicated: 0, refused: 0 });
      for (const r of requests) expect(r.history, r.id).toEqual([expect.objectContaining({ type: 'completed' })]);
      // The denoising tasks node2 was running started again on node1; where node2's tensor-svc
      // held their text embeddings (lost with it), the text encoder ran again first, on node1.
      expect(inputsOnNode2.size).toBeGreaterThan(0);
      for (const id of inFlightOnNode2) {
        const r = requests.find((x) => x.id === id)!;
        const dit = startsOf(r, 'denoising');
        expect(
          dit.slice(dit.findIndex(onNode2) + 1).some((s) => s.startsWith(`${n1.name}-`)),
          `${id}: ${dit.join(', ')}`,
        ).toBe(true);
        if (!inputsOnNode2.has(id)) continue;
        const encoder = startsOf(r, 'text_encoding');
        expect(encoder.length, `${id}: ${encoder.join(', ')}`).toBeGreaterThan(1);
        expect(encoder.at(-1), id).toMatch(new RegExp(`^${n1.name}-`));
      }
    }, 90_000);
  },
);
