import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { DCLinter } from 'dclint';
import { parse } from 'yaml';
import { checkServiceArgs, loadPending, type Pending } from './flags.js';
import type { Section } from './report.js';

/** dclint rules about ordering only: style, not correctness. */
const STYLE_RULES = [
  'services-alphabetical-order',
  'service-keys-order',
  'top-level-properties-order',
  'service-dependencies-alphabetical-order',
];

/** dclint rules the stack breaks on purpose: Compose v1 (docker-compose 1.29) refuses a top-level `name:`. */
const REFUSED_RULES = ['require-project-name-field'];

/** Variables the image's entrypoint reads itself (deploy/docker/entrypoint.mjs), not a service's config. */
const ENTRYPOINT_ENV = new Set(['DIFFMESH_AUTH', 'DIFFMESH_GATEWAY_API_KEYS_FILE']);

/** `${VAR:-default}` → default, `${VAR}` → "" (what compose uses with an empty environment). */
export function interpolate(s: string): string {
  return s.replace(/\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}/g, (_m, _v, d: string | undefined) => d ?? '');
}

/** What the checks read of a compose file. */
export interface ComposeFile {
  name?: string;
  services: Record<string, any>;
  volumes?: Record<string, any>;
  networks?: Record<string, any>;
}

/** The Compose Specification schema and dclint's rules on one file, as `<file>:<line>: …` lines. */
export function lintCompose(file: string): string[] {
  const linter = new DCLinter({
    rules: Object.fromEntries([...STYLE_RULES, ...REFUSED_RULES].map((r) => [r, 0])),
    quiet: false,
    debug: false,
    exclude: [],
  });
  const [result] = linter.lintFiles([file], false);
  return (result?.messages ?? []).map(
    (m: { line: number; rule: string; message: string }) => `${path.basename(file)}:${m.line}: ${m.rule}: ${m.message}`,
  );
}

/**
 * What every service of a compose file must get right: a pinned image, depends_on and ipc
 * naming services of the file, mounts that exist or are declared, a build file that exists,
 * diffmesh commands with flags and variables the service has, traces sent to a service.
 */
export function checkServices(section: Section, compose: ComposeFile, dir: string, pending: Pending): void {
  const services = compose.services;
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
    const env = Object.keys(s.environment ?? {}).filter((k) => !ENTRYPOINT_ENV.has(k));
    const r = checkServiceArgs(`service ${name}`, cmd, env, pending);
    section.problems.push(...r.problems);
    section.notes.push(...r.notes);
    for (const [k, v] of Object.entries(s.environment ?? {})) {
      if (k === 'OTEL_EXPORTER_OTLP_ENDPOINT' && interpolate(String(v))) {
        const host = new URL(interpolate(String(v))).hostname;
        if (!services[host]) section.problems.push(`service ${name}: traces go to ${host}, which is not a service`);
      }
    }
  }
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
  section.problems.push(...lintCompose(file));
  if (!section.problems.length) section.passed.push('Compose Specification schema and dclint rules');

  const compose = parse(readFileSync(file, 'utf8'), { merge: true }) as ComposeFile;
  const services = compose.services;
  if (compose.name !== undefined)
    section.problems.push('compose.yaml: top-level `name:` (Compose v1, docker-compose 1.29, refuses the file)');
  section.problems.push(...authProblems(services));
  const before = section.problems.length;
  checkServices(section, compose, dir, loadPending(deployDir));
  // Prometheus scrapes services of this stack.
  const prom = parse(readFileSync(path.join(dir, 'prometheus.yml'), 'utf8')) as {
    scrape_configs: Array<{ static_configs: Array<{ targets: string[] }> }>;
  };
  const diffmesh = Object.entries(services)
    .filter(([, s]) => String(s.image ?? '').includes('DIFFMESH_IMAGE') && s.restart !== 'no')
    .map(([n]) => n);
  const scraped = new Set(prom.scrape_configs.flatMap((c) => c.static_configs.flatMap((sc) => sc.targets.map((t) => t.split(':')[0]))));
  for (const t of scraped) if (!services[t]) section.problems.push(`prometheus.yml: target ${t} is not a service`);
  for (const n of diffmesh) if (!scraped.has(n)) section.problems.push(`prometheus.yml: diffmesh service ${n} is not scraped`);
  section.problems.push(...promtool(path.join(dir, 'prometheus.yml'), section));
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

