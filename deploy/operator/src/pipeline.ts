import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import AjvModule, { type ErrorObject, type ValidateFunction } from 'ajv';
import { parse } from 'yaml';

// ajv is CommonJS: its default export is the class under NodeNext module resolution.
const Ajv = AjvModule as unknown as typeof AjvModule.default;

export const GROUP = 'diffmesh.io';
export const VERSION = 'v1alpha1';
export const KIND = 'DiffusionPipeline';
export const PLURAL = 'diffusionpipelines';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** The chart this package renders (deploy/helm/diffmesh); DIFFMESH_CHART_DIR overrides it. */
export function defaultChartDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.DIFFMESH_CHART_DIR ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'helm', 'diffmesh');
}

/** The CRD manifest inside the chart: one file, used by the chart, the operator and the checks. */
export function crdFile(chartDir = defaultChartDir()): string {
  return path.join(chartDir, 'files', 'crds', `${PLURAL}.${GROUP}.yaml`);
}

/** A Kubernetes condition (metav1.Condition). */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export interface Resources {
  requests?: Record<string, string | number>;
  limits?: Record<string, string | number>;
}

export interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  tolerationSeconds?: number;
}

export interface AutoscalingSpec {
  enabled?: boolean;
  engine?: 'keda' | 'hpa';
  minReplicas?: number;
  maxReplicas?: number;
  targetTasksPerReplica?: number;
  pollingInterval?: number;
  cooldownPeriod?: number;
  prometheusAddress?: string;
  /** Design-style target: `[{ type: queue_size, target }]`, the same as targetTasksPerReplica. */
  metrics?: Array<{ type: 'queue_size'; target: number }>;
}

export type StageName = 'text_encoding' | 'text_encoding_2' | 'image_encoding' | 'denoising' | 'vae_decoding';
/** The hyphenated stage names the CRD accepts as aliases. */
export type StageAlias = 'text-encoding' | 'text-encoding-2' | 'image-encoding' | 'vae-decoding';

/** The canonical stage of a stage name or alias (`text-encoding` → `text_encoding`). */
export function canonicalStage(name: StageName | StageAlias): StageName {
  return name.replace(/-/g, '_') as StageName;
}

/** Hugging Face repo id (`org/name`, optionally `@revision`), as the CRD's model.path accepts it. */
export const REPO_ID = /^([A-Za-z0-9][A-Za-z0-9._-]*)\/([A-Za-z0-9][A-Za-z0-9._-]*)(?:@([A-Za-z0-9][A-Za-z0-9._-]*))?$/;

export interface StageSpec {
  name: StageName | StageAlias;
  pool: string;
  replicas?: number;
  capacity?: number;
  threads?: number;
  maxBatch?: number;
  executionProviders?: string[];
  providerOptions?: Record<string, Record<string, unknown>>;
  runnerThreads?: number;
  version?: string;
  versionRange?: string;
  image?: { repository?: string; tag?: string };
  gpu?: number;
  resources?: Resources;
  nodeSelector?: Record<string, string>;
  tolerations?: Toleration[];
  affinity?: Record<string, unknown>;
  runtimeClassName?: string;
  model?: { path?: string; component?: string };
  autoscaling?: AutoscalingSpec;
}

/** `spec` of a DiffusionPipeline (see the CRD's openAPIV3Schema for every field). */
export interface DiffusionPipelineSpec {
  model: string;
  description?: string;
  modalities?: string[];
  defaults?: Record<string, number>;
  constraints?: Record<string, unknown>;
  image?: { repository?: string; tag?: string; pullPolicy?: string };
  scheduler?: {
    replicas?: number;
    queueBackend?: 'memory' | 'sqlite' | 'redis' | 'jetstream';
    queueUrl?: string;
    maxQueueLength?: number;
    maxInFlight?: number;
    maxAttempts?: number;
    defaultTimeoutMs?: number;
    stageTimeoutMs?: number;
    resources?: Resources;
    nodeSelector?: Record<string, string>;
    tolerations?: Toleration[];
  };
  /** `credentialsSecret`: the services' NATS credentials (chart `nats.auth.existingSecret`). */
  nats?: { url?: string; credentialsSecret?: string };
  tensorStore?: {
    backend?: 'memory' | 'redis' | 's3';
    durable?: string;
    s3Endpoint?: string;
    memoryCapacityBytes?: number;
    credentialsSecret?: string;
  };
  models?: { volume?: Record<string, unknown>; mountPath?: string };
  /** The Redis server of the scheduler's queue (queueBackend redis). */
  redis?: { host: string; port?: number; db?: number; passwordSecret?: { name: string; key?: string } };
  stages: StageSpec[];
  autoscaling?: AutoscalingSpec;
  gateway?: {
    enabled?: boolean;
    replicas?: number;
    apiKeysSecret?: string;
    ingress?: { host: string; className?: string; tlsSecretName?: string };
  };
  telemetry?: { otlpEndpoint?: string };
  /** Certificates from one Secret, or a cert-manager Certificate per component from `certManagerIssuer`. */
  tls?: { secretName?: string; certManagerIssuer?: { name: string; kind?: 'Issuer' | 'ClusterIssuer' }; requireClientCert?: boolean };
  serviceMonitor?: boolean;
}

