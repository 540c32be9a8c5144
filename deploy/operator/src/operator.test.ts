// The operator against recorded API objects: no API server runs here, so a fake
// KubernetesObjectApi records every call and answers with objects shaped like the API
// server's answers (status included). The chart is rendered with the real helm binary.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Controller, type PipelineSource } from './controller.js';
import { helmBinary, helmTemplate } from './helm.js';
import {
  canonicalStage,
  crdFile,
  defaultChartDir,
  loadPipelineSchema,
  type DiffusionPipeline,
  type DiffusionPipelineStatus,
  type PipelineSchema,
} from './pipeline.js';
import { FIELD_MANAGER, Reconciler, type ObjectApi, type StatusWriter } from './reconcile.js';
import { MANAGED_BY, PIPELINE_LABEL, objectKey, parseManifests, renderPipeline, type K8sObject } from './render.js';
import { pipelineToValues, resolveModelPaths } from './values.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEPLOY = path.resolve(HERE, '..', '..');
const CHART = defaultChartDir();
const log = pino({ level: 'silent' });
const readYaml = (p: string) => parse(readFileSync(path.join(DEPLOY, p), 'utf8')) as DiffusionPipeline;

let helm: string;
let schema: PipelineSchema;
beforeAll(() => {
  helm = helmBinary();
  schema = loadPipelineSchema(crdFile(CHART));
});

function pipeline(file = 'examples/diffusionpipeline-wan-t2v.yaml'): DiffusionPipeline {
  const p = readYaml(file);
  p.metadata = { ...p.metadata, namespace: p.metadata.namespace ?? 'default', uid: '5b0c7d1e-8a8e-4f3c-9d2e-1f0a2b3c4d5e', generation: 3 };
  return p;
}

/** A fake KubernetesObjectApi: records calls, keeps what was applied, answers like the API server. */
class RecordingApi implements ObjectApi {
  calls: Array<{ op: string; args: unknown[] }> = [];
  store = new Map<string, K8sObject>();
  /** Status the "cluster" reports per object key (set by tests: pods becoming ready). */
  liveStatus = new Map<string, Record<string, unknown>>();
  failOn?: string;
  missingKinds = new Set<string>();

  async patch<T extends KubernetesObject>(spec: T, ...rest: unknown[]): Promise<T> {
    this.calls.push({ op: 'patch', args: [spec, ...rest] });
    const o = spec as unknown as K8sObject;
    if (this.failOn && o.kind === this.failOn) {
      throw Object.assign(new Error('HTTP-Code: 422'), { code: 422, body: { message: `admission webhook denied ${o.kind}` } });
    }
    const key = objectKey(o);
    this.store.set(key, structuredClone(o));
    // The API answers with the object, managed fields and status added.
    const answer = structuredClone<K8sObject>(o);
    answer.metadata.managedFields = [{ manager: FIELD_MANAGER, operation: 'Apply' }];
    answer.metadata.resourceVersion = String(this.calls.length);
    const st = this.liveStatus.get(key);
    if (st) answer.status = st;
    return answer as unknown as T;
  }

  async list<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace?: string,
    ...rest: unknown[]
  ): Promise<KubernetesListObject<T>> {
    this.calls.push({ op: 'list', args: [apiVersion, kind, namespace, ...rest] });
    if (this.missingKinds.has(kind)) throw Object.assign(new Error('HTTP-Code: 404'), { code: 404 });
    const selector = typeof rest[4] === 'string' ? rest[4] : '';
    const want = Object.fromEntries(
      selector
        .split(',')
        .filter(Boolean)
        .map((kv) => kv.split('=')),
    );
    const items = [...this.store.values()].filter(
      (o) =>
        o.kind === kind &&
        o.apiVersion === apiVersion &&
        o.metadata.namespace === namespace &&
        Object.entries(want).every(([k, v]) => o.metadata.labels?.[k] === v),
    );
    return { apiVersion: 'v1', kind: `${kind}List`, items: structuredClone(items) as unknown as T[], metadata: {} };
  }

  async delete(spec: KubernetesObject, ...rest: unknown[]): Promise<unknown> {
    this.calls.push({ op: 'delete', args: [spec, ...rest] });
    this.store.delete(objectKey(spec as unknown as K8sObject));
    return { kind: 'Status', status: 'Success' };
  }

  patches(): K8sObject[] {
    return this.calls.filter((c) => c.op === 'patch').map((c) => c.args[0] as K8sObject);
  }
}

