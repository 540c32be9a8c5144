import {
  canonicalStage,
  REPO_ID,
  type AutoscalingSpec,
  type DiffusionPipeline,
  type DiffusionPipelineSpec,
  type ModelPathStatus,
  type StageSpec,
} from './pipeline.js';

type Values = Record<string, unknown>;

/** Copies the keys of `from` that are set into `to` (under the names of `map`: from key → to key). */
function pick(to: Values, from: Record<string, unknown> | undefined, map: Record<string, string>): void {
  if (!from) return;
  for (const [src, dst] of Object.entries(map)) {
    const v = from[src];
    if (v !== undefined && v !== null) to[dst] = v;
  }
}

function autoscalingValues(a: AutoscalingSpec | undefined): Values | undefined {
  if (!a) return undefined;
  const out: Values = {};
  pick(out, a as Record<string, unknown>, {
    enabled: 'enabled',
    engine: 'engine',
    minReplicas: 'minReplicas',
    maxReplicas: 'maxReplicas',
    targetTasksPerReplica: 'targetTasksPerReplica',
    pollingInterval: 'pollingInterval',
    cooldownPeriod: 'cooldownPeriod',
  });
  // The design's `metrics: [{ type: queue_size, target }]` is the pool-tasks scaler's target.
  const queueSize = a.metrics?.find((m) => m.type === 'queue_size');
  if (queueSize) out.targetTasksPerReplica = queueSize.target;
  if (a.prometheusAddress) out.prometheus = { serverAddress: a.prometheusAddress };
  return out;
}

/** The chart's models mount (`models.mountPath`, /models unless the spec sets it). */
function modelsMount(spec: DiffusionPipelineSpec): string {
  return (spec.models?.mountPath ?? '/models').replace(/\/+$/, '');
}

/**
 * Each stage's model path as given and as its pool loads it: an absolute path (a models root)
 * as it is; a Hugging Face repo id `org/name` as the model directory `<models.mountPath>/org/name`
 * (the volume's `<org>/<name>/` layout), `org/name@rev` as `<models.mountPath>/org/name@rev`.
 * Nothing is downloaded: the files must be on the volume.
 */
export function resolveModelPaths(spec: DiffusionPipelineSpec): ModelPathStatus[] {
  const out: ModelPathStatus[] = [];
  for (const s of spec.stages) {
    const p = s.model?.path;
    if (!p) continue;
    const m = p.startsWith('/') ? null : REPO_ID.exec(p);
    out.push({
      stage: canonicalStage(s.name),
      pool: s.pool,
      path: p,
      resolvedPath: m ? `${modelsMount(spec)}/${m[1]}/${m[2]}${m[3] ? `@${m[3]}` : ''}` : p,
      resolvedFrom: m ? 'RepoId' : 'Path',
      ...(m?.[3] ? { revision: m[3] } : {}),
    });
  }
  return out;
}

/**
 * The scheduler's queue on `spec.redis`: `--queue-url redis://host:port/db`; with a password,
 * the URL goes through the environment instead (Kubernetes expands `$(REDIS_PASSWORD)`, which
 * comes from the Secret), so the password is in no argument.
 */
function redisQueue(redis: NonNullable<DiffusionPipelineSpec['redis']>): { url?: string; extraEnv?: Values[] } {
  const hostPort = `${redis.host}:${redis.port ?? 6379}/${redis.db ?? 0}`;
  const secret = redis.passwordSecret;
  if (!secret) return { url: `redis://${hostPort}` };
  return {
    extraEnv: [
      { name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: secret.name, key: secret.key ?? 'password' } } },
      { name: 'DIFFMESH_SCHEDULER_QUEUE_URL', value: `redis://:$(REDIS_PASSWORD)@${hostPort}` },
    ],
  };
}

function poolValues(model: string, s: StageSpec): Values {
  const p: Values = { stage: canonicalStage(s.name), models: [model] };
  pick(p, s as unknown as Record<string, unknown>, {
    replicas: 'replicas',
    capacity: 'capacity',
    threads: 'threads',
    maxBatch: 'maxBatch',
    executionProviders: 'executionProviders',
    providerOptions: 'providerOptions',
    runnerThreads: 'runnerThreads',
    version: 'version',
    image: 'image',
    gpu: 'gpu',
    resources: 'resources',
    nodeSelector: 'nodeSelector',
    tolerations: 'tolerations',
    affinity: 'affinity',
    runtimeClassName: 'runtimeClassName',
  });
  if (s.model && Object.keys(s.model).length) p.model = { ...s.model };
  const a = autoscalingValues(s.autoscaling);
  if (a && Object.keys(a).length) p.autoscaling = a;
  return p;
}

/**
 * The values of the diffmesh chart that deploy `pipeline`: the one mapping from the CRD to the
 * chart, so the operator and `helm install` make the same objects. Unset spec fields leave the
 * chart's defaults in place. The pipeline's defaults must already be applied (the API server
 * does it; {@link loadPipelineSchema}'s validate does it where none runs).
 *
 * - the release's objects are named `<pipeline>-<component>` (fullnameOverride);
 * - the registry holds one plan: the model, its stages' pools (a stage's `versionRange` pins
 *   the plan's stage version), defaults and constraints;
 * - each stage becomes a pool serving the model, without the chart's built-in pools;
 * - the CRD itself is not rendered: it is installed once per cluster, not per pipeline.
 */