export interface DiffusionPipelineStatus {
  observedGeneration?: number;
  renderedHash?: string;
  appliedObjects?: number;
  pools?: Array<{ name: string; stage?: string; replicas?: number; readyReplicas?: number }>;
  /** Each stage's model path as given and as its pool loads it (a repo id resolved under the models volume). */
  models?: ModelPathStatus[];
  conditions?: Condition[];
}

export interface ModelPathStatus {
  stage: StageName;
  pool: string;
  path: string;
  resolvedPath: string;
  resolvedFrom: 'RepoId' | 'Path';
  revision?: string;
}

export interface DiffusionPipeline {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string; generation?: number; labels?: Record<string, string>; [k: string]: unknown };
  spec: DiffusionPipelineSpec;
  status?: DiffusionPipelineStatus;
}

/** One problem with a DiffusionPipeline: where (JSON pointer into the object) and what. */
export interface SpecProblem {
  path: string;
  message: string;
}

type JsonSchema = Record<string, unknown>;

/**
 * The CRD's structural schema as a JSON Schema ajv can run with the API server's behaviour:
 * unknown fields rejected (kubectl's strict field validation) except under
 * x-kubernetes-preserve-unknown-fields, int-or-string as anyOf, x-kubernetes-* keywords kept
 * for {@link checkCrdRules}.
 */
export function toJsonSchema(s: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'properties' && v && typeof v === 'object') {
      out.properties = Object.fromEntries(Object.entries(v as Record<string, JsonSchema>).map(([pk, pv]) => [pk, toJsonSchema(pv)]));
    } else if ((k === 'items' || k === 'additionalProperties') && v && typeof v === 'object') {
      out[k] = toJsonSchema(v as JsonSchema);
    } else if (k === 'anyOf' || k === 'allOf' || k === 'oneOf') {
      out[k] = (v as JsonSchema[]).map(toJsonSchema);
    } else {
      out[k] = v;
    }
  }
  if (out.type === 'object' && out.properties && out.additionalProperties === undefined && !out['x-kubernetes-preserve-unknown-fields']) {
    out.additionalProperties = false;
  }
  return out;
}

/**
 * JavaScript twins of the CRD's CEL rules (x-kubernetes-validations), keyed by the rule text.
 * The API server evaluates the CEL; these let the operator and the checks apply the same rules
 * where no API server runs. A rule without a twin fails {@link loadPipelineSchema}.
 */
export const CEL_RULES: Record<string, (self: any) => boolean> = {
  '!has(self.constraints) || !has(self.defaults) || (self.defaults.width <= self.constraints.maxWidth && self.defaults.height <= self.constraints.maxHeight)':
    (s) => !s.constraints || !s.defaults || (s.defaults.width <= s.constraints.maxWidth && s.defaults.height <= s.constraints.maxHeight),
  "!self.stages.exists(s, s.name in ['image_encoding', 'image-encoding']) || (has(self.modalities) && self.modalities.exists(m, m in ['image-to-video', 'image-to-image']))":
    (s) =>
      !s.stages.some((st: StageSpec) => canonicalStage(st.name) === 'image_encoding') ||
      (Array.isArray(s.modalities) && s.modalities.some((m: string) => m === 'image-to-video' || m === 'image-to-image')),
  "!has(self.redis) || (self.scheduler.queueBackend == 'redis' && !has(self.scheduler.queueUrl))": (s) =>
    !s.redis || (s.scheduler.queueBackend === 'redis' && s.scheduler.queueUrl === undefined),
  "self.scheduler.queueBackend != 'redis' || has(self.redis) || has(self.scheduler.queueUrl) || (has(self.tensorStore) && has(self.tensorStore.credentialsSecret))":
    (s) =>
      s.scheduler.queueBackend !== 'redis' ||
      s.redis !== undefined ||
      s.scheduler.queueUrl !== undefined ||
      s.tensorStore?.credentialsSecret !== undefined,
  "self.all(s, self.filter(t, t.name.replace('-', '_') == s.name.replace('-', '_')).size() == 1)": (s) =>
    s.every((a: StageSpec) => s.filter((b: StageSpec) => canonicalStage(b.name) === canonicalStage(a.name)).length === 1),
  '!has(self.metrics) || !has(self.targetTasksPerReplica)': (s) => s.metrics === undefined || s.targetTasksPerReplica === undefined,
  'self.remainder < self.modulus': (s) => s.remainder < s.modulus,
  "self.replicas <= 1 || self.queueBackend in ['redis', 'jetstream']": (s) =>
    s.replicas <= 1 || ['redis', 'jetstream'].includes(s.queueBackend),
  '!has(self.autoscaling) || !has(self.autoscaling.minReplicas) || !has(self.autoscaling.maxReplicas) || self.autoscaling.minReplicas <= self.autoscaling.maxReplicas':
    (s) =>
      !s.autoscaling ||
      s.autoscaling.minReplicas === undefined ||
      s.autoscaling.maxReplicas === undefined ||
      s.autoscaling.minReplicas <= s.autoscaling.maxReplicas,
};