class RecordingStatus implements StatusWriter {
  writes: Array<{ namespace: string; name: string; status: DiffusionPipelineStatus }> = [];
  async patchStatus(namespace: string, name: string, status: DiffusionPipelineStatus): Promise<void> {
    this.writes.push({ namespace, name, status: structuredClone(status) });
  }
  get last(): DiffusionPipelineStatus {
    return this.writes[this.writes.length - 1].status;
  }
}

const cond = (st: DiffusionPipelineStatus, type: string) => st.conditions?.find((c) => c.type === type);

describe('DiffusionPipeline schema', () => {
  it('accepts the examples and fills in the defaults as the API server would', () => {
    const tiny = pipeline('examples/diffusionpipeline-tiny.yaml');
    expect(schema.validate(tiny)).toEqual([]);
    expect(tiny.spec.scheduler).toEqual({ replicas: 2, queueBackend: 'jetstream' });
    expect(tiny.spec.stages[0].replicas).toBe(1);
    expect(tiny.spec.defaults?.numFrames).toBe(1);
    expect(schema.validate(pipeline())).toEqual([]);
  });

  const invalid: Array<[file: string, expected: RegExp]> = [
    ['unknown-stage.yaml', /\/spec\/stages\/0\/name: must be equal to one of the allowed values/],
    ['missing-stages.yaml', /\/spec: must have required property 'stages'/],
    ['bad-pool-name.yaml', /\/spec\/stages\/0\/pool: must match pattern/],
    ['memory-queue-many-schedulers.yaml', /\/spec\/scheduler: more than one scheduler needs a shared queue backend/],
    ['negative-replicas.yaml', /\/spec\/stages\/0\/replicas: must be >= 0/],
    ['duplicate-stage.yaml', /\/spec\/stages\/1: duplicate entry with name/],
    ['unknown-field.yaml', /\/spec: must NOT have additional properties: unknown field "schedular"/],
    ['bad-quantity.yaml', /\/spec\/stages\/0\/resources\/limits\/memory: must match pattern/],
    ['min-above-max.yaml', /\/spec\/stages\/0: autoscaling.minReplicas must not exceed maxReplicas/],
    ['stage-alias-duplicate.yaml', /\/spec\/stages: two stages name the same stage \(a hyphenated name is an alias/],
    ['relative-model-path.yaml', /\/spec\/stages\/0\/model\/path: must match pattern/],
    ['model-path-three-parts.yaml', /\/spec\/stages\/0\/model\/path: must match pattern/],
    ['redis-bad-port.yaml', /\/spec\/redis\/port: must be <= 65535/],
    ['redis-queue-without-address.yaml', /\/spec: scheduler.queueBackend redis needs redis \(host, port\), scheduler.queueUrl/],
    ['redis-without-redis-queue.yaml', /\/spec: redis is the scheduler's queue; it needs scheduler.queueBackend redis/],
    [
      'unknown-autoscaling-metric.yaml',
      /\/spec\/autoscaling\/metrics\/0\/type: must be equal to one of the allowed values: \["queue_size"\]/,
    ],
    ['metrics-and-target.yaml', /\/spec\/stages\/0\/autoscaling: autoscaling.metrics \(queue_size target\) and targetTasksPerReplica/],
  ];
  it('has a test case for every refused example', () => {
    const files = readdirSync(path.join(DEPLOY, 'examples', 'invalid')).filter((f) => f.endsWith('.yaml'));
    expect(invalid.map(([f]) => f).sort()).toEqual(files.sort());
  });
  it.each(invalid)('rejects invalid/%s', (file, expected) => {
    const problems = schema.validate(readYaml(`examples/invalid/${file}`));
    expect(problems.map((p) => `${p.path}: ${p.message}`).join('\n')).toMatch(expected);
  });
});

describe('rendering', () => {
  /** What differs by design between the operator's objects and `helm install`'s. */
  function comparable(o: K8sObject): K8sObject {
    const c = structuredClone(o);
    delete c.metadata.ownerReferences;
    const labels = { ...c.metadata.labels };
    delete labels[PIPELINE_LABEL];
    delete labels['app.kubernetes.io/managed-by'];
    c.metadata.labels = labels;
    c.metadata.namespace = c.metadata.namespace ?? 'video';
    return c;
  }

  it('turns the example DiffusionPipeline into the objects helm renders for the equivalent values file', async () => {
    const p = pipeline();
    expect(schema.validate(p)).toEqual([]);
    const rendered = await renderPipeline(p, { chartDir: CHART, helm });
    const byHelm = parseManifests(
      await helmTemplate({
        chartDir: CHART,
        releaseName: 'wan-t2v',
        namespace: 'video',
        valuesFiles: [path.join(CHART, 'examples', 'wan-t2v-values.yaml')],
        helm,
      }),
    ).filter((o) => !o.metadata.annotations?.['helm.sh/hook']);
    const a = new Map(rendered.objects.map((o) => [objectKey(comparable(o)), comparable(o)]));
    const b = new Map(byHelm.map((o) => [objectKey(comparable(o)), comparable(o)]));
    expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
    for (const [k, o] of a) expect(o, k).toEqual(b.get(k));
    // And the set is the whole mesh.
    const kinds = rendered.objects.map((o) => `${o.kind}/${o.metadata.name}`);
    for (const k of [
      'StatefulSet/wan-t2v-nats',
      'Deployment/wan-t2v-scheduler',
      'DaemonSet/wan-t2v-tensor',
      'Deployment/wan-t2v-pool-encoder-umt5-xxl',
      'Deployment/wan-t2v-pool-dit-wan2-1-t2v-1-3b',
      'Deployment/wan-t2v-pool-vae-wan2-1',
      'ScaledObject/wan-t2v-pool-dit-wan2-1-t2v-1-3b',
      'Deployment/wan-t2v-gateway',
      'Ingress/wan-t2v-gateway',
      'ConfigMap/wan-t2v-registry',
    ]) {
      expect(kinds).toContain(k);
    }
    expect(kinds.some((k) => k.startsWith('CustomResourceDefinition/'))).toBe(false);
  });

  it('owns every object: namespace, pipeline label and a controller owner reference', async () => {
    const p = pipeline();
    schema.validate(p);
    const { objects } = await renderPipeline(p, { chartDir: CHART, helm });
    for (const o of objects) {
      expect(o.metadata.namespace).toBe('video');
      expect(o.metadata.labels?.[PIPELINE_LABEL]).toBe('wan-t2v');
      expect(o.metadata.labels?.['app.kubernetes.io/managed-by']).toBe(MANAGED_BY);
      expect(o.metadata.ownerReferences).toEqual([
        {
          apiVersion: 'diffmesh.io/v1alpha1',
          kind: 'DiffusionPipeline',
          name: 'wan-t2v',
          uid: p.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
  });

  it('maps a stage to a pool: GPU, node selector, version, models and the plan pin', () => {
    const p = pipeline();
    schema.validate(p);
    const v = pipelineToValues(p) as { pools: Record<string, Record<string, unknown>>; registry: { plans: Array<{ stages: unknown[] }> } };
    expect(v.pools['dit-wan2.1-t2v-1.3b']).toMatchObject({
      stage: 'denoising',
      gpu: 1,
      version: '1.1.0',
      capacity: 2,
      models: ['Wan-AI/Wan2.1-T2V-1.3B-Diffusers'],
    });
    expect(v.registry.plans[0].stages[1]).toEqual({ name: 'denoising', pool: 'dit-wan2.1-t2v-1.3b', version: '>=1.1.0 <2.0.0' });
  });

  it('renders mutual TLS from cert-manager and NATS credentials from a Secret: a Certificate per component, the seed mounted, never in argv', async () => {
    const p = pipeline();
    p.spec.tls = { certManagerIssuer: { name: 'mesh-ca', kind: 'ClusterIssuer' }, requireClientCert: true };
    p.spec.nats = { credentialsSecret: 'wan-nats' };
    expect(schema.validate(p)).toEqual([]);
    const { objects } = await renderPipeline(p, { chartDir: CHART, helm });
    const certs = objects.filter((o) => o.kind === 'Certificate') as Array<K8sObject & { spec: { issuerRef: unknown; uris: string[] } }>;
    expect(certs.map((c) => c.metadata.name).sort()).toEqual(
      [
        'wan-t2v-gateway',
        'wan-t2v-pool-dit-wan2-1-t2v-1-3b',
        'wan-t2v-pool-encoder-umt5-xxl',
        'wan-t2v-pool-vae-wan2-1',
        'wan-t2v-scheduler',
        'wan-t2v-tensor',
      ].sort(),
    );
    expect(certs.find((c) => c.metadata.name === 'wan-t2v-scheduler')!.spec).toMatchObject({
      issuerRef: { name: 'mesh-ca', kind: 'ClusterIssuer' },
      uris: ['urn:diffmesh:scheduler'],
    });
    const scheduler = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'wan-t2v-scheduler') as K8sObject & {
      spec: {
        template: { spec: { containers: Array<{ args: string[] }>; volumes: Array<{ name: string; secret?: { secretName: string } }> } };
      };
    };
    const pod = scheduler.spec.template.spec;
    expect(pod.containers[0].args).toEqual(
      expect.arrayContaining([
        '--tls-require-client-cert=true',
        '--tls-server-name=wan-t2v-mesh',
        '--nats-credentials=/etc/diffmesh/nats/credentials',
      ]),
    );
    expect(pod.volumes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'tls', secret: expect.objectContaining({ secretName: 'wan-t2v-scheduler-tls' }) }),
        expect.objectContaining({ name: 'nats-credentials', secret: expect.objectContaining({ secretName: 'wan-nats' }) }),
      ]),
    );
  });

  it('renders an image_encoding stage as the one that takes the input image (requires: input_image), for image-to-image too', () => {
    const p = pipeline();
    p.spec.modalities = ['text-to-image', 'image-to-image'];
    p.spec.stages = [{ name: 'image_encoding', pool: 'vae-encoder' }, ...p.spec.stages];
    expect(schema.validate(p)).toEqual([]);
    const v = pipelineToValues(p) as { registry: { plans: Array<{ stages: unknown[] }> } };
    expect(v.registry.plans[0].stages[0]).toEqual({ name: 'image_encoding', pool: 'vae-encoder', requires: 'input_image' });
    p.spec.modalities = ['text-to-image'];
    expect(JSON.stringify(schema.validate(p))).toMatch(/only for models that take an input image/);
  });
});

describe('Reconciler', () => {
  function setup() {
    const api = new RecordingApi();
    const status = new RecordingStatus();
    let clock = Date.parse('2026-11-23T10:00:00Z');
    const reconciler = new Reconciler({ api, status, schema, chartDir: CHART, helm, log, now: () => new Date(clock) });
    return { api, status, reconciler, tick: (ms: number) => (clock += ms) };
  }

  it('applies every rendered object with server-side apply and reports Progressing until pods are ready', async () => {
    const { api, status, reconciler } = setup();
    const p = pipeline();
    const res = await reconciler.reconcile(p);
    const patches = api.calls.filter((c) => c.op === 'patch');
    expect(patches.length).toBeGreaterThan(15);
    for (const c of patches) {
      // (spec, pretty, dryRun, fieldManager, force, patchStrategy)
      expect(c.args.slice(3)).toEqual([FIELD_MANAGER, true, 'application/apply-patch+yaml']);
    }
    // Config before workloads, scalers after their targets.
    const order = api.patches().map((o) => o.kind);
    expect(order.indexOf('ConfigMap')).toBeLessThan(order.indexOf('Deployment'));
    expect(order.lastIndexOf('Deployment')).toBeLessThan(order.indexOf('ScaledObject'));
    expect(res.applied).toHaveLength(patches.length);
    expect(status.writes).toHaveLength(1);
    expect(status.last.observedGeneration).toBe(3);
    expect(cond(status.last, 'Reconciled')).toMatchObject({
      status: 'True',
      reason: 'Applied',
      lastTransitionTime: '2026-11-23T10:00:00Z',
    });
    expect(cond(status.last, 'Ready')).toMatchObject({ status: 'False', reason: 'Progressing' });
    expect(res.requeueAfterMs).toBe(15_000);
  });

  it('reports Ready once the recorded workloads have their ready replicas, keeping transition times', async () => {
    const { api, status, reconciler, tick } = setup();
    const p = pipeline();
    await reconciler.reconcile(p);
    // Recorded statuses, as the API server reports them once pods are up (KEDA set replicas).
    for (const o of api.store.values()) {
      const key = objectKey(o);
      if (o.kind === 'Deployment' || o.kind === 'StatefulSet') {
        const replicas = (o.spec as { replicas?: number }).replicas ?? 1;
        api.liveStatus.set(key, {
          observedGeneration: 1,
          replicas,
          readyReplicas: replicas,
          availableReplicas: replicas,
          updatedReplicas: replicas,
        });
      }
      if (o.kind === 'DaemonSet')
        api.liveStatus.set(key, { desiredNumberScheduled: 4, numberReady: 4, currentNumberScheduled: 4, numberMisscheduled: 0 });
    }
    tick(60_000);
    const res = await reconciler.reconcile({ ...p, status: status.last });
    expect(cond(status.last, 'Ready')).toMatchObject({ status: 'True', reason: 'AllReady', lastTransitionTime: '2026-11-23T10:01:00Z' });
    expect(cond(status.last, 'Reconciled')?.lastTransitionTime).toBe('2026-11-23T10:00:00Z');
    expect(status.last.pools?.map((x) => x.name)).toEqual(['dit-wan2.1-t2v-1.3b', 'encoder-umt5-xxl', 'vae-wan2.1']);
    expect(res.requeueAfterMs).toBe(300_000);
  });

  it('updates objects when the spec changes and prunes what is no longer rendered', async () => {
    const { api, reconciler } = setup();
    const p = pipeline();
    await reconciler.reconcile(p);
    // Someone else's object with the same label is never touched (not owned by this pipeline).
    api.store.set('apps/v1/Deployment/video/stranger', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'stranger',
        namespace: 'video',
        labels: { [PIPELINE_LABEL]: 'wan-t2v', 'app.kubernetes.io/managed-by': MANAGED_BY },
      },
    });
    const changed = structuredClone(p);
    changed.metadata.generation = 4;
    changed.spec.stages = changed.spec.stages.filter((s) => s.name !== 'vae_decoding');
    changed.spec.stages.push({ name: 'vae_decoding', pool: 'vae-wan2.1-v2', capacity: 3 });
    changed.spec.stages[1].capacity = 3;
    api.calls = [];
    const res = await reconciler.reconcile(changed);
    const dit = api.patches().find((o) => o.kind === 'Deployment' && o.metadata.name === 'wan-t2v-pool-dit-wan2-1-t2v-1-3b') as any;
    expect(dit.spec.template.spec.containers[0].args).toContain('--capacity=3');
    expect(res.pruned.sort()).toEqual([
      'apps/v1/Deployment/video/wan-t2v-pool-vae-wan2-1',
      'keda.sh/v1alpha1/ScaledObject/video/wan-t2v-pool-vae-wan2-1',
      'policy/v1/PodDisruptionBudget/video/wan-t2v-pool-vae-wan2-1',
    ]);
    const deletes = api.calls.filter((c) => c.op === 'delete');
    expect(deletes.every((c) => c.args[5] === 'Background')).toBe(true);
    expect(api.store.has('apps/v1/Deployment/video/stranger')).toBe(true);
    expect(api.store.has('apps/v1/Deployment/video/wan-t2v-pool-vae-wan2-1-v2')).toBe(true);
  });

  it('skips kinds the cluster does not have when pruning (no KEDA or prometheus-operator)', async () => {
    const { api, status, reconciler } = setup();
    api.missingKinds.add('ServiceMonitor');
    await reconciler.reconcile(pipeline());
    expect(cond(status.last, 'Reconciled')?.status).toBe('True');
  });

  it('reports an invalid spec without touching the cluster', async () => {
    const { api, status, reconciler } = setup();
    const bad = readYaml('examples/invalid/memory-queue-many-schedulers.yaml');
    bad.metadata.namespace = 'video';
    const res = await reconciler.reconcile(bad);
    expect(api.calls).toEqual([]);
    expect(cond(status.last, 'Reconciled')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    expect(cond(status.last, 'Reconciled')?.message).toMatch(/shared queue backend/);
    expect(res.requeueAfterMs).toBe(300_000);
  });

  it('reports ApplyFailed with the API server message and retries soon', async () => {
    const { api, status, reconciler } = setup();
    api.failOn = 'DaemonSet';
    const res = await reconciler.reconcile(pipeline());
    expect(cond(status.last, 'Reconciled')).toMatchObject({ status: 'False', reason: 'ApplyFailed' });
    expect(cond(status.last, 'Reconciled')?.message).toMatch(/DaemonSet wan-t2v-tensor: admission webhook denied DaemonSet/);
    expect(res.requeueAfterMs).toBe(15_000);
  });
});

