import { PatchStrategy, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Condition, DiffusionPipeline, DiffusionPipelineStatus, PipelineSchema } from './pipeline.js';
import { MANAGED_BY, PIPELINE_LABEL, objectKey, renderPipeline, type K8sObject, type RenderedPipeline } from './render.js';
import { resolveModelPaths } from './values.js';

/** Field manager of every server-side apply the operator makes. */
export const FIELD_MANAGER = 'diffmesh-operator';

/**
 * The part of client-node's KubernetesObjectApi the reconciler uses. Tests pass a fake that
 * records the calls; production passes `KubernetesObjectApi.makeApiClient(kc)`.
 */
export interface ObjectApi {
  patch<T extends KubernetesObject>(
    spec: T,
    pretty?: string,
    dryRun?: string,
    fieldManager?: string,
    force?: boolean,
    patchStrategy?: PatchStrategy,
  ): Promise<T>;
  list<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace?: string,
    pretty?: string,
    exact?: boolean,
    exportt?: boolean,
    fieldSelector?: string,
    labelSelector?: string,
  ): Promise<KubernetesListObject<T>>;
  delete(
    spec: KubernetesObject,
    pretty?: string,
    dryRun?: string,
    gracePeriodSeconds?: number,
    orphanDependents?: boolean,
    propagationPolicy?: string,
  ): Promise<unknown>;
}

/** Writes a pipeline's status subresource (a merge patch of `status`). */
export interface StatusWriter {
  patchStatus(namespace: string, name: string, status: DiffusionPipelineStatus): Promise<void>;
}

/**
 * Kinds the chart can render: objects of these kinds that carry the pipeline's label but were
 * not rendered this time are deleted (a pool removed from the spec, the gateway turned off).
 */
export const PRUNABLE_KINDS: Array<[apiVersion: string, kind: string]> = [
  ['v1', 'ConfigMap'],
  ['v1', 'Secret'],
  ['v1', 'Service'],
  ['v1', 'ServiceAccount'],
  ['v1', 'PersistentVolumeClaim'],
  ['apps/v1', 'Deployment'],
  ['apps/v1', 'DaemonSet'],
  ['apps/v1', 'StatefulSet'],
  ['policy/v1', 'PodDisruptionBudget'],
  ['networking.k8s.io/v1', 'Ingress'],
  ['autoscaling/v2', 'HorizontalPodAutoscaler'],
  ['keda.sh/v1alpha1', 'ScaledObject'],
  ['monitoring.coreos.com/v1', 'ServiceMonitor'],
  ['cert-manager.io/v1', 'Certificate'],
];

/** Condition types a DiffusionPipeline reports. */
export const CONDITIONS = {
  /** The spec was valid, rendered and applied as a whole. */
  Reconciled: 'Reconciled',
  /** Every workload has its desired number of ready pods. */
  Ready: 'Ready',
} as const;

/** What one reconcile did. */
export interface ReconcileResult {
  status: DiffusionPipelineStatus;
  applied: string[];
  pruned: string[];
  /** When to look again: soon while not ready, else the resync period. */
  requeueAfterMs: number;
}

export interface ReconcilerOptions {
  api: ObjectApi;
  status: StatusWriter;
  schema: PipelineSchema;
  chartDir: string;
  helm?: string;
  log: Logger;
  now?: () => Date;
  /** Requeue while some workload is not ready (default 15 s). */
  notReadyRequeueMs?: number;
  /** Requeue when all is well, to repair drift (default 5 min). */
  resyncMs?: number;
}

/**
 * Turns a DiffusionPipeline into the chart's objects: validate (CRD schema and its CEL rules),
 * render (helm template with the spec as values), apply every object with server-side apply
 * (field manager diffmesh-operator, conflicts forced: the operator owns what it renders),
 * prune objects of the pipeline that are no longer rendered, and report status conditions.
 * Owner references on every object let Kubernetes delete them with the pipeline.
 */
export class Reconciler {
  private readonly now: () => Date;

  constructor(private readonly opts: ReconcilerOptions) {
    this.now = opts.now ?? (() => new Date());
  }

