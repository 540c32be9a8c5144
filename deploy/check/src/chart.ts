import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { helmTemplate, parseManifests, runHelm, type K8sObject } from '@diffmesh/operator';
import { DEFAULT_PLANS_FILE, parsePlanRegistry } from '@diffmesh/scheduler';
import { parse } from 'yaml';
import { natsPermissionProblems } from './chart-nats.js';
import { checkServiceArgs, loadPending } from './flags.js';
import { validateObject } from './k8s.js';
import type { Section } from './report.js';

/** One way of rendering the chart. */
export interface Scenario {
  name: string;
  valuesFiles?: string[];
  values?: Record<string, unknown>;
  /** This scenario must render: each [kind, name suffix]. */
  expect?: Array<[kind: string, nameSuffix: string]>;
}

/**
 * The renders deploy:check validates: the default values, every example values file, and a few
 * switches the examples do not cover.
 */
export function scenarios(chartDir: string): Scenario[] {
  const ex = path.join(chartDir, 'examples');
  const files = readdirSync(ex)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  return [
    {
      name: 'default values',
      expect: [
        ['StatefulSet', '-nats'],
        ['Deployment', '-scheduler'],
        ['DaemonSet', '-tensor'],
        ['Deployment', '-pool-encoder-tiny'],
        ['Deployment', '-pool-dit-tiny'],
        ['Deployment', '-pool-vae-tiny'],
        ['ScaledObject', '-pool-encoder-tiny'],
        ['ScaledObject', '-pool-dit-tiny'],
        ['ScaledObject', '-pool-vae-tiny'],
        ['Deployment', '-gateway'],
        ['ConfigMap', '-registry'],
        ['CustomResourceDefinition', 'diffusionpipelines.diffmesh.io'],
      ],
    },
    ...files.map((f) => ({ name: `examples/${f}`, valuesFiles: [path.join(ex, f)] })),
    {
      name: 'mutual TLS from created Secret, HPA engine, redis queue and tensors',
      values: {
        tls: { enabled: true, create: true, requireClientCert: true, ca: 'CA', cert: 'CERT', key: 'KEY' },
        autoscaling: { engine: 'hpa', minReplicas: 1 },
        scheduler: { queue: { backend: 'redis' } },
        tensor: { backend: 'redis', durable: 'redis://redis:6379/1' },
        credentials: { create: true, env: { REDIS_URL: 'redis://redis:6379/0' } },
        gateway: { apiKeys: { create: true, keys: ['k1', 'k2'] } },
      },
      expect: [
        ['HorizontalPodAutoscaler', '-pool-dit-tiny'],
        ['Secret', '-tls'],
      ],
    },
    {
      name: 'mutual TLS from cert-manager (a Certificate per component), NATS nkey credentials and NATS over mutual TLS, the tenants file and the capability key from Secrets',
      values: {
        tls: {
          enabled: true,
          requireClientCert: true,
          certManager: { enabled: true, issuerRef: { name: 'diffmesh-ca', kind: 'ClusterIssuer' } },
        },
        nats: { auth: { existingSecret: 'diffmesh-nats' }, tls: { enabled: true, existingSecret: 'diffmesh-nats-tls' } },
        tenants: { existingSecret: 'diffmesh-tenants' },
        tensor: { capabilities: { existingSecret: 'diffmesh-capability-key' } },
      },
      expect: [
        ['Certificate', '-scheduler'],
        ['Certificate', '-tensor'],
        ['Certificate', '-gateway'],
        ['Certificate', '-pool-dit-tiny'],
      ],
    },
    {
      name: 'external NATS, no gateway, no scalers or monitors',
      values: {
        nats: { bundled: false, url: 'nats://nats.example:4222' },
        gateway: { enabled: false },
        autoscaling: { enabled: false },
        metrics: { serviceMonitor: { enabled: false } },
      },
    },
  ];
}