describe('Controller', () => {
  it('reconciles listed and changed pipelines, folds changes during a reconcile into one more pass, ignores deleted ones', async () => {
    const pipelines = new Map<string, DiffusionPipeline>([['video/wan-t2v', pipeline()]]);
    let emit: (ns: string, name: string) => void = () => {};
    const source: PipelineSource = {
      async get(ns, name) {
        return pipelines.get(`${ns}/${name}`);
      },
      async list() {
        return [...pipelines.values()];
      },
      async watch(onChange) {
        emit = onChange;
        return () => {};
      },
    };
    const seen: string[] = [];
    let release: () => void = () => {};
    let firstDone!: () => void;
    const first = new Promise<void>((r) => (firstDone = r));
    const controller = new Controller(
      source,
      async (p) => {
        seen.push(`${p.metadata.name}@${p.metadata.generation}`);
        if (seen.length === 1) {
          firstDone();
          await new Promise<void>((r) => (release = r));
        }
        return { status: {}, applied: [], pruned: [], requeueAfterMs: 3_600_000 };
      },
      log,
    );
    await controller.start();
    await first;
    // Two changes while the first reconcile runs: one more pass, with the newest spec.
    pipelines.get('video/wan-t2v')!.metadata.generation = 4;
    emit('video', 'wan-t2v');
    pipelines.get('video/wan-t2v')!.metadata.generation = 5;
    emit('video', 'wan-t2v');
    emit('video', 'gone');
    release();
    await expect.poll(() => seen, { timeout: 2000 }).toEqual(['wan-t2v@3', 'wan-t2v@5']);
    await controller.stop();
    expect(controller.phase).toBe('STOPPED');
  });
});