/** The services whose command is `credentials` (the one-shot that writes the mesh's credentials). */
const isCredentials = (s: any) => Array.isArray(s.command) && s.command[0] === 'credentials';

/**
 * Authentication on by default: a credentials service; nats reading its config; every
 * diffmesh gRPC server with its certificate, client certificates required and NATS
 * credentials and NATS TLS files; the gateway with NATS credentials, NATS TLS and API keys; images that cannot be built
 * here (Grafana, Tempo, Prometheus) only in a profile.
 */
function authProblems(services: Record<string, any>): string[] {
  const out: string[] = [];
  const creds = Object.entries(services).find(([, s]) => isCredentials(s));
  if (!creds) return ['compose.yaml: no credentials service (command `credentials`): the stack would be open'];
  for (const [name, s] of Object.entries(services)) {
    if (isCredentials(s)) continue;
    const diffmesh = String(s.image ?? '').includes('DIFFMESH_IMAGE');
    if (!diffmesh) {
      if (name === 'nats' && !JSON.stringify(s.command ?? []).includes('/credentials/'))
        out.push("service nats: not started with the credentials service's config (it would admit anyone)");
      if (!diffmesh && !s.profiles && !/nats/.test(String(s.image))) out.push(`service ${name}: image ${s.image} outside a profile`);
      continue;
    }
    if (!(s.depends_on ?? {})[creds[0]]) out.push(`service ${name}: does not wait for ${creds[0]}`);
    out.push(...securityProblems(name, s));
  }
  return out;
}

/**
 * A diffmesh service of the mesh: NATS credentials, a TLS certificate, client certificates
 * required of callers (the gateway: API keys on its HTTP instead).
 */
export function securityProblems(name: string, s: any): string[] {
  const out: string[] = [];
  const env: Record<string, string> = s.environment ?? {};
  const keys = Object.keys(env);
  const has = (suffix: string) => keys.some((k) => k.endsWith(suffix) && String(env[k]) !== '');
  if (!has('_NATS_CREDENTIALS')) out.push(`service ${name}: no NATS credentials`);
  if (!has('_TLS_CERT') || !has('_TLS_CA')) out.push(`service ${name}: no TLS certificate`);
  if (!has('_NATS_TLS_CA') || !has('_NATS_TLS_CERT') || !has('_NATS_TLS_KEY'))
    out.push(`service ${name}: NATS without TLS (its queued prompts and registrations would cross the network in plain text)`);
  if (s.command?.[0] === 'gateway') {
    if (!has('_API_KEYS') && !has('_API_KEYS_FILE')) out.push(`service ${name}: no API keys (its HTTP would be open)`);
  } else if (!keys.some((k) => k.endsWith('_TLS_REQUIRE_CLIENT_CERT') && String(env[k]) === 'true'))
    out.push(`service ${name}: does not require client certificates`);
  return out;
}

/** `promtool check config` on the Prometheus file, when Debian's promtool is installed. */
function promtool(file: string, section: Section): string[] {
  try {
    execFileSync('promtool', ['check', 'config', '--syntax-only', file], { stdio: 'pipe', timeout: 30_000 });
    section.passed.push('prometheus.yml: promtool check config');
    return [];
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: Buffer; stdout?: Buffer };
    if (err.code === 'ENOENT') {
      section.notes.push('promtool not installed (apt-get install prometheus): prometheus.yml checked as YAML only');
      return [];
    }
    return [`prometheus.yml: promtool: ${String(err.stdout ?? '')}${String(err.stderr ?? '')}`.trim()];
  }
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
