// Static checks of the Grafana material in deploy/grafana: the dashboards load through
// file provisioning, reference their data sources only through template variables, agree
// with the provisioned data source uids, and query only the metrics deploy/README.md lists.
// No Grafana runs here; these are the rules Grafana's provisioning and panels rely on.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GRAFANA = `${ROOT}deploy/grafana/`;
const DASHBOARDS_DIR = `${GRAFANA}dashboards/`;
const README = readFileSync(`${ROOT}deploy/README.md`, 'utf8');
const TENSOR_METRICS_SRC = readFileSync(`${ROOT}tensor-svc/src/metrics.ts`, 'utf8');

/** Environment variables the provisioning files may read. */
const PROVISIONING_ENV = ['PROMETHEUS_URL', 'TEMPO_URL', 'LOKI_URL'];
/** Panel types that carry no query. */
const QUERYLESS_PANELS = new Set(['row', 'text']);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- dashboard JSON of any shape, walked by key
type Obj = Record<string, any>;

interface Dashboard {
  file: string;
  json: Obj;
}

interface Panel {
  dashboard: string;
  panel: Obj;
}

const dashboardFiles = readdirSync(DASHBOARDS_DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();
const dashboards: Dashboard[] = dashboardFiles.map((file) => ({
  file,
  json: JSON.parse(readFileSync(`${DASHBOARDS_DIR}${file}`, 'utf8')) as Obj,
}));

function variables(d: Obj): Obj[] {
  return (d.templating?.list ?? []) as Obj[];
}

/** Data source variables: name → { type (plugin id), default uid }. */
function datasourceVariables(d: Obj): Map<string, { type: string; uid: string }> {
  const out = new Map<string, { type: string; uid: string }>();
  for (const v of variables(d)) {
    if (v.type === 'datasource') out.set(v.name, { type: v.query, uid: v.current?.value });
  }
  return out;
}

/** Every panel, including those nested in collapsed rows. */
function allPanels(d: Obj): Obj[] {
  const out: Obj[] = [];
  for (const p of (d.panels ?? []) as Obj[]) {
    out.push(p);
    if (p.type === 'row') out.push(...((p.panels ?? []) as Obj[]));
  }
  return out;
}

const panels: Panel[] = dashboards.flatMap((d) => allPanels(d.json).map((panel) => ({ dashboard: d.file, panel })));

/** The variable a datasource reference names (`${name}`), or undefined for anything else. */
function datasourceRefVariable(ref: unknown): string | undefined {
  const uid = typeof ref === 'string' ? ref : typeof ref === 'object' && ref !== null ? (ref as Obj).uid : undefined;
  const m = typeof uid === 'string' ? (/^\$\{(\w+)\}$/.exec(uid) ?? /^\$(\w+)$/.exec(uid)) : null;
  return m?.[1];
}

/** Every value reachable under a `datasource`/`datasourceUid` key, with its JSON path. */
function datasourceRefs(node: unknown, path = '$'): { path: string; ref: unknown }[] {
  if (Array.isArray(node)) return node.flatMap((v, i) => datasourceRefs(v, `${path}[${i}]`));
  if (typeof node !== 'object' || node === null) return [];
  return Object.entries(node as Obj).flatMap(([k, v]) => {
    const here = k === 'datasource' || k === 'datasourceUid' ? [{ path: `${path}.${k}`, ref: v }] : [];
    return [...here, ...datasourceRefs(v, `${path}.${k}`)];
  });
}

function strings(node: unknown): string[] {
  if (typeof node === 'string') return [node];
  if (Array.isArray(node)) return node.flatMap(strings);
  if (typeof node === 'object' && node !== null) return Object.values(node as Obj).flatMap(strings);
  return [];
}

/** Names of the template variables a string refers to (`$name`, `${name}`, `${name:format}`), Grafana's `__` built-ins excluded. */
function variableRefs(s: string): string[] {
  const out: string[] = [];
  for (const m of s.matchAll(/\$\{(\w+)(?:[.:][^}]*)?\}|\$(\w+)/g)) {
    const name = m[1] ?? m[2];
    if (!name.startsWith('__')) out.push(name);
  }
  return out;
}