/** A chart values file or values that helm must refuse, and the message it must give. */
const REFUSED: Array<{ name: string; values: Record<string, unknown>; message: RegExp }> = [
  {
    name: 'two schedulers on an in-memory queue',
    values: { scheduler: { replicas: 2, queue: { backend: 'memory' } } },
    message: /needs redis or jetstream/,
  },
  {
    name: 'NATS over TLS without the mesh TLS the services present to it',
    values: { nats: { tls: { enabled: true, existingSecret: 'diffmesh-nats-tls' } } },
    message: /nats.tls.enabled needs tls.enabled/,
  },
  {
    name: 'per-role NATS nkeys with a role missing',
    values: { nats: { auth: { existingSecret: 'diffmesh-nats', roles: { scheduler: `U${'A'.repeat(55)}` } } } },
    message: /needs the public keys of all four roles/,
  },
  { name: 'a misspelt top-level key', values: { schedular: { replicas: 1 } }, message: /additional properties 'schedular' not allowed/ },
  { name: 'an unknown stage', values: { pools: { x: { stage: 'upscaling' } } }, message: /stage/ },
  { name: 'HPA at zero without the feature gate', values: { autoscaling: { engine: 'hpa', minReplicas: 0 } }, message: /HPAScaleToZero/ },
];

const WORKLOADS = ['Deployment', 'DaemonSet', 'StatefulSet'];
type Obj = K8sObject & { spec?: any };

function podTemplates(objs: Obj[]): Array<{ owner: Obj; labels: Record<string, string>; spec: any }> {
  return objs
    .filter((o) => WORKLOADS.includes(o.kind))
    .map((o) => ({ owner: o, labels: o.spec?.template?.metadata?.labels ?? {}, spec: o.spec?.template?.spec ?? {} }));
}

const matches = (sel: Record<string, string> | undefined, labels: Record<string, string>) =>
  !!sel && Object.keys(sel).length > 0 && Object.entries(sel).every(([k, v]) => labels[k] === v);