  async reconcile(input: DiffusionPipeline): Promise<ReconcileResult> {
    const { log } = this.opts;
    const pipeline = structuredClone(input);
    const ns = pipeline.metadata.namespace ?? 'default';
    const name = pipeline.metadata.name;
    const generation = pipeline.metadata.generation;
    const previous = input.status?.conditions ?? [];
    const notReady = this.opts.notReadyRequeueMs ?? 15_000;
    const resync = this.opts.resyncMs ?? 300_000;

    const finish = async (
      status: DiffusionPipelineStatus,
      applied: string[],
      pruned: string[],
      requeueAfterMs: number,
    ): Promise<ReconcileResult> => {
      await this.opts.status.patchStatus(ns, name, status);
      return { status, applied, pruned, requeueAfterMs };
    };

    // 1. Validate (and default) as the API server would; a bad spec is reported, not retried.
    const problems = this.opts.schema.validate(pipeline);
    if (problems.length) {
      const message = problems.map((p) => `${p.path}: ${p.message}`).join('; ');
      log.warn({ pipeline: `${ns}/${name}`, problems }, 'invalid DiffusionPipeline');
      return finish(
        {
          observedGeneration: generation,
          conditions: [
            this.condition(previous, CONDITIONS.Reconciled, 'False', 'InvalidSpec', message, generation),
            this.condition(previous, CONDITIONS.Ready, 'False', 'InvalidSpec', 'the spec is invalid; nothing was applied', generation),
          ],
        },
        [],
        [],
        resync,
      );
    }

    // 2. Render.
    let rendered: RenderedPipeline;
    try {
      rendered = await renderPipeline(pipeline, { chartDir: this.opts.chartDir, helm: this.opts.helm });
    } catch (e) {
      const message = (e as Error).message;
      log.error({ pipeline: `${ns}/${name}`, err: message }, 'render failed');
      return finish(
        {
          observedGeneration: generation,
          conditions: [
            this.condition(previous, CONDITIONS.Reconciled, 'False', 'RenderFailed', message, generation),
            this.condition(previous, CONDITIONS.Ready, 'Unknown', 'RenderFailed', 'the chart did not render', generation),
          ],
        },
        [],
        [],
        notReady,
      );
    }

    // 3. Apply, in dependency order. The API answers with the live object, status included.
    const applied: string[] = [];
    const live = new Map<string, KubernetesObject>();
    for (const obj of rendered.objects) {
      try {
        const res = await this.opts.api.patch(
          obj as KubernetesObject,
          undefined,
          undefined,
          FIELD_MANAGER,
          true,
          PatchStrategy.ServerSideApply,
        );
        applied.push(objectKey(obj));
        live.set(objectKey(obj), res ?? obj);
      } catch (e) {
        const message = `${obj.kind} ${obj.metadata.name}: ${errorText(e)}`;
        log.error({ pipeline: `${ns}/${name}`, err: message }, 'apply failed');
        return finish(
          {
            observedGeneration: generation,
            renderedHash: input.status?.renderedHash,
            appliedObjects: applied.length,
            conditions: [
              this.condition(previous, CONDITIONS.Reconciled, 'False', 'ApplyFailed', message, generation),
              this.condition(previous, CONDITIONS.Ready, 'Unknown', 'ApplyFailed', 'not every object could be applied', generation),
            ],
          },
          applied,
          [],
          notReady,
        );
      }
    }

    // 4. Prune what this pipeline owned and no longer renders.
    const pruned = await this.prune(pipeline, new Set(rendered.objects.map(objectKey)));

    // 5. Status.
    const { pools, waiting } = readiness(rendered.objects, live);
    const ready = waiting.length === 0;
    // Where each stage's model path points; a repo id is reported as resolved under the models
    // volume. Always written (empty too): the status is a merge patch, so a list left out stays.
    const models = resolveModelPaths(pipeline.spec);
    const status: DiffusionPipelineStatus = {
      observedGeneration: generation,
      renderedHash: rendered.hash,
      appliedObjects: applied.length,
      pools,
      models,
      conditions: [
        this.condition(
          previous,
          CONDITIONS.Reconciled,
          'True',
          'Applied',
          `${applied.length} objects applied, ${pruned.length} pruned`,
          generation,
        ),
        ready
          ? this.condition(previous, CONDITIONS.Ready, 'True', 'AllReady', 'every workload has its ready replicas', generation)
          : this.condition(previous, CONDITIONS.Ready, 'False', 'Progressing', `waiting for ${waiting.join(', ')}`, generation),
      ],
    };
    log.info({ pipeline: `${ns}/${name}`, applied: applied.length, pruned: pruned.length, ready }, 'reconciled');
    return finish(status, applied, pruned, ready ? resync : notReady);
  }

