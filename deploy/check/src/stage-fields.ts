import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { StageServiceConfigSchema } from '@diffmesh/stage-host';
import type { Section } from './report.js';

/** A JSON schema node, as far as this check reads it. */
interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
}

/** The stage schema's fields as JSON schema (the input side: what a flag or a file gives). */
function stageFields(): Record<string, JsonSchema> {
  return (StageServiceConfigSchema.toJSONSchema({ io: 'input', unrepresentable: 'any' }) as JsonSchema).properties ?? {};
}

/** `integer` ⊂ `number`: the deployment may be stricter than the service, never looser. */
function typeFits(deployed: JsonSchema, service: JsonSchema): boolean {
  const d = deployed.type;
  const s = service.type;
  if (d === undefined || s === undefined) return true;
  return d === s || (d === 'integer' && s === 'number');
}

/**
 * Every property of `where` (a pool of the Helm values, a stage of the CRD) named like a field of
 * the stage services' schema must be that field: same type, array items of the same type, and
 * enum values the service takes. A field renamed or retyped in the schema fails here, not in a
 * cluster.
 */
export function compareWithStageSchema(where: string, properties: Record<string, JsonSchema>): { problems: string[]; checked: string[] } {
  const fields = stageFields();
  const problems: string[] = [];
  const checked: string[] = [];
  for (const [name, deployed] of Object.entries(properties)) {
    const field = fields[name];
    if (!field) continue;
    checked.push(name);
    if (!typeFits(deployed, field)) {
      problems.push(`${where}.${name}: type ${String(deployed.type)}, but the stage schema's ${name} is ${String(field.type)}`);
      continue;
    }
    const items = deployed.items;
    if (items && field.items && !typeFits(items, field.items)) {
      problems.push(`${where}.${name}: items of type ${String(items.type)}, but the stage schema's are ${String(field.items.type)}`);
    }
    const allowed = field.enum ?? field.items?.enum;
    for (const v of deployed.enum ?? items?.enum ?? []) {
      if (allowed && !allowed.includes(v)) problems.push(`${where}.${name}: ${JSON.stringify(v)} is not a value the stage services take`);
    }
  }
  return { problems, checked };
}

/** The pool properties of the chart's values schema, and the stage properties of the DiffusionPipeline CRD. */
export function checkStageFields(chartDir: string): Section {
  const section: Section = { name: 'stage options: Helm values and CRD against the stage schema', problems: [], notes: [], passed: [] };
  const values = JSON.parse(readFileSync(path.join(chartDir, 'values.schema.json'), 'utf8')) as JsonSchema;
  const pools = values.properties?.pools?.additionalProperties;
  const groups: [string, Record<string, JsonSchema> | undefined][] = [
    ['values.stageDefaults', values.properties?.stageDefaults?.properties],
    ['values.pools.*', typeof pools === 'object' ? pools.properties : undefined],
  ];
  const crd = parse(readFileSync(path.join(chartDir, 'files', 'crds', 'diffusionpipelines.diffmesh.io.yaml'), 'utf8')) as {
    spec: { versions: { name: string; schema: { openAPIV3Schema: JsonSchema } }[] };
  };
  for (const v of crd.spec.versions) {
    groups.push([`crd ${v.name} spec.stages[]`, v.schema.openAPIV3Schema.properties?.spec?.properties?.stages?.items?.properties]);
  }
  for (const [where, properties] of groups) {
    if (!properties) {
      section.problems.push(`${where}: not found`);
      continue;
    }
    const r = compareWithStageSchema(where, properties);
    section.problems.push(...r.problems);
    if (r.problems.length === 0) section.passed.push(`${where}: ${r.checked.join(', ')}`);
  }
  return section;
}
