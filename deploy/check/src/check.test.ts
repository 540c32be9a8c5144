// deploy:check must fail when something is broken: each test breaks one thing in a temporary
// copy and shows the check names it. The untouched copy passes.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { helmBinary } from '@diffmesh/operator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkChart } from './chart.js';
import { checkCompose } from './compose.js';
import { checkComposeNode } from './compose-node.js';
import { checkDockerfile } from './dockerfile.js';
import { checkServiceArgs, loadPending } from './flags.js';
import { validateObject } from './k8s.js';
import { DEPLOY_DIR } from './run.js';

const CHART = path.join(DEPLOY_DIR, 'helm', 'diffmesh');
let helm: string;
let tmp: string;

beforeAll(() => {
  helm = helmBinary();
  tmp = mkdtempSync(path.join(tmpdir(), 'diffmesh-deploy-check-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the chart with `file` edited by `edit`. */
function brokenChart(name: string, file: string, edit: (s: string) => string): string {
  const dir = path.join(tmp, name);
  cpSync(CHART, dir, { recursive: true });
  const p = path.join(dir, file);
  const before = readFileSync(p, 'utf8');
  const after = edit(before);
  expect(after, `the edit of ${file} changed nothing`).not.toBe(before);
  writeFileSync(p, after);
  return dir;
}

describe('the Helm chart check', () => {
  it('passes on an untouched copy', async () => {
    const dir = path.join(tmp, 'intact');
    cpSync(CHART, dir, { recursive: true });
    const s = await checkChart(dir, DEPLOY_DIR, helm);
    expect(s.problems).toEqual([]);
    expect(s.passed.join('\n')).toMatch(/default values: \d+ objects rendered and valid/);
  });

  it('fails on a misspelt field in a template (unknown to the Kubernetes schema)', async () => {
    const dir = brokenChart('unknown-field', 'templates/scheduler.yaml', (s) =>
      s.replace('containerPort: {{ $s.port }}', 'containerPorts: {{ $s.port }}'),
    );
    const s = await checkChart(dir, DEPLOY_DIR, helm);
    expect(s.problems.join('\n')).toMatch(
      /Deployment check-diffmesh-scheduler: spec\.template\.spec\.containers\[0\]\.ports\[0\]\.containerPorts: unknown field/,
    );
  });

  it('fails on a wrong type (a string where Kubernetes wants an integer)', async () => {
    const dir = brokenChart('wrong-type', 'templates/tensor.yaml', (s) => s.replace('failureThreshold: 30', 'failureThreshold: "thirty"'));
    const s = await checkChart(dir, DEPLOY_DIR, helm);
    expect(s.problems.join('\n')).toMatch(/DaemonSet check-diffmesh-tensor: .*failureThreshold must be integer/);
  });

  it('fails on a template that does not render', async () => {
    const dir = brokenChart('syntax', 'templates/gateway.yaml', (s) =>
      s.replace('{{- $g := .Values.gateway }}', '{{- $g := .Values.gateway '),
    );
    const s = await checkChart(dir, DEPLOY_DIR, helm);
    expect(s.problems.join('\n')).toMatch(/helm (lint|template) \(default values\)/);
  });

  it('fails when a Service selects no pods and a ScaledObject targets nothing', async () => {
    const dir = brokenChart('selectors', 'templates/pools.yaml', (s) =>
      s
        .replace('    name: {{ $name }}\n  minReplicaCount', '    name: {{ $name }}-typo\n  minReplicaCount')
        .replace('    diffmesh.io/tier: stage\n  ports:', '    diffmesh.io/tier: stages\n  ports:'),
    );
    const text = (await checkChart(dir, DEPLOY_DIR, helm)).problems.join('\n');
    expect(text).toMatch(
      /ScaledObject check-diffmesh-pool-dit-tiny: scale target Deployment check-diffmesh-pool-dit-tiny-typo is not rendered/,
    );
    expect(text).toMatch(/Service check-diffmesh-stages: its selector matches no pod template/);
  });

  it('fails when a service gets a flag it does not have', async () => {
    const dir = brokenChart('flag', 'templates/pools.yaml', (s) =>
      s.replace('- --capacity={{ $p.capacity }}', '- --capacityy={{ $p.capacity }}'),
    );
    const s = await checkChart(dir, DEPLOY_DIR, helm);
    expect(s.problems.join('\n')).toMatch(/dit-svc has no flag --capacityy/);
  });
});

describe('object validation', () => {
  const deployment = (spec: Record<string, unknown>) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'x' },
    spec: {
      selector: { matchLabels: { a: 'b' } },
      template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'i' }] } },
      ...spec,
    },
  });
  it('accepts a valid object and rejects unknown fields, wrong types and kinds without a schema', async () => {
    expect(await validateObject(deployment({ replicas: 2 }))).toEqual([]);
    expect((await validateObject(deployment({ replica: 2 }))).join()).toMatch(/spec\.replica: unknown field/);
    expect((await validateObject(deployment({ replicas: 'two' }))).join()).toMatch(/replicas must be integer/);
    expect((await validateObject({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).join()).toMatch(
      /no schema for example\.com\/v1 Widget/,
    );
  });
});

