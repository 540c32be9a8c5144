import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { DCLinter } from 'dclint';
import { parse } from 'yaml';
import { checkServiceArgs, loadPending } from './flags.js';
import type { Section } from './report.js';

/** dclint rules about ordering only: style, not correctness. */
const STYLE_RULES = [
  'services-alphabetical-order',
  'service-keys-order',
  'top-level-properties-order',
  'service-dependencies-alphabetical-order',
];

/** `${VAR:-default}` → default, `${VAR}` → "" (what compose uses with an empty environment). */
export function interpolate(s: string): string {
  return s.replace(/\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}/g, (_m, _v, d: string | undefined) => d ?? '');
}

/**
 * The compose stack: the Compose Specification schema and dclint's rules (no Docker engine
 * needed), then what a schema cannot see: diffmesh commands and flags the services accept,
 * depends_on targets, bind-mounted files that exist, pinned images, Prometheus targets that
 * are services of the stack, Grafana mounts where the provisioning expects them.
 */
export function checkCompose(deployDir: string): Section {
  const section: Section = { name: 'compose stack (deploy/compose)', problems: [], notes: [], passed: [] };
  const dir = path.join(deployDir, 'compose');
  const file = path.join(dir, 'compose.yaml');
  const linter = new DCLinter({ rules: Object.fromEntries(STYLE_RULES.map((r) => [r, 0])), quiet: false, debug: false, exclude: [] });
  const [result] = linter.lintFiles([file], false);
  const lint = (result?.messages ?? []).map(
    (m: { line: number; rule: string; message: string }) => `compose.yaml:${m.line}: ${m.rule}: ${m.message}`,
  );
  section.problems.push(...lint);
  if (!lint.length) section.passed.push('Compose Specification schema and dclint rules');

  const compose = parse(readFileSync(file, 'utf8'), { merge: true }) as {
    services: Record<string, any>;
    volumes?: Record<string, unknown>;
  };
  const services = compose.services;
  const pending = loadPending(deployDir);
  const before = section.problems.length;
  for (const [name, s] of Object.entries(services)) {
    if (!s.image) section.problems.push(`service ${name}: no image`);
    else if (!/:[^/]+$/.test(interpolate(s.image)) || interpolate(s.image).endsWith(':latest'))
      section.problems.push(`service ${name}: image ${s.image} is not pinned to a tag`);
    const deps = Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {});
    for (const d of deps) if (!services[d]) section.problems.push(`service ${name}: depends_on ${d}, which is not a service`);
    if (typeof s.ipc === 'string' && s.ipc.startsWith('service:') && !services[s.ipc.slice(8)])
      section.problems.push(`service ${name}: ipc ${s.ipc} names no service`);
    for (const v of s.volumes ?? []) {
      const src = String(typeof v === 'string' ? v.split(':')[0] : v.source);
      if (src.startsWith('.') || src.startsWith('/')) {
        if (!existsSync(path.resolve(dir, src))) section.problems.push(`service ${name}: bind mount ${src} does not exist`);
      } else if (!compose.volumes || !(src in compose.volumes)) section.problems.push(`service ${name}: volume ${src} is not declared`);
    }
    if (s.build) {
      const ctx = path.resolve(dir, s.build.context ?? '.');
      if (!existsSync(path.join(ctx, s.build.dockerfile ?? 'Dockerfile')))
        section.problems.push(`service ${name}: build file ${s.build.dockerfile} not found in ${s.build.context}`);
    }
    const cmd: string[] = Array.isArray(s.command) ? s.command.map((c: string) => interpolate(String(c))) : [];
    const env = Object.keys(s.environment ?? {});
    const r = checkServiceArgs(`service ${name}`, cmd, env, pending);
    section.problems.push(...r.problems);
    section.notes.push(...r.notes);
    for (const [k, v] of Object.entries(s.environment ?? {})) {
      if (k === 'OTEL_EXPORTER_OTLP_ENDPOINT') {
        const host = new URL(String(v)).hostname;
        if (!services[host]) section.problems.push(`service ${name}: traces go to ${host}, which is not a service`);
      }
    }
  }
  // Prometheus scrapes services of this stack.
  const prom = parse(readFileSync(path.join(dir, 'prometheus.yml'), 'utf8')) as {
    scrape_configs: Array<{ static_configs: Array<{ targets: string[] }> }>;
  };
  const diffmesh = Object.entries(services)
    .filter(([, s]) => String(s.image ?? '').includes('DIFFMESH_IMAGE'))
    .map(([n]) => n);
  const scraped = new Set(prom.scrape_configs.flatMap((c) => c.static_configs.flatMap((sc) => sc.targets.map((t) => t.split(':')[0]))));
  for (const t of scraped) if (!services[t]) section.problems.push(`prometheus.yml: target ${t} is not a service`);
  for (const n of diffmesh) if (!scraped.has(n)) section.problems.push(`prometheus.yml: diffmesh service ${n} is not scraped`);
  const tempo = parse(readFileSync(path.join(dir, 'tempo.yaml'), 'utf8')) as { distributor?: { receivers?: { otlp?: unknown } } };
  if (!tempo.distributor?.receivers?.otlp) section.problems.push('tempo.yaml: no OTLP receiver');
  // Grafana gets the provisioning and dashboards where the provisioning files expect them.
  const g = services.grafana;
  const mounts = (g?.volumes ?? []).map((v: string) => v.split(':'));
  const provider = parse(readFileSync(path.join(deployDir, 'grafana', 'provisioning', 'dashboards', 'diffmesh.yaml'), 'utf8')) as {
    providers: Array<{ options: { path: string } }>;
  };
  for (const want of ['/etc/grafana/provisioning', provider.providers[0].options.path]) {
    if (!mounts.some((m: string[]) => m[1] === want)) section.problems.push(`grafana: nothing mounted on ${want}`);
  }
  for (const env of ['PROMETHEUS_URL', 'TEMPO_URL', 'LOKI_URL'])
    if (!g?.environment?.[env]) section.problems.push(`grafana: ${env} is not set (the data source provisioning reads it)`);
  if (section.problems.length === before)
    section.passed.push(
      `${Object.keys(services).length} services: commands, flags, mounts, dependencies, scrape targets, Grafana provisioning`,
    );
  section.notes = [...new Set(section.notes)];
  return section;
}