/** Metric names a prom-client source declares (`name: '…'`, or a template with `${…}` parts). */
export function exportedMetrics(source: string): RegExp[] {
  return [...source.matchAll(/name:\s*(['`])(diffmesh_[^'`]+)\1/g)].map((m) => new RegExp(`^${m[2].replace(/\$\{[^}]+\}/g, '[a-z_]+')}$`));
}

/** Cross-object checks: what a cluster would accept but would not work. */
export function crossChecks(objs: Obj[], metricsSource: string): string[] {
  const out: string[] = [];
  const pods = podTemplates(objs);
  const byKind = (k: string) => objs.filter((o) => o.kind === k);
  const find = (k: string, n: string) => objs.find((o) => o.kind === k && o.metadata.name === n);

  for (const s of byKind('Service')) {
    const sel = s.spec?.selector as Record<string, string>;
    const targets = pods.filter((p) => matches(sel, p.labels));
    if (!targets.length) {
      out.push(`Service ${s.metadata.name}: its selector matches no pod template`);
      continue;
    }
    for (const port of s.spec?.ports ?? []) {
      if (typeof port.targetPort !== 'string') continue;
      const ok = targets.every((t) =>
        (t.spec.containers ?? []).some((c: any) => (c.ports ?? []).some((p: any) => p.name === port.targetPort)),
      );
      if (!ok) out.push(`Service ${s.metadata.name}: targetPort ${port.targetPort} is not a named port of every selected pod`);
    }
  }
  for (const p of byKind('PodDisruptionBudget')) {
    if (!pods.some((t) => matches(p.spec?.selector?.matchLabels, t.labels)))
      out.push(`PodDisruptionBudget ${p.metadata.name}: its selector matches no pod template`);
  }
  for (const w of objs.filter((o) => WORKLOADS.includes(o.kind))) {
    if (!matches(w.spec?.selector?.matchLabels, w.spec?.template?.metadata?.labels ?? {}))
      out.push(`${w.kind} ${w.metadata.name}: selector does not match its own pod template`);
  }
  for (const so of [...byKind('ScaledObject'), ...byKind('HorizontalPodAutoscaler')]) {
    const ref = so.spec?.scaleTargetRef;
    const target = find(ref?.kind, ref?.name);
    if (!target) out.push(`${so.kind} ${so.metadata.name}: scale target ${ref?.kind} ${ref?.name} is not rendered`);
    else if (target.spec?.replicas !== undefined)
      out.push(
        `${so.kind} ${so.metadata.name}: ${target.metadata.name} sets spec.replicas, which would fight the autoscaler on every upgrade`,
      );
    for (const t of so.spec?.triggers ?? []) {
      for (const m of String(t.metadata?.query ?? '').match(/diffmesh_[a-z_]+/g) ?? []) {
        if (!exportedMetrics(metricsSource).some((re) => re.test(m)))
          out.push(`${so.kind} ${so.metadata.name}: query uses ${m}, which scheduler/src/metrics.ts does not export`);
      }
    }
  }
  for (const sm of byKind('ServiceMonitor')) {
    const svcs = byKind('Service').filter((s) => matches(sm.spec?.selector?.matchLabels, s.metadata.labels ?? {}));
    if (!svcs.length) out.push(`ServiceMonitor ${sm.metadata.name}: selects no Service`);
    for (const ep of sm.spec?.endpoints ?? []) {
      if (!svcs.some((s) => (s.spec?.ports ?? []).some((p: any) => p.name === ep.port)))
        out.push(`ServiceMonitor ${sm.metadata.name}: no selected Service has a port named ${ep.port}`);
    }
  }
  for (const ing of byKind('Ingress')) {
    for (const r of ing.spec?.rules ?? []) {
      for (const p of r.http?.paths ?? []) {
        const svc = find('Service', p.backend?.service?.name);
        if (!svc) out.push(`Ingress ${ing.metadata.name}: backend Service ${p.backend?.service?.name} is not rendered`);
        else if (p.backend.service.port?.name && !(svc.spec?.ports ?? []).some((x: any) => x.name === p.backend.service.port.name)) {
          out.push(`Ingress ${ing.metadata.name}: Service ${svc.metadata.name} has no port ${p.backend.service.port.name}`);
        }
      }
    }
  }
  // Pods: config they mount exists, diffmesh containers are probed, bounded and locked down.
  for (const { owner, spec } of pods) {
    const id = `${owner.kind} ${owner.metadata.name}`;
    for (const v of spec.volumes ?? []) {
      if (v.configMap && !find('ConfigMap', v.configMap.name))
        out.push(`${id}: volume ${v.name} mounts ConfigMap ${v.configMap.name}, which is not rendered`);
    }
    if (!spec.securityContext?.runAsNonRoot) out.push(`${id}: pod securityContext.runAsNonRoot is not set`);
    for (const c of spec.containers ?? []) {
      if (!c.readinessProbe || !c.livenessProbe) out.push(`${id}: container ${c.name} lacks a readiness or liveness probe`);
      if (!c.resources?.limits?.memory) out.push(`${id}: container ${c.name} has no memory limit`);
      if (c.securityContext?.readOnlyRootFilesystem !== true) out.push(`${id}: container ${c.name} root filesystem is writable`);
      const mounts = new Set((c.volumeMounts ?? []).map((m: any) => m.name));
      const claims = (owner.spec?.volumeClaimTemplates ?? []).map((t: any) => t.metadata?.name);
      for (const m of mounts)
        if (!(spec.volumes ?? []).some((v: any) => v.name === m) && !claims.includes(m))
          out.push(`${id}: container ${c.name} mounts undefined volume ${String(m)}`);
    }
  }
  // Every pool serves a pool some plan routes to, and its registry parses as the scheduler would.
  const registry = byKind('ConfigMap').find((c) => c.metadata.name.endsWith('-registry')) as any;
  if (registry) {
    try {
      const reg = parsePlanRegistry(registry.data['plans.yaml'], `ConfigMap ${registry.metadata.name}`);
      const plans = (parse(registry.data['plans.yaml']) as { plans: Array<{ stages: Array<{ pool: string }> }> }).plans;
      const planPools = new Set(plans.flatMap((p) => p.stages.map((s) => s.pool)));
      for (const d of byKind('Deployment')) {
        const pool = d.metadata.labels?.['diffmesh.io/pool'];
        if (pool && !planPools.has(pool))
          out.push(`Deployment ${d.metadata.name}: pool ${pool} is in no plan of the registry (nothing would route work to it)`);
      }
      void reg;
    } catch (e) {
      out.push(`ConfigMap ${registry.metadata.name}: plans.yaml does not load: ${(e as Error).message}`);
    }
  }
  return out;
}

/** The chart's default plan entries equal scheduler/config/plans.yaml's entries of the same models. */
export function registryDrift(chartDir: string): string[] {
  const values = parse(readFileSync(path.join(chartDir, 'values.yaml'), 'utf8')) as { registry: { plans: Array<Record<string, unknown>> } };
  const shipped = (parse(readFileSync(DEFAULT_PLANS_FILE, 'utf8')) as { plans: Array<Record<string, unknown>> }).plans;
  const out: string[] = [];
  for (const p of values.registry.plans) {
    const s = shipped.find((x) => x.model === p.model);
    if (!s) out.push(`values.yaml registry: ${String(p.model)} is not in scheduler/config/plans.yaml`);
    else if (JSON.stringify(sortKeys(s)) !== JSON.stringify(sortKeys(p)))
      out.push(`values.yaml registry: ${String(p.model)} differs from scheduler/config/plans.yaml`);
  }
  return out;
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** Checks a rendered set of objects: schemas, cross references, service flags. */
export async function checkObjects(objs: K8sObject[], deployDir: string, where: string): Promise<{ problems: string[]; notes: string[] }> {
  const problems: string[] = [];
  const notes: string[] = [];
  for (const o of objs) problems.push(...(await validateObject(o)).map((p) => `${where}: ${p}`));
  const metricsSource = readFileSync(path.join(deployDir, '..', 'scheduler', 'src', 'metrics.ts'), 'utf8');
  problems.push(...crossChecks(objs as Obj[], metricsSource).map((p) => `${where}: ${p}`));
  const pending = loadPending(deployDir);
  for (const { owner, spec } of podTemplates(objs)) {
    for (const c of spec.containers ?? []) {
      const r = checkServiceArgs(
        `${where}: ${owner.kind} ${owner.metadata.name}`,
        c.args ?? [],
        (c.env ?? []).map((e: any) => e.name),
        pending,
      );
      problems.push(...r.problems);
      notes.push(...r.notes);
    }
  }
  return { problems, notes };
}

/** helm lint, every scenario rendered and validated, refusals refused. */
export async function checkChart(chartDir: string, deployDir: string, helm: string): Promise<Section> {
  const section: Section = {
    name: `Helm chart ${path.relative(path.join(deployDir, '..'), chartDir) || chartDir}`,
    problems: [],
    notes: [],
    passed: [],
  };
  for (const sc of scenarios(chartDir)) {
    const lintArgs = ['lint', chartDir, '--strict', '--quiet'];
    for (const f of sc.valuesFiles ?? []) lintArgs.push('--values', f);
    if (!sc.values) {
      try {
        await runHelm(lintArgs, { helm });
      } catch (e) {
        section.problems.push(`helm lint (${sc.name}): ${(e as Error).message}`);
      }
    }
    let objs: K8sObject[];
    try {
      objs = parseManifests(
        await helmTemplate({ chartDir, releaseName: 'check', namespace: 'diffmesh', valuesFiles: sc.valuesFiles, values: sc.values, helm }),
      );
    } catch (e) {
      section.problems.push(`helm template (${sc.name}): ${(e as Error).message}`);
      continue;
    }
    const before = section.problems.length;
    const r = await checkObjects(objs, deployDir, sc.name);
    section.problems.push(...r.problems);
    section.notes.push(...r.notes);
    for (const [kind, suffix] of sc.expect ?? []) {
      if (!objs.some((o) => o.kind === kind && o.metadata.name.endsWith(suffix)))
        section.problems.push(`${sc.name}: no ${kind} named …${suffix}`);
    }
    const pools = objs.filter((o) => o.kind === 'Deployment' && o.metadata.labels?.['diffmesh.io/tier'] === 'stage');
    const scalers = objs.filter((o) => o.kind === 'ScaledObject' || o.kind === 'HorizontalPodAutoscaler');
    if (scalers.length && scalers.length !== pools.length)
      section.problems.push(`${sc.name}: ${pools.length} pools but ${scalers.length} scalers`);
    if (section.problems.length === before) section.passed.push(`${sc.name}: ${objs.length} objects rendered and valid`);
  }
  for (const r of REFUSED) {
    try {
      await helmTemplate({ chartDir, releaseName: 'check', namespace: 'diffmesh', values: r.values, helm });
      section.problems.push(`helm template accepted ${r.name}; it must refuse it`);
    } catch (e) {
      if (r.message.test((e as Error).message)) section.passed.push(`refuses ${r.name}`);
      else section.problems.push(`helm template refused ${r.name} with an unexpected message: ${(e as Error).message}`);
    }
  }
  section.problems.push(...registryDrift(chartDir));
  const nats = await natsPermissionProblems(chartDir, helm);
  section.problems.push(...nats.problems);
  section.passed.push(...nats.passed);
  section.notes = [...new Set(section.notes)];
  return section;
}