/** A compiled DiffusionPipeline schema. */
export interface PipelineSchema {
  /** The CRD's openAPIV3Schema as written. */
  openApi: JsonSchema;
  /**
   * Validates `obj` and fills in the schema's defaults in place, as the API server does on
   * create. Returns the problems (empty when valid).
   */
  validate(obj: unknown): SpecProblem[];
}

/** Loads the CRD from the chart and compiles its schema. */
export function loadPipelineSchema(file = crdFile()): PipelineSchema {
  const crd = parse(readFileSync(file, 'utf8'), { maxAliasCount: 1000 }) as {
    spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: JsonSchema } }> };
  };
  const version = crd.spec.versions.find((v) => v.name === VERSION);
  if (!version) throw new Error(`${file}: no version ${VERSION}`);
  const openApi = version.schema.openAPIV3Schema;
  const missing = collectRules(openApi).filter((r) => !(r in CEL_RULES));
  if (missing.length) throw new Error(`${file}: CEL rules without a JavaScript twin in CEL_RULES: ${missing.join(' | ')}`);
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat('date-time', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
  const fn: ValidateFunction = ajv.compile(toJsonSchema(openApi));
  return {
    openApi,
    validate(obj: unknown): SpecProblem[] {
      const problems: SpecProblem[] = [];
      if (!fn(obj)) problems.push(...(fn.errors ?? []).map(ajvProblem));
      if (problems.length === 0) problems.push(...checkCrdRules(openApi, obj, ''));
      return problems;
    },
  };
}

function ajvProblem(e: ErrorObject): SpecProblem {
  const extra =
    e.keyword === 'additionalProperties'
      ? `: unknown field "${(e.params as { additionalProperty: string }).additionalProperty}"`
      : e.keyword === 'enum'
        ? `: ${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)}`
        : '';
  return { path: e.instancePath || '/', message: `${e.message ?? e.keyword}${extra}` };
}

function collectRules(s: JsonSchema): string[] {
  const out: string[] = [];
  const rules = s['x-kubernetes-validations'] as Array<{ rule: string }> | undefined;
  for (const r of rules ?? []) out.push(r.rule);
  for (const k of ['properties']) {
    for (const v of Object.values((s[k] as Record<string, JsonSchema>) ?? {})) out.push(...collectRules(v));
  }
  for (const k of ['items', 'additionalProperties']) if (s[k] && typeof s[k] === 'object') out.push(...collectRules(s[k] as JsonSchema));
  return out;
}

/** The CEL rules and list-map key uniqueness of the schema, applied to `data`. */
export function checkCrdRules(s: JsonSchema, data: unknown, at: string): SpecProblem[] {
  const out: SpecProblem[] = [];
  if (data === undefined || data === null) return out;
  for (const r of (s['x-kubernetes-validations'] as Array<{ rule: string; message?: string }>) ?? []) {
    const fn = CEL_RULES[r.rule];
    let ok = false;
    try {
      ok = fn(data);
    } catch {
      ok = false;
    }
    if (!ok) out.push({ path: at || '/', message: r.message ?? `failed rule ${r.rule}` });
  }
  if (Array.isArray(data)) {
    if (s['x-kubernetes-list-type'] === 'map') {
      const keys = (s['x-kubernetes-list-map-keys'] as string[]) ?? [];
      const seen = new Set<string>();
      data.forEach((item, i) => {
        const key = JSON.stringify(keys.map((k) => (item as Record<string, unknown>)[k]));
        if (seen.has(key)) out.push({ path: `${at}/${i}`, message: `duplicate entry with ${keys.join(', ')} ${key}` });
        seen.add(key);
      });
    }
    const items = s.items as JsonSchema | undefined;
    if (items) data.forEach((item, i) => out.push(...checkCrdRules(items, item, `${at}/${i}`)));
  } else if (typeof data === 'object') {
    const props = (s.properties as Record<string, JsonSchema>) ?? {};
    for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
      if (props[k]) out.push(...checkCrdRules(props[k], v, `${at}/${k}`));
    }
  }
  return out;
}