const PROMQL_KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/** Metric names a PromQL expression (or a `label_values(...)` variable query) reads. */
function promqlMetricNames(expr: string): string[] {
  const lv = /^\s*label_values\(\s*(?:(.+),)?\s*\w+\s*\)\s*$/.exec(expr);
  if (lv) return lv[1] ? promqlMetricNames(lv[1]) : [];
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b/gi, ' ');
  const out: string[] = [];
  for (const m of s.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (PROMQL_KEYWORDS.has(m[0].toLowerCase())) continue;
    if (
      s
        .slice(m.index + m[0].length)
        .trimStart()
        .startsWith('(')
    )
      continue; // a function
    out.push(m[0]);
  }
  return out;
}

/** Every PromQL string of a dashboard: Prometheus targets and Prometheus query variables. */
function promqlExpressions(d: Obj): string[] {
  const dsVars = datasourceVariables(d);
  const isProm = (ref: unknown): boolean => dsVars.get(datasourceRefVariable(ref) ?? '')?.type === 'prometheus';
  const exprs: string[] = [];
  for (const p of allPanels(d)) for (const t of (p.targets ?? []) as Obj[]) if (isProm(t.datasource ?? p.datasource)) exprs.push(t.expr);
  for (const v of variables(d)) {
    if (v.type === 'query' && isProm(v.datasource)) exprs.push(typeof v.query === 'string' ? v.query : v.query.query);
  }
  return exprs;
}

