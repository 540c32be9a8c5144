import { CustomObjectsApi, KubeConfig, KubernetesObjectApi, PatchStrategy, Watch, setHeaderOptions } from '@kubernetes/client-node';
import type { PipelineSource } from './controller.js';
import { GROUP, PLURAL, VERSION, type DiffusionPipeline, type DiffusionPipelineStatus } from './pipeline.js';
import type { ObjectApi, StatusWriter } from './reconcile.js';

/** The API server side of the operator, from a kubeconfig (in-cluster or ~/.kube/config). */
export interface KubeAdapters {
  objects: ObjectApi;
  status: StatusWriter;
  source: PipelineSource;
}

/** Adapters over a real cluster; `namespace` limits the operator to one namespace (empty = all). */
export function kubeAdapters(kc: KubeConfig, namespace: string): KubeAdapters {
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const status: StatusWriter = {
    async patchStatus(ns, name, st: DiffusionPipelineStatus) {
      await custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name, body: { status: st } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
  };
  const source: PipelineSource = {
    async get(ns, name) {
      try {
        return (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: PLURAL,
          name,
        })) as DiffusionPipeline;
      } catch (e) {
        if ((e as { code?: number }).code === 404) return undefined;
        throw e;
      }
    },
    async list() {
      const res = (
        namespace
          ? await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL })
          : await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })
      ) as { items: DiffusionPipeline[] };
      return res.items ?? [];
    },
    async watch(onChange, onEnd) {
      const path = namespace ? `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${PLURAL}` : `/apis/${GROUP}/${VERSION}/${PLURAL}`;
      const ctl = await new Watch(kc).watch(
        path,
        { allowWatchBookmarks: true },
        (_phase, obj: DiffusionPipeline) => {
          if (obj?.metadata?.name) onChange(obj.metadata.namespace ?? 'default', obj.metadata.name);
        },
        onEnd,
      );
      return () => ctl.abort();
    },
  };
  return { objects: objects, status, source };
}