describe('service flags', () => {
  it('knows each service’s flags and variables, and lists the pending ones', () => {
    const pending = loadPending(DEPLOY_DIR);
    expect(
      checkServiceArgs('x', ['scheduler', '--listen=a:1', '--max-queue-length=3'], ['DIFFMESH_SCHEDULER_LOG_LEVEL'], pending).problems,
    ).toEqual([]);
    expect(checkServiceArgs('x', ['vae-svc', '--pool=p', '--pools=q'], [], pending).problems).toEqual(['x: vae-svc has no flag --pools']);
    expect(checkServiceArgs('x', ['gateway'], ['DIFFMESH_GATEWAY_API_KEY'], pending).problems).toEqual([
      'x: gateway reads no variable DIFFMESH_GATEWAY_API_KEY',
    ]);
  });
});

describe('the Dockerfile check', () => {
  it('passes on the repository’s Dockerfile', () => {
    expect(checkDockerfile(path.join(DEPLOY_DIR, 'docker', 'Dockerfile'), path.join(DEPLOY_DIR, '..')).problems).toEqual([]);
  });

  it('fails on a missing COPY source, a root runtime stage, no HEALTHCHECK, an unpinned base and a shell-form ENTRYPOINT', () => {
    const dir = path.join(tmp, 'docker');
    cpSync(path.join(DEPLOY_DIR, 'docker'), dir, { recursive: true });
    const file = path.join(dir, 'Dockerfile');
    writeFileSync(
      file,
      readFileSync(file, 'utf8')
        .replace('COPY . .', 'COPY . .\nCOPY no/such/file /app/x')
        .replace('USER 10001:10001\n# scheduler', '# scheduler')
        .replace(/HEALTHCHECK --interval[^\n]*\\\n[^\n]*\n/, '')
        .replace('ARG NODE_IMAGE=node:20.20-bookworm-slim', 'ARG NODE_IMAGE=node')
        .replace('ENTRYPOINT ["node", "/app/deploy/docker/entrypoint.mjs"]', 'ENTRYPOINT node /app/deploy/docker/entrypoint.mjs'),
    );
    const text = checkDockerfile(file, path.join(DEPLOY_DIR, '..')).problems.join('\n');
    expect(text).toMatch(/COPY source no\/such\/file does not exist/);
    expect(text).toMatch(/stage runtime runs as root/);
    expect(text).toMatch(/stage runtime has no HEALTHCHECK/);
    expect(text).toMatch(/base image node is not pinned/);
    expect(text).toMatch(/ENTRYPOINT should be in exec \(JSON\) form/);
  });

  it('fails when the dependency layer is not cached or the builders would see different contexts', () => {
    const dir = path.join(tmp, 'docker-layers');
    cpSync(path.join(DEPLOY_DIR, 'docker'), dir, { recursive: true });
    const file = path.join(dir, 'Dockerfile');
    const original = readFileSync(file, 'utf8');
    writeFileSync(file, original.replace('COPY cli/package.json cli/\n', ''));
    writeFileSync(`${file}.dockerignore`, 'node_modules\n');
    const text = checkDockerfile(file, path.join(DEPLOY_DIR, '..')).problems.join('\n');
    expect(text).toMatch(/cli\/package\.json is not copied before npm ci/);
    expect(text).toMatch(/Dockerfile\.dockerignore: the classic builder ignores it/);
    writeFileSync(file, original.replace('COPY package.json package-lock.json ./', 'COPY . .'));
    expect(checkDockerfile(file, path.join(DEPLOY_DIR, '..')).problems.join('\n')).toMatch(/whole context is copied before npm ci/);
  });
});

