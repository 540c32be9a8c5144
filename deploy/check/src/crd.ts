import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { crdFile, loadPipelineSchema, parseManifests, renderPipeline, type DiffusionPipeline, type K8sObject } from '@diffmesh/operator';
import { parse } from 'yaml';
import { checkObjects } from './chart.js';
import { validateObject } from './k8s.js';
import type { Section } from './report.js';

/** Every place a structural schema breaks the API server's rules (no $ref, a type everywhere). */
export function structuralProblems(s: Record<string, unknown>, at = ''): string[] {
  const out: string[] = [];
  if ('$ref' in s || 'definitions' in s) out.push(`${at || '/'}: $ref/definitions are not allowed in a CRD schema`);
  const special = s['x-kubernetes-int-or-string'] || s['x-kubernetes-preserve-unknown-fields'];
  if (!s.type && !special) out.push(`${at || '/'}: every schema node needs a type`);
  for (const [k, v] of Object.entries((s.properties as Record<string, Record<string, unknown>>) ?? {}))
    out.push(...structuralProblems(v, `${at}/${k}`));
  for (const k of ['items', 'additionalProperties']) {
    const v = s[k];
    if (v && typeof v === 'object') out.push(...structuralProblems(v as Record<string, unknown>, `${at}/${k}`));
  }
  return out;
}

/**
 * The DiffusionPipeline CRD: valid as a CustomResourceDefinition, structural, its CEL rules all
 * mirrored for offline use; the example resources valid, each invalid one rejected; the
 * operator's objects for each valid example valid against the Kubernetes schemas.
 */
export async function checkCrd(chartDir: string, deployDir: string, helm: string): Promise<Section> {
  const section: Section = { name: 'DiffusionPipeline CRD and examples', problems: [], notes: [], passed: [] };
  const file = crdFile(chartDir);
  const crd = parse(readFileSync(file, 'utf8'), { maxAliasCount: 1000 }) as K8sObject & { spec: any };
  const crdProblems = await validateObject(crd);
  section.problems.push(...crdProblems);
  const openApi = crd.spec.versions[0].schema.openAPIV3Schema as Record<string, unknown>;
  const structural = structuralProblems(openApi);
  section.problems.push(...structural);
  if (!crdProblems.length && !structural.length) section.passed.push('CustomResourceDefinition valid and structural');
  if (!crd.spec.versions[0].subresources?.status) section.problems.push('the CRD has no status subresource');

  let schema;
  try {
    schema = loadPipelineSchema(file);
    section.passed.push('every CEL rule has its offline twin');
  } catch (e) {
    section.problems.push((e as Error).message);
    return section;
  }
  const ex = path.join(deployDir, 'examples');
  for (const f of readdirSync(ex)
    .filter((x) => x.endsWith('.yaml'))
    .sort()) {
    const p = parse(readFileSync(path.join(ex, f), 'utf8')) as DiffusionPipeline;
    const problems = schema.validate(p);
    if (problems.length) {
      section.problems.push(...problems.map((x) => `examples/${f}: ${x.path}: ${x.message}`));
      continue;
    }
    section.passed.push(`examples/${f} is valid`);
    p.metadata = { ...p.metadata, namespace: p.metadata.namespace ?? 'default', uid: '00000000-0000-4000-8000-000000000000' };
    try {
      const { objects } = await renderPipeline(p, { chartDir, helm });
      const r = await checkObjects(objects, deployDir, `operator output for examples/${f}`);
      section.problems.push(...r.problems);
      section.notes.push(...r.notes);
      if (!r.problems.length) section.passed.push(`operator output for examples/${f}: ${objects.length} objects valid`);
    } catch (e) {
      section.problems.push(`examples/${f}: the operator could not render it: ${(e as Error).message}`);
    }
  }
  const bad = path.join(ex, 'invalid');
  const invalid = readdirSync(bad)
    .filter((x) => x.endsWith('.yaml'))
    .sort();
  if (invalid.length < 3) section.problems.push('examples/invalid needs several invalid resources');
  for (const f of invalid) {
    const problems = schema.validate(parse(readFileSync(path.join(bad, f), 'utf8')));
    if (!problems.length) section.problems.push(`examples/invalid/${f} was accepted; it must be rejected`);
    else section.passed.push(`examples/invalid/${f} rejected (${problems[0].path}: ${problems[0].message})`);
  }
  section.notes = [...new Set(section.notes)];
  return section;
}

/** Plain manifests (the operator's own Deployment and RBAC) against the Kubernetes schemas. */
export async function checkManifests(files: string[], deployDir: string): Promise<Section> {
  const section: Section = { name: 'operator manifests', problems: [], notes: [], passed: [] };
  for (const f of files) {
    const docs = parseManifests(readFileSync(f, 'utf8'));
    const rel = path.relative(deployDir, f);
    const before = section.problems.length;
    for (const o of docs) section.problems.push(...(await validateObject(o)).map((p) => `${rel}: ${p}`));
    if (section.problems.length === before) section.passed.push(`${rel}: ${docs.length} objects valid`);
  }
  return section;
}