  /** Deletes labelled objects of the pipeline that are not in `keep`. Kinds the cluster lacks are skipped. */
  private async prune(pipeline: DiffusionPipeline, keep: Set<string>): Promise<string[]> {
    const ns = pipeline.metadata.namespace ?? 'default';
    const selector = `${PIPELINE_LABEL}=${pipeline.metadata.name},app.kubernetes.io/managed-by=${MANAGED_BY}`;
    const pruned: string[] = [];
    for (const [apiVersion, kind] of PRUNABLE_KINDS) {
      let list: KubernetesListObject<KubernetesObject>;
      try {
        list = await this.opts.api.list(apiVersion, kind, ns, undefined, undefined, undefined, undefined, selector);
      } catch (e) {
        // A CRD that is not installed (no KEDA, no prometheus-operator): nothing of it to prune.
        if (statusCode(e) === 404) continue;
        throw e;
      }
      for (const item of list.items ?? []) {
        const obj = { ...item, apiVersion, kind } as K8sObject;
        const owned = (item.metadata?.ownerReferences ?? []).some((r) => r.uid === pipeline.metadata.uid && r.controller);
        if (!owned || keep.has(objectKey(obj))) continue;
        await this.opts.api.delete(obj as KubernetesObject, undefined, undefined, undefined, undefined, 'Background');
        pruned.push(objectKey(obj));
      }
    }
    return pruned;
  }

  /** A condition, keeping lastTransitionTime when the status did not change. */
  private condition(
    previous: Condition[],
    type: string,
    status: Condition['status'],
    reason: string,
    message: string,
    generation?: number,
  ): Condition {
    const before = previous.find((c) => c.type === type);
    const lastTransitionTime =
      before && before.status === status
        ? before.lastTransitionTime
        : this.now()
            .toISOString()
            .replace(/\.\d+Z$/, 'Z');
    return {
      type,
      status,
      reason,
      message: message.slice(0, 32_000),
      lastTransitionTime,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    };
  }
}

/**
 * Ready replicas of every workload, from the live objects the applies returned. A pool scaled to
 * zero by its autoscaler is ready with no replicas.
 */
export function readiness(
  rendered: K8sObject[],
  live: Map<string, KubernetesObject>,
): { pools: NonNullable<DiffusionPipelineStatus['pools']>; waiting: string[] } {
  const pools: NonNullable<DiffusionPipelineStatus['pools']> = [];
  const waiting: string[] = [];
  for (const obj of rendered) {
    if (!['Deployment', 'StatefulSet', 'DaemonSet'].includes(obj.kind)) continue;
    const l = (live.get(objectKey(obj)) ?? obj) as unknown as { spec?: { replicas?: number }; status?: Record<string, number> };
    const st = l.status ?? {};
    const desired = obj.kind === 'DaemonSet' ? (st.desiredNumberScheduled ?? 0) : (l.spec?.replicas ?? st.replicas ?? 1);
    const ready = obj.kind === 'DaemonSet' ? (st.numberReady ?? 0) : (st.readyReplicas ?? 0);
    if (ready < desired || (obj.kind === 'DaemonSet' && l.status === undefined))
      waiting.push(`${obj.kind} ${obj.metadata.name} (${ready}/${desired})`);
    const pool = obj.metadata.labels?.['diffmesh.io/pool'];
    if (pool) pools.push({ name: pool, stage: obj.metadata.labels?.['diffmesh.io/stage'], replicas: desired, readyReplicas: ready });
  }
  pools.sort((a, b) => a.name.localeCompare(b.name));
  return { pools, waiting };
}

function statusCode(e: unknown): number | undefined {
  const x = e as { code?: number; statusCode?: number; response?: { statusCode?: number } };
  return x.code ?? x.statusCode ?? x.response?.statusCode;
}

function errorText(e: unknown): string {
  const x = e as { body?: unknown; message?: string };
  if (x.body && typeof x.body === 'object' && 'message' in x.body) return String(x.body.message);
  if (typeof x.body === 'string') {
    try {
      return String((JSON.parse(x.body) as { message?: string }).message ?? x.body);
    } catch {
      return x.body;
    }
  }
  return x.message ?? String(e);
}