/** The metric names listed in deploy/README.md between the grafana-metrics markers. */
function documentedMetrics(): Set<string> {
  const m = /<!-- grafana-metrics:begin -->([\s\S]*?)<!-- grafana-metrics:end -->/.exec(README);
  if (!m) throw new Error('deploy/README.md: no <!-- grafana-metrics:begin --> … <!-- grafana-metrics:end --> section');
  return new Set([...m[1].matchAll(/`(diffmesh_[a-z0-9_]+)(?:\{[^`]*\})?`/g)].map((x) => x[1]));
}

/** Grafana's expansion of environment variables in a provisioning value (`$$` is a literal `$`). */
function expandEnv(value: string, env: Record<string, string>): string {
  return value.replace(/\$\$|\$\{(\w+)\}|\$(\w+)/g, (all, a: string | undefined, b: string | undefined) =>
    all === '$$' ? '$' : (env[a ?? b ?? ''] ?? ''),
  );
}

const datasourcesYaml = parse(readFileSync(`${GRAFANA}provisioning/datasources/diffmesh.yaml`, 'utf8')) as Obj;
const dashboardsYaml = parse(readFileSync(`${GRAFANA}provisioning/dashboards/diffmesh.yaml`, 'utf8')) as Obj;
const provisioned = (datasourcesYaml.datasources ?? []) as Obj[];
const provisionedByType = (type: string): Obj => {
  const found = provisioned.filter((d) => d.type === type);
  expect(found, `one provisioned ${type} data source`).toHaveLength(1);
  return found[0];
};

describe('Grafana dashboards (deploy/grafana/dashboards)', () => {
  it('holds the mesh overview and request tracing dashboards', () => {
    expect(dashboardFiles).toEqual(expect.arrayContaining(['mesh-overview.json', 'request-tracing.json']));
  });

  it('each has a title, a unique uid of at most 40 characters, schemaVersion 39+ and panels', () => {
    const uids = new Set<string>();
    for (const { file, json } of dashboards) {
      expect(typeof json.title === 'string' && json.title.length > 0, `${file}: title`).toBe(true);
      expect(json.uid, `${file}: uid`).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
      expect(uids.has(json.uid), `${file}: uid ${json.uid} is unique`).toBe(false);
      uids.add(json.uid);
      expect(json.schemaVersion, `${file}: schemaVersion`).toBeGreaterThanOrEqual(39);
      expect(Array.isArray(json.panels) && json.panels.length > 0, `${file}: panels`).toBe(true);
      expect(Array.isArray(json.templating?.list), `${file}: templating.list`).toBe(true);
      expect(json.id ?? null, `${file}: no instance-specific id`).toBeNull();
    }
  });

  it('panels have unique integer ids, a type and a grid position inside 24 columns, without overlapping', () => {
    for (const { file, json } of dashboards) {
      const ids = new Set<number>();
      const placed: { id: number; x: number; y: number; w: number; h: number }[] = [];
      for (const p of allPanels(json)) {
        const where = `${file}: panel ${JSON.stringify(p.title ?? p.id)}`;
        expect(Number.isInteger(p.id), `${where}: integer id`).toBe(true);
        expect(ids.has(p.id), `${where}: id ${p.id} is unique`).toBe(false);
        ids.add(p.id);
        expect(typeof p.type === 'string' && p.type.length > 0, `${where}: type`).toBe(true);
        const g = p.gridPos as Obj | undefined;
        expect(g, `${where}: gridPos`).toBeDefined();
        for (const k of ['x', 'y', 'w', 'h']) expect(Number.isInteger(g?.[k]), `${where}: gridPos.${k} is an integer`).toBe(true);
        expect(
          g!.x >= 0 && g!.y >= 0 && g!.w >= 1 && g!.h >= 1 && g!.x + g!.w <= 24,
          `${where}: gridPos ${JSON.stringify(g)} inside 24 columns`,
        ).toBe(true);
      }
      for (const p of json.panels as Obj[]) {
        const g = p.gridPos as Obj;
        for (const o of placed) {
          const overlap = g.x < o.x + o.w && o.x < g.x + g.w && g.y < o.y + o.h && o.y < g.y + g.h;
          expect(overlap, `${file}: panels ${p.id} and ${o.id} overlap`).toBe(false);
        }
        placed.push({ id: p.id, x: g.x, y: g.y, w: g.w, h: g.h });
      }
    }
  });

  it('declares a data source variable for every data source it uses, with a default uid', () => {
    for (const { file, json } of dashboards) {
      const dsVars = datasourceVariables(json);
      expect(dsVars.size, `${file}: data source variables`).toBeGreaterThan(0);
      for (const [name, { type, uid }] of dsVars) {
        expect(type, `${file}: variable ${name} names a data source plugin`).toMatch(/^(prometheus|tempo|loki)$/);
        expect(typeof uid === 'string' && uid.length > 0 && !uid.startsWith('$'), `${file}: variable ${name} defaults to a uid`).toBe(true);
      }
    }
  });

  it('queries have a refId and a data source that names a declared data source variable of the right type', () => {
    for (const { dashboard, panel: p } of panels) {
      const where = `${dashboard}: panel ${JSON.stringify(p.title ?? p.id)}`;
      if (QUERYLESS_PANELS.has(p.type)) {
        expect(p.targets ?? [], `${where}: a ${p.type} panel has no queries`).toEqual([]);
        continue;
      }
      const dsVars = datasourceVariables(dashboards.find((d) => d.file === dashboard)!.json);
      const targets = (p.targets ?? []) as Obj[];
      expect(targets.length, `${where}: targets`).toBeGreaterThan(0);
      const refIds = targets.map((t) => t.refId);
      expect(new Set(refIds).size, `${where}: unique refIds`).toBe(refIds.length);
      for (const t of targets) {
        expect(typeof t.refId === 'string' && t.refId.length > 0, `${where}: refId`).toBe(true);
        for (const ref of [t.datasource, p.datasource]) {
          const name = datasourceRefVariable(ref);
          expect(name && dsVars.has(name), `${where}: data source ${JSON.stringify(ref)} names a declared variable`).toBe(true);
          expect((ref as Obj).type, `${where}: data source type matches variable ${name}`).toBe(dsVars.get(name!)!.type);
        }
        const type = dsVars.get(datasourceRefVariable(t.datasource)!)!.type;
        const text = type === 'tempo' ? t.query : t.expr;
        expect(typeof text === 'string' && text.trim().length > 0, `${where}: ${t.refId} has a query`).toBe(true);
      }
    }
  });

  it('hard-codes no data source uid anywhere: every reference is a ${variable}', () => {
    for (const { file, json } of dashboards) {
      const dsVars = datasourceVariables(json);
      for (const { path, ref } of datasourceRefs({ panels: json.panels, templating: json.templating, annotations: json.annotations })) {
        const name = datasourceRefVariable(ref);
        expect(name !== undefined && dsVars.has(name), `${file} ${path}: ${JSON.stringify(ref)} is a declared variable`).toBe(true);
      }
    }
  });

  it('uses only template variables it declares', () => {
    for (const { file, json } of dashboards) {
      const declared = new Set(variables(json).map((v) => v.name as string));
      const used = new Set(strings(json.panels).flatMap(variableRefs));
      for (const v of variables(json))
        if (v.type === 'query') for (const s of strings(v.query)) for (const r of variableRefs(s)) used.add(r);
      for (const name of used) expect(declared.has(name), `${file}: variable $${name} is declared`).toBe(true);
    }
  });

  it("request tracing: a TraceQL search by service and request id, a trace view and the trace's logs by traceId", () => {
    const d = dashboards.find((x) => x.file === 'request-tracing.json')!.json;
    const names = variables(d).map((v) => v.name);
    expect(names).toEqual(expect.arrayContaining(['tempo', 'loki', 'service', 'request_id', 'traceId']));
    const ps = allPanels(d);
    const search = ps.find((p) => p.type === 'table' && (p.targets as Obj[]).some((t) => t.queryType === 'traceql'));
    expect(search?.targets[0].query).toMatch(/resource\.service\.name\s*=~\s*"\$service"/);
    expect(search?.targets[0].query).toContain('diffmesh.request_id');
    const trace = ps.find((p) => p.type === 'traces');
    expect(trace?.targets[0].query).toBe('$traceId');
    const logs = ps.find((p) => p.type === 'logs');
    expect(logs?.datasource.uid).toBe('${loki}');
    expect(logs?.targets[0].expr).toMatch(/\| json \| traceId = "\$traceId"/);
  });
});

describe('Grafana provisioning (deploy/grafana/provisioning)', () => {
  it('data sources: Prometheus, Tempo and Loki with uids and URLs from the environment', () => {
    expect(datasourcesYaml.apiVersion).toBe(1);
    const uids = provisioned.map((d) => d.uid);
    expect(new Set(uids).size).toBe(uids.length);
    for (const ds of provisioned) {
      expect(typeof ds.name === 'string' && ds.name.length > 0, 'name').toBe(true);
      expect(ds.uid, `${ds.name}: uid`).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
      expect(ds.url, `${ds.name}: url from the environment`).toMatch(/^\$\{?[A-Z_]+\}?$/);
    }
    expect(provisioned.map((d) => d.type).sort()).toEqual(['loki', 'prometheus', 'tempo']);
  });

  it("data source uids equal the dashboards' data source variable defaults", () => {
    const fromDashboards = new Set<string>();
    for (const { json } of dashboards) for (const { type, uid } of datasourceVariables(json).values()) fromDashboards.add(`${type}:${uid}`);
    const fromProvisioning = new Set(provisioned.map((d) => `${d.type}:${d.uid}`));
    expect([...fromDashboards].sort()).toEqual([...fromProvisioning].sort());
  });

  it('uses no `$` but the documented environment variables and `$$` escapes', () => {
    for (const s of strings(datasourcesYaml)) {
      for (const m of s.replace(/\$\$/g, '').matchAll(/\$(\{?)(\w*)/g)) {
        expect(PROVISIONING_ENV, `${JSON.stringify(s)}: $${m[1]}${m[2]} is a known environment variable`).toContain(m[2]);
      }
    }
    for (const name of PROVISIONING_ENV) expect(README, `deploy/README.md documents ${name}`).toContain(name);
  });

  it('Tempo links spans to Loki logs by trace id', () => {
    const tempo = provisionedByType('tempo');
    const loki = provisionedByType('loki');
    const t2l = tempo.jsonData?.tracesToLogsV2 as Obj;
    expect(t2l?.datasourceUid).toBe(loki.uid);
    expect(t2l?.filterByTraceID).toBe(true);
  });

  it("Loki links a diffmesh JSON log line's traceId to Tempo", () => {
    const tempo = provisionedByType('tempo');
    const loki = provisionedByType('loki');
    const fields = (loki.jsonData?.derivedFields ?? []) as Obj[];
    const link = fields.find((f) => f.datasourceUid === tempo.uid);
    expect(link, 'a derived field linking to Tempo').toBeDefined();
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const line = JSON.stringify({
      level: 'info',
      time: '2025-01-01T00:00:00.000Z',
      name: 'scheduler',
      reqId: 'r-1',
      traceId,
      spanId: '00f067aa0ba902b7',
      msg: 'stage finished',
    });
    const m = new RegExp(link!.matcherRegex as string).exec(line);
    expect(m?.[1]).toBe(traceId);
    expect(expandEnv(link!.url as string, {})).toBe('${__value.raw}');
  });

  it('the dashboard provider reads the folder that deploy/README.md mounts deploy/grafana/dashboards on', () => {
    expect(dashboardsYaml.apiVersion).toBe(1);
    const providers = (dashboardsYaml.providers ?? []) as Obj[];
    expect(providers).toHaveLength(1);
    const p = providers[0];
    expect(p.type).toBe('file');
    const path = p.options?.path as string;
    expect(path).toMatch(/^\//);
    const mounts = [...README.matchAll(/-v\s+"?([^\s:"]+):([^\s:"]+)"?/g)].map((m) => ({ from: m[1], to: m[2] }));
    const dashMount = mounts.find((m) => /deploy\/grafana\/dashboards\/?$/.test(m.from));
    expect(dashMount, 'deploy/README.md mounts deploy/grafana/dashboards').toBeDefined();
    expect(dashMount!.to.replace(/\/$/, '')).toBe(path.replace(/\/$/, ''));
    const provMount = mounts.find((m) => /deploy\/grafana\/provisioning\/?$/.test(m.from));
    expect(provMount?.to.replace(/\/$/, '')).toBe('/etc/grafana/provisioning');
    expect(existsSync(DASHBOARDS_DIR)).toBe(true);
  });
});

describe('metrics the dashboards query', () => {
  const used = new Set(dashboards.flatMap((d) => promqlExpressions(d.json).flatMap(promqlMetricNames)));

  it('finds the metric names in PromQL', () => {
    expect(
      promqlMetricNames('sum by (pool) (rate(diffmesh_x_total{pool=~"$pool"}[$__rate_interval])) / clamp_min(diffmesh_y, 1e-9)'),
    ).toEqual(['diffmesh_x_total', 'diffmesh_y']);
    expect(promqlMetricNames('label_values(diffmesh_queue_size, pool)')).toEqual(['diffmesh_queue_size']);
    expect(promqlMetricNames('count(diffmesh_breaker_state == 2) or vector(0)')).toEqual(['diffmesh_breaker_state']);
    expect(used.size).toBeGreaterThan(10);
  });

  it('are all diffmesh_ metrics, and histogram quantiles keep the le label', () => {
    for (const name of used) expect(name).toMatch(/^diffmesh_[a-z0-9_]+$/);
    for (const { json } of dashboards) {
      for (const e of promqlExpressions(json).filter((x) => x.includes('histogram_quantile'))) {
        expect(e, 'histogram_quantile over _bucket series summed by le').toMatch(/_bucket/);
        expect(e).toMatch(/by \(le\b/);
      }
    }
  });

  it('agree with the list in deploy/README.md', () => {
    expect([...used].sort()).toEqual([...documentedMetrics()].sort());
  });

  it('the diffmesh_tensor_* ones are exported by tensor-svc today', () => {
    const tensor = [...used].filter((n) => n.startsWith('diffmesh_tensor_'));
    expect(tensor.length).toBeGreaterThan(0);
    for (const name of tensor) expect(TENSOR_METRICS_SRC, `tensor-svc/src/metrics.ts exports ${name}`).toContain(`'${name}'`);
  });
});