describe("the design's pipeline (deploy/examples/diffusionpipeline-design-wan.yaml)", () => {
  const DESIGN = 'examples/diffusionpipeline-design-wan.yaml';
  type Container = { args: string[]; env?: Array<{ name: string; value?: string; valueFrom?: unknown }> };
  type Workload = K8sObject & {
    spec: {
      template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: { containers: Container[] } };
    };
  };
  const find = (objects: K8sObject[], kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const container = (objects: K8sObject[], name: string) =>
    (find(objects, 'Deployment', name) as Workload).spec.template.spec.containers[0];

  it('is accepted as written, and renders the pools, plan, queue and scalers it asks for', async () => {
    const p = pipeline(DESIGN);
    expect(schema.validate(p)).toEqual([]);
    const { objects } = await renderPipeline(p, { chartDir: CHART, helm });
    // The hyphenated stage names are the canonical stages everywhere the mesh sees them.
    const registry = find(objects, 'ConfigMap', 'wan-t2v-14b-registry') as K8sObject & { data: Record<string, string> };
    const plans = parse(registry.data['plans.yaml']) as { plans: Array<{ model: string; stages: Array<{ name: string; pool: string }> }> };
    expect(plans.plans[0].model).toBe('Wan-AI/Wan2.1-T2V-14B-Diffusers');
    expect(plans.plans[0].stages).toEqual([
      { name: 'text_encoding', pool: 'text-encoder-t5' },
      { name: 'denoising', pool: 'dit-wan2.1-t2v-14b' },
      { name: 'vae_decoding', pool: 'vae-wan2.1' },
    ]);
    const encoder = find(objects, 'Deployment', 'wan-t2v-14b-pool-text-encoder-t5') as Workload;
    expect(encoder.spec.template.metadata.labels['diffmesh.io/stage']).toBe('text_encoding');
    expect(encoder.spec.template.metadata.annotations?.['diffmesh.io/model-path']).toBe('/models/google/t5-v1_1-xxl');
    // The repo id is the model directory on the volume, served as the pipeline's model.
    expect(encoder.spec.template.spec.containers[0].args).toEqual(
      expect.arrayContaining([
        'encoder-svc',
        '--models=Wan-AI/Wan2.1-T2V-14B-Diffusers=/models/google/t5-v1_1-xxl',
        '--models-dirs=/models,/app/models/generated',
      ]),
    );
    expect(container(objects, 'wan-t2v-14b-pool-dit-wan2-1-t2v-14b').args).toContain(
      '--models=Wan-AI/Wan2.1-T2V-14B-Diffusers=/models/Wan-AI/Wan2.1-T2V-14B-Diffusers',
    );
    expect(
      (find(objects, 'Deployment', 'wan-t2v-14b-pool-vae-wan2-1') as Workload).spec.template.metadata.labels['diffmesh.io/stage'],
    ).toBe('vae_decoding');
    // The redis block is the scheduler's queue.
    expect(container(objects, 'wan-t2v-14b-scheduler').args).toEqual(
      expect.arrayContaining(['--queue=redis', '--queue-url=redis://redis-master:6379/0']),
    );
    // queue_size, target 10: every pool's scaler aims at 10 queued + running tasks per instance.
    const scalers = objects.filter((o) => o.kind === 'ScaledObject') as Array<
      K8sObject & {
        spec: {
          minReplicaCount: number;
          maxReplicaCount: number;
          triggers: Array<{ name: string; metadata: { query: string; threshold: string } }>;
        };
      }
    >;
    expect(scalers).toHaveLength(3);
    for (const so of scalers) {
      expect(so.spec).toMatchObject({ minReplicaCount: 1, maxReplicaCount: 8 });
      const tasks = so.spec.triggers.find((t) => t.name === 'pool-tasks')!;
      expect(tasks.metadata.threshold).toBe('10');
      expect(tasks.metadata.query).toMatch(/diffmesh_queue_size\{pool=/);
    }
  });

  it('renders the same objects whether a stage is named text-encoding or text_encoding', async () => {
    const hyphenated = pipeline(DESIGN);
    const canonical = pipeline(DESIGN);
    canonical.spec.stages = canonical.spec.stages.map((st) => ({ ...st, name: canonicalStage(st.name) }));
    expect(schema.validate(hyphenated)).toEqual([]);
    expect(schema.validate(canonical)).toEqual([]);
    const a = await renderPipeline(hyphenated, { chartDir: CHART, helm });
    const b = await renderPipeline(canonical, { chartDir: CHART, helm });
    expect(a.objects).toEqual(b.objects);
    expect(a.hash).toBe(b.hash);
  });

  it('reports in status where each repo id was resolved on the models volume', async () => {
    const api = new RecordingApi();
    const status = new RecordingStatus();
    const reconciler = new Reconciler({ api, status, schema, chartDir: CHART, helm, log });
    await reconciler.reconcile(pipeline(DESIGN));
    expect(cond(status.last, 'Reconciled')).toMatchObject({ status: 'True', reason: 'Applied' });
    expect(status.last.pools?.map((x) => [x.name, x.stage])).toEqual([
      ['dit-wan2.1-t2v-14b', 'denoising'],
      ['text-encoder-t5', 'text_encoding'],
      ['vae-wan2.1', 'vae_decoding'],
    ]);
    expect(status.last.models).toEqual([
      {
        stage: 'text_encoding',
        pool: 'text-encoder-t5',
        path: 'google/t5-v1_1-xxl',
        resolvedPath: '/models/google/t5-v1_1-xxl',
        resolvedFrom: 'RepoId',
      },
      {
        stage: 'denoising',
        pool: 'dit-wan2.1-t2v-14b',
        path: 'Wan-AI/Wan2.1-T2V-14B-Diffusers',
        resolvedPath: '/models/Wan-AI/Wan2.1-T2V-14B-Diffusers',
        resolvedFrom: 'RepoId',
      },
      {
        stage: 'vae_decoding',
        pool: 'vae-wan2.1',
        path: 'Wan-AI/Wan2.1-T2V-14B-Diffusers',
        resolvedPath: '/models/Wan-AI/Wan2.1-T2V-14B-Diffusers',
        resolvedFrom: 'RepoId',
      },
    ]);
    // The status it writes is valid against the CRD's status schema.
    const p = pipeline(DESIGN);
    expect(schema.validate({ ...p, status: status.last })).toEqual([]);
    // A pipeline with absolute paths reports them as given.
    await reconciler.reconcile(pipeline());
    expect(status.last.models?.[0]).toEqual({
      stage: 'text_encoding',
      pool: 'encoder-umt5-xxl',
      path: '/models/wan2.1',
      resolvedPath: '/models/wan2.1',
      resolvedFrom: 'Path',
    });
  });

  it("resolves a repo id with a revision under the pipeline's own models mount path", () => {
    const p = pipeline(DESIGN);
    p.spec.models = { ...p.spec.models, mountPath: '/mnt/weights' };
    p.spec.stages[0].model = { path: 'google/t5-v1_1-xxl@refs-pr-7', component: 'text_encoder' };
    expect(schema.validate(p)).toEqual([]);
    expect(resolveModelPaths(p.spec)[0]).toEqual({
      stage: 'text_encoding',
      pool: 'text-encoder-t5',
      path: 'google/t5-v1_1-xxl@refs-pr-7',
      resolvedPath: '/mnt/weights/google/t5-v1_1-xxl@refs-pr-7',
      resolvedFrom: 'RepoId',
      revision: 'refs-pr-7',
    });
    const v = pipelineToValues(p) as { pools: Record<string, Record<string, unknown>> };
    expect(v.pools['text-encoder-t5']).toMatchObject({
      models: ['Wan-AI/Wan2.1-T2V-14B-Diffusers=/mnt/weights/google/t5-v1_1-xxl@refs-pr-7'],
      model: { path: '/mnt/weights/google/t5-v1_1-xxl@refs-pr-7', component: 'text_encoder' },
    });
    expect(v.pools['text-encoder-t5'].modelsDirs).toBeUndefined();
  });

  it('gives the scheduler the Redis password from the Secret through its environment, never its arguments', async () => {
    const p = pipeline(DESIGN);
    p.spec.redis = { host: 'redis-master', port: 6380, db: 2, passwordSecret: { name: 'redis-auth' } };
    expect(schema.validate(p)).toEqual([]);
    expect(p.spec.redis.passwordSecret?.key).toBe('password');
    const { objects } = await renderPipeline(p, { chartDir: CHART, helm });
    const sched = container(objects, 'wan-t2v-14b-scheduler');
    expect(sched.args).toContain('--queue=redis');
    expect(sched.args.some((a) => a.startsWith('--queue-url'))).toBe(false);
    expect(JSON.stringify(sched.args)).not.toMatch(/redis:\/\/|REDIS_PASSWORD/);
    const env = sched.env ?? [];
    const pw = env.findIndex((e) => e.name === 'REDIS_PASSWORD');
    const url = env.findIndex((e) => e.name === 'DIFFMESH_SCHEDULER_QUEUE_URL');
    expect(env[pw]).toEqual({ name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'redis-auth', key: 'password' } } });
    // Kubernetes expands $(REDIS_PASSWORD) only from a variable defined before it.
    expect(pw).toBeGreaterThanOrEqual(0);
    expect(url).toBeGreaterThan(pw);
    expect(env[url].value).toBe('redis://:$(REDIS_PASSWORD)@redis-master:6380/2');
  });

  it('refuses what is really wrong in it, naming the field, and applies nothing', async () => {
    const cases: Array<[change: (p: DiffusionPipeline) => void, expected: RegExp]> = [
      [(p) => (p.spec.stages[0].model = { path: '../t5' }), /\/spec\/stages\/0\/model\/path: must match pattern/],
      [(p) => (p.spec.stages[1].model = { path: 'Wan-AI/Wan2.1/transformer' }), /\/spec\/stages\/1\/model\/path: must match pattern/],
      [
        (p) => ((p.spec.stages[2] as { name: string }).name = 'vae-encoding'),
        /\/spec\/stages\/2\/name: must be equal to one of the allowed values/,
      ],
      [(p) => (p.spec.redis = { host: 'redis-master', port: 0 }), /\/spec\/redis\/port: must be >= 1/],
      [(p) => delete p.spec.redis, /scheduler.queueBackend redis needs redis \(host, port\)/],
      [
        (p) => (p.spec.scheduler = { replicas: 2, queueBackend: 'redis', queueUrl: 'redis://other:6379' }),
        /redis is the scheduler's queue; it needs .* no scheduler.queueUrl/,
      ],
    ];
    for (const [change, expected] of cases) {
      const api = new RecordingApi();
      const status = new RecordingStatus();
      const reconciler = new Reconciler({ api, status, schema, chartDir: CHART, helm, log });
      const p = pipeline(DESIGN);
      change(p);
      await reconciler.reconcile(p);
      expect(api.calls).toEqual([]);
      expect(cond(status.last, 'Reconciled')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
      expect(cond(status.last, 'Reconciled')?.message).toMatch(expected);
    }
  });
});