export function pipelineToValues(pipeline: DiffusionPipeline): Values {
  const spec = pipeline.spec;
  const v: Values = {
    fullnameOverride: pipeline.metadata.name,
    crds: { install: false },
    builtinPools: { enabled: false },
  };
  if (spec.image) v.image = { ...spec.image };

  const plan: Values = { model: spec.model };
  if (spec.description) plan.description = spec.description;
  plan.modalities = spec.modalities ?? ['text-to-image'];
  // The image encoder takes the request's input image, and runs only for requests with one.
  plan.stages = spec.stages.map((s) => ({
    name: canonicalStage(s.name),
    pool: s.pool,
    ...(s.versionRange ? { version: s.versionRange } : {}),
    ...(canonicalStage(s.name) === 'image_encoding' ? { requires: 'input_image' } : {}),
  }));
  plan.defaults = { ...(spec.defaults ?? {}) };
  plan.constraints = { ...(spec.constraints ?? {}) };
  v.registry = { plans: [plan] };

  if (spec.scheduler) {
    const sc = spec.scheduler;
    const s: Values = {};
    pick(s, sc, {
      replicas: 'replicas',
      maxQueueLength: 'maxQueueLength',
      maxInFlight: 'maxInFlight',
      maxAttempts: 'maxAttempts',
      defaultTimeoutMs: 'defaultTimeoutMs',
      stageTimeoutMs: 'stageTimeoutMs',
      resources: 'resources',
      nodeSelector: 'nodeSelector',
      tolerations: 'tolerations',
    });
    const redis = sc.queueBackend === 'redis' && spec.redis ? redisQueue(spec.redis) : {};
    const url = sc.queueUrl ?? redis.url;
    if (sc.queueBackend || url) {
      s.queue = { ...(sc.queueBackend ? { backend: sc.queueBackend } : {}), ...(url ? { url } : {}) };
    }
    if (redis.extraEnv) s.extraEnv = redis.extraEnv;
    v.scheduler = s;
  }
  if (spec.nats?.url || spec.nats?.credentialsSecret) {
    v.nats = {
      ...(spec.nats.url ? { bundled: false, url: spec.nats.url } : {}),
      ...(spec.nats.credentialsSecret ? { auth: { existingSecret: spec.nats.credentialsSecret } } : {}),
    };
  }

  if (spec.tensorStore) {
    const t: Values = {};
    pick(t, spec.tensorStore, {
      backend: 'backend',
      durable: 'durable',
      s3Endpoint: 's3Endpoint',
      memoryCapacityBytes: 'memoryCapacityBytes',
    });
    v.tensor = t;
    if (spec.tensorStore.credentialsSecret) v.credentials = { existingSecret: spec.tensorStore.credentialsSecret };
  }
  if (spec.models) {
    const m: Values = {};
    if (spec.models.volume) m.volume = spec.models.volume;
    if (spec.models.mountPath) m.mountPath = spec.models.mountPath;
    v.models = m;
  }

  const pools: Values = {};
  const paths = new Map(resolveModelPaths(spec).map((m) => [m.pool, m]));
  for (const s of spec.stages) {
    const p = poolValues(spec.model, s);
    const m = paths.get(s.pool);
    if (m?.resolvedFrom === 'RepoId') {
      // A repo id names one model directory on the volume: the pool serves the pipeline's model
      // from it (--models id=DIR), the volume's root staying the models root.
      p.model = { ...(p.model as Values), path: m.resolvedPath };
      p.models = [`${spec.model}=${m.resolvedPath}`];
    } else if (m) {
      // An absolute path is a models root of its own, searched before the image's built-ins.
      p.modelsDirs = [m.resolvedPath, '/app/models/generated'];
    }
    pools[s.pool] = p;
  }
  v.pools = pools;

  const a = autoscalingValues(spec.autoscaling);
  if (a) v.autoscaling = a;

  if (spec.gateway) {
    const g: Values = {};
    pick(g, spec.gateway, { enabled: 'enabled', replicas: 'replicas' });
    if (spec.gateway.apiKeysSecret) g.apiKeys = { existingSecret: spec.gateway.apiKeysSecret };
    const ing = spec.gateway.ingress;
    if (ing) {
      g.ingress = {
        enabled: true,
        ...(ing.className ? { className: ing.className } : {}),
        hosts: [{ host: ing.host, paths: [{ path: '/', pathType: 'Prefix' }] }],
        tls: ing.tlsSecretName ? [{ secretName: ing.tlsSecretName, hosts: [ing.host] }] : [],
      };
    }
    v.gateway = g;
  }
  if (spec.telemetry?.otlpEndpoint) v.telemetry = { otlpEndpoint: spec.telemetry.otlpEndpoint };
  if (spec.tls) {
    const issuer = spec.tls.certManagerIssuer;
    v.tls = {
      enabled: true,
      ...(spec.tls.secretName ? { existingSecret: spec.tls.secretName } : {}),
      ...(issuer ? { certManager: { enabled: true, issuerRef: { name: issuer.name, kind: issuer.kind ?? 'Issuer' } } } : {}),
      requireClientCert: spec.tls.requireClientCert ?? false,
    };
  }
  if (spec.serviceMonitor !== undefined) v.metrics = { serviceMonitor: { enabled: spec.serviceMonitor } };
  return v;
}
