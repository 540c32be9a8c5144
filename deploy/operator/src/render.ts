import { createHash } from 'node:crypto';
import { parseAllDocuments } from 'yaml';
import { helmTemplate } from './helm.js';
import { API_VERSION, KIND, type DiffusionPipeline } from './pipeline.js';
import { pipelineToValues } from './values.js';

/** A Kubernetes object as rendered (apiVersion, kind, metadata.name at least). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<Record<string, unknown>>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

/** Label on every object the operator applies: the pipeline it belongs to. */
export const PIPELINE_LABEL = 'diffmesh.io/pipeline';
export const MANAGED_BY = 'diffmesh-operator';

/** Parses a multi-document YAML stream (helm template output) into objects, skipping empty ones. */
export function parseManifests(text: string): K8sObject[] {
  const out: K8sObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) throw new Error(`rendered YAML does not parse: ${doc.errors[0].message}`);
    const obj = doc.toJS({ maxAliasCount: 1000 }) as K8sObject | null;
    if (obj && typeof obj === 'object') out.push(obj);
  }
  return out;
}

/** `kind/namespace/name`, the identity of an object within a pipeline. */
export function objectKey(o: { apiVersion?: string; kind: string; metadata: { name: string; namespace?: string } }): string {
  return `${o.apiVersion ?? ''}/${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
}

/** Order of apply: what others refer to first (as helm installs), scalers and monitors last. */
const APPLY_ORDER = [
  'Namespace',
  'ServiceAccount',
  'Secret',
  'ConfigMap',
  'PersistentVolumeClaim',
  'Service',
  'StatefulSet',
  'DaemonSet',
  'Deployment',
  'PodDisruptionBudget',
  'Ingress',
  'HorizontalPodAutoscaler',
  'ScaledObject',
  'ServiceMonitor',
];

export function sortForApply(objs: K8sObject[]): K8sObject[] {
  const rank = (k: string) => {
    const i = APPLY_ORDER.indexOf(k);
    return i < 0 ? APPLY_ORDER.length : i;
  };
  return [...objs].sort((a, b) => rank(a.kind) - rank(b.kind) || a.metadata.name.localeCompare(b.metadata.name));
}

/** What {@link renderPipeline} returns. */
export interface RenderedPipeline {
  values: Record<string, unknown>;
  objects: K8sObject[];
  /** sha256 over the objects, for status.renderedHash. */
  hash: string;
}

/**
 * Renders the diffmesh chart for `pipeline` (helm template, release = pipeline name) and makes
 * the result the pipeline's own: namespace set, the pipeline label, and a controller owner
 * reference so deleting the pipeline deletes them (Kubernetes garbage collection). Helm test
 * hooks are left out; a cluster-scoped object is an error (nothing namespaced can own it).
 */
export async function renderPipeline(pipeline: DiffusionPipeline, opts: { chartDir: string; helm?: string }): Promise<RenderedPipeline> {
  const namespace = pipeline.metadata.namespace ?? 'default';
  const values = pipelineToValues(pipeline);
  const text = await helmTemplate({ chartDir: opts.chartDir, releaseName: pipeline.metadata.name, namespace, values, helm: opts.helm });
  const objects: K8sObject[] = [];
  for (const o of parseManifests(text)) {
    if (o.metadata.annotations?.['helm.sh/hook']) continue;
    if (o.kind === 'CustomResourceDefinition' || o.kind === 'Namespace' || o.kind.startsWith('Cluster')) {
      throw new Error(
        `the chart rendered a cluster-scoped ${o.kind} "${o.metadata.name}"; a DiffusionPipeline owns only namespaced objects`,
      );
    }
    objects.push(adopt(o, pipeline, namespace));
  }
  const sorted = sortForApply(objects);
  const hash = createHash('sha256').update(JSON.stringify(sorted)).digest('hex').slice(0, 16);
  return { values, objects: sorted, hash };
}

/** Sets namespace, labels and the owner reference of a rendered object. */
export function adopt(o: K8sObject, pipeline: DiffusionPipeline, namespace: string): K8sObject {
  const labels = { ...(o.metadata.labels ?? {}), [PIPELINE_LABEL]: pipeline.metadata.name, 'app.kubernetes.io/managed-by': MANAGED_BY };
  return {
    ...o,
    metadata: {
      ...o.metadata,
      namespace,
      labels,
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: KIND,
          name: pipeline.metadata.name,
          uid: pipeline.metadata.uid ?? '',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
  };
}