describe('the compose check', () => {
  it('passes on the stack and fails on a broken copy', () => {
    expect(checkCompose(DEPLOY_DIR).problems).toEqual([]);
    const dir = path.join(tmp, 'deploy');
    for (const d of ['compose', 'grafana', 'check']) cpSync(path.join(DEPLOY_DIR, d), path.join(dir, d), { recursive: true });
    const file = path.join(dir, 'compose', 'compose.yaml');
    writeFileSync(
      file,
      readFileSync(file, 'utf8')
        .replace('- --pool=dit-tiny', '- --pool=dit-tiny\n      - --turbo')
        .replace('./prometheus.yml:/etc/prometheus', './prometheus.yaml:/etc/prometheus')
        .replace('      - prometheus\n      - tempo', '      - prometheus\n      - loki'),
    );
    const text = checkCompose(dir).problems.join('\n');
    expect(text).toMatch(/service dit-svc: dit-svc has no flag --turbo/);
    expect(text).toMatch(/bind mount \.\/prometheus\.yaml does not exist/);
    expect(text).toMatch(/depends_on loki, which is not a service/);
  });

  it('fails on a stack Compose v1 refuses or that is open: no client certificates, NATS without the mesh config', () => {
    const dir = path.join(tmp, 'deploy-open');
    for (const d of ['compose', 'grafana', 'check']) cpSync(path.join(DEPLOY_DIR, d), path.join(dir, d), { recursive: true });
    const file = path.join(dir, 'compose', 'compose.yaml');
    writeFileSync(
      file,
      `name: diffmesh\n${readFileSync(file, 'utf8')
        .replace("DIFFMESH_DIT_TLS_REQUIRE_CLIENT_CERT: 'true'", "DIFFMESH_DIT_TLS_REQUIRE_CLIENT_CERT: 'false'")
        .replace("command: ['-c', '/credentials/nats/nats-server.conf']", "command: ['--jetstream']")
        .replace('      DIFFMESH_GATEWAY_API_KEYS_FILE: /credentials/api-key\n', '')}`,
    );
    const text = checkCompose(dir).problems.join('\n');
    expect(text).toMatch(/top-level `name:`/);
    expect(text).toMatch(/service dit-svc: does not require client certificates/);
    expect(text).toMatch(/service nats: not started with the credentials service's config/);
    expect(text).toMatch(/service gateway: no API keys/);
  });
});

describe('the further-node compose check', () => {
  it('passes on compose.node.yaml and fails on a copy that would clash with the first node or make its own credentials', () => {
    expect(checkComposeNode(DEPLOY_DIR).problems).toEqual([]);
    const dir = path.join(tmp, 'deploy-node');
    for (const d of ['compose', 'grafana', 'check']) cpSync(path.join(DEPLOY_DIR, d), path.join(dir, d), { recursive: true });
    const file = path.join(dir, 'compose', 'compose.node.yaml');
    const original = readFileSync(file, 'utf8');
    writeFileSync(
      file,
      original
        .replace('  node-vae-svc:\n', '  vae-svc:\n')
        .replace(
          '      - --pool=dit-tiny\n      - --models=diffmesh/tiny-shapes\n      - --node-id=${DIFFMESH_NODE_ID:-node2}',
          '      - --pool=dit-tiny\n      - --models=diffmesh/tiny-shapes\n      - --node-id=compose',
        )
        .replace(
          '      - --pool=encoder-tiny\n      - --models=diffmesh/tiny-shapes\n      - --node-id=${DIFFMESH_NODE_ID:-node2}\n      - --instance-id=${DIFFMESH_NODE_ID:-node2}-encoder-svc-$$(HOSTNAME)\n      - --nats=nats://nats:4222\n      - --tensor=${DIFFMESH_NODE_ID:-node2}-tensor-svc:7070',
          '      - --pool=encoder-tiny\n      - --models=diffmesh/tiny-shapes\n      - --node-id=${DIFFMESH_NODE_ID:-node2}\n      - --instance-id=${DIFFMESH_NODE_ID:-node2}-encoder-svc-$$(HOSTNAME)\n      - --nats=nats://nats:4222\n      - --tensor=tensor-svc:7070',
        )
        .replace("      DIFFMESH_VAE_TLS_REQUIRE_CLIENT_CERT: 'true'", "      DIFFMESH_VAE_TLS_REQUIRE_CLIENT_CERT: 'false'")
        .replace(
          '    name: ${DIFFMESH_MESH_PROJECT:-compose}_credentials\n    external: true',
          '    name: ${DIFFMESH_MESH_PROJECT:-compose}_credentials',
        ),
    );
    const text = checkComposeNode(dir).problems.join('\n');
    expect(text).toMatch(/service vae-svc: also a service of compose.yaml/);
    expect(text).toMatch(/service vae-svc: does not require client certificates/);
    expect(text).toMatch(/service node-dit-svc: node id compose is the first node's/);
    expect(text).toMatch(/service node-encoder-svc: --tensor tensor-svc:7070 is not an alias of this node's tensor-svc/);
    expect(text).toMatch(/volume credentials is made here/);
  });
});