/** Grafana dashboards and provisioning: JSON/YAML parse, unique uids, data source uids agree. */
export function checkGrafana(deployDir: string): Section {
  const section: Section = { name: 'Grafana (deploy/grafana)', problems: [], notes: [], passed: [] };
  const dir = path.join(deployDir, 'grafana');
  const ds = parse(readFileSync(path.join(dir, 'provisioning', 'datasources', 'diffmesh.yaml'), 'utf8')) as {
    datasources: Array<{ uid: string; type: string }>;
  };
  const dsUids = new Set(ds.datasources.map((d) => d.uid));
  const uids = new Set<string>();
  for (const f of readdirSync(path.join(dir, 'dashboards')).filter((x) => x.endsWith('.json'))) {
    let d: any;
    try {
      d = JSON.parse(readFileSync(path.join(dir, 'dashboards', f), 'utf8'));
    } catch (e) {
      section.problems.push(`${f}: not JSON: ${(e as Error).message}`);
      continue;
    }
    const before = section.problems.length;
    if (!d.uid || !d.title || !Array.isArray(d.panels)) section.problems.push(`${f}: needs uid, title and panels`);
    if (uids.has(d.uid)) section.problems.push(`${f}: uid ${d.uid} used twice`);
    uids.add(d.uid);
    for (const v of d.templating?.list ?? []) {
      if (v.type === 'datasource' && v.current?.value && !dsUids.has(v.current.value))
        section.problems.push(`${f}: variable ${v.name} defaults to uid ${v.current.value}, which no provisioned data source has`);
    }
    const ids = (d.panels as any[]).map((p) => p.id);
    if (new Set(ids).size !== ids.length) section.problems.push(`${f}: duplicate panel ids`);
    if (section.problems.length === before) section.passed.push(`${f}: ${d.panels.length} panels, data sources provisioned`);
  }
  return section;
}
