import * as k8s from '@kubernetes/client-node';
import type { K8sObject } from '@diffmesh/operator';

/** A model class of kubernetes-models / @kubernetes-models/*: validate() throws on a bad object. */
type ModelClass = new (data: unknown) => { validate(): void };

/** Where the schema of each API group lives (maintained packages, no network). */
const MODULES: Record<string, string> = {
  'keda.sh': '@kubernetes-models/keda/keda.sh',
  'cert-manager.io': '@kubernetes-models/cert-manager/cert-manager.io',
  'monitoring.coreos.com': '@kubernetes-models/prometheus-operator/monitoring.coreos.com',
};

async function modelClass(apiVersion: string, kind: string): Promise<ModelClass | undefined> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const base = MODULES[group] ?? (group ? `kubernetes-models/${group}` : 'kubernetes-models');
  try {
    const mod = (await import(`${base}/${version}`)) as Record<string, unknown>;
    return mod[kind] as ModelClass | undefined;
  } catch {
    return undefined;
  }
}

type AttributeMap = Array<{ name: string; baseName: string; type: string }>;
const models = k8s as unknown as Record<string, { getAttributeTypeMap?: () => AttributeMap }>;

/**
 * Unknown fields, as `kubectl apply --validate=strict` (the default) refuses them: walks the
 * object along client-node's generated model of the Kubernetes API (attribute maps of every
 * type). kubernetes-models checks types, required fields and formats but lets unknown fields
 * through.
 */
export function unknownFields(obj: Record<string, unknown>): string[] {
  const version = (typeof obj.apiVersion === 'string' ? obj.apiVersion : '').split('/').pop() ?? '';
  const typeName = `${version.charAt(0).toUpperCase()}${version.slice(1)}${String(obj.kind)}`;
  if (!models[typeName]?.getAttributeTypeMap) return [];
  const out: string[] = [];
  walk(obj, typeName, '', out);
  return out;
}

function walk(value: unknown, type: string, at: string, out: string[]): void {
  if (value === null || value === undefined) return;
  const arr = /^Array<(.+)>$/.exec(type);
  if (arr) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, arr[1], `${at}[${i}]`, out));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, map[1], `${at}.${k}`, out);
    return;
  }
  const attrs = models[type]?.getAttributeTypeMap?.();
  if (!attrs || typeof value !== 'object' || Array.isArray(value)) return;
  const byName = new Map(attrs.map((a) => [a.baseName, a.type]));
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const t = byName.get(k);
    if (t === undefined) out.push(`${at ? `${at}.` : ''}${k}: unknown field`);
    else walk(v, t, at ? `${at}.${k}` : k, out);
  }
}

/**
 * Problems of one object against the Kubernetes schemas: its kind must have a schema
 * (kubernetes-models for built-in kinds, @kubernetes-models/keda and
 * @kubernetes-models/prometheus-operator for ScaledObject and ServiceMonitor), validate
 * against it, and carry no unknown field.
 */
export async function validateObject(obj: K8sObject): Promise<string[]> {
  const id = `${obj.kind ?? '?'} ${obj.metadata?.name ?? '?'}`;
  if (!obj.apiVersion || !obj.kind) return [`${id}: apiVersion and kind are required`];
  if (!obj.metadata?.name) return [`${id}: metadata.name is required`];
  const Model = await modelClass(obj.apiVersion, obj.kind);
  if (!Model) return [`${id}: no schema for ${obj.apiVersion} ${obj.kind}`];
  const problems: string[] = [];
  try {
    new Model(obj).validate();
  } catch (e) {
    problems.push(`${id}: ${(e as Error).message.split('\n').join('; ')}`);
  }
  for (const u of unknownFields(obj)) problems.push(`${id}: ${u}`);
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(obj.metadata.name) || obj.metadata.name.length > 253) {
    problems.push(`${id}: metadata.name is not a DNS subdomain name`);
  }
  if (['Service', 'Namespace'].includes(obj.kind) && (obj.metadata.name.length > 63 || obj.metadata.name.includes('.'))) {
    problems.push(`${id}: a ${obj.kind} name must be a DNS label (at most 63 characters, no dots)`);
  }
  return problems;
}
