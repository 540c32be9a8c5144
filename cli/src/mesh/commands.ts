import { randomBytes } from 'node:crypto';
import {
  NatsServerNotFoundError,
  createDiscovery,
  createLogger,
  type Instance,
  type LogLevel,
} from '@diffmesh/runtime';
import { startLocalMesh } from './local-mesh.js';
import { clearState, readState, writeState } from './state.js';

interface UpFlags {
  nats?: string;
  gateway: boolean;
  gatewayListen: string;
  models: string;
  modelsDir: string[];
  threads: string;
  logLevel: string;
}

/** `diffmesh up`: runs until SIGINT/SIGTERM; returns the exit code. */
export async function runUp(flags: UpFlags): Promise<number> {
  const log = createLogger({ name: 'diffmesh-up', level: flags.logLevel as LogLevel });
  const models = flags.models.split(',').map((m) => m.trim()).filter(Boolean);
  const threads = Number(flags.threads);
  if (!Number.isInteger(threads) || threads < 0) {
    process.stderr.write(`diffmesh: threads: expected a non-negative integer, got "${flags.threads}"\n`);
    return 2;
  }
  // The gateway turns auth on with a key from DIFFMESH_API_KEY, or one made up here.
  const apiKey = process.env.DIFFMESH_API_KEY || `dm-${randomBytes(24).toString('base64url')}`;
  let mesh;
  try {
    mesh = await startLocalMesh({
      ...(flags.nats ? { natsUrl: flags.nats } : {}),
      ...(flags.gateway ? { gateway: { listen: flags.gatewayListen, apiKeys: [apiKey] } } : {}),
      modelsDirs: flags.modelsDir,
      models,
      threads,
      log,
    });
  } catch (err) {
    if (err instanceof NatsServerNotFoundError) {
      process.stderr.write(`diffmesh: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`diffmesh: could not start the mesh: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  out(`nats ${mesh.natsUrl}`);
  out(`tensor-svc ${mesh.tensorAddress}`);
  out(`scheduler (gRPC) ${mesh.schedulerAddress}`);
  const metricsUrl = (await mesh.discovery.instances()).find((i) => i.name === 'scheduler')?.metadata.metrics_url;
  if (metricsUrl) out(`scheduler metrics ${metricsUrl}`);
  for (const p of mesh.supervisor.processes) {
    if (p.name !== 'scheduler' && p.name !== 'tensor-svc') out(`${p.name} ${p.address}`);
  }
  if (mesh.gatewayUrl) {
    out(`gateway ${mesh.gatewayUrl} (OpenAPI: ${mesh.gatewayUrl}/openapi.json)`);
    out(`API key ${apiKey}${process.env.DIFFMESH_API_KEY ? ' (from DIFFMESH_API_KEY)' : ' (generated; set DIFFMESH_API_KEY to choose one)'}`);
  }
  await writeState({
    pid: process.pid,
    ...(mesh.gatewayUrl ? { gatewayUrl: mesh.gatewayUrl } : {}),
    natsUrl: mesh.natsUrl,
    schedulerAddress: mesh.schedulerAddress,
    tensorAddress: mesh.tensorAddress,
    logDir: mesh.logDir,
    startedAt: new Date().toISOString(),
  });
  out(`mesh ready: serving ${models.join(', ')} (logs in ${mesh.logDir}; Ctrl-C stops it)`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  process.stderr.write('stopping the mesh…\n');
  await mesh.stop();
  await clearState();
  return 0;
}

/** `diffmesh status`: prints the registered services. */
export async function runStatus(flags: { nats?: string; json?: boolean }): Promise<number> {
  let url = flags.nats;
  if (!url) {
    const state = await readState();
    if (!state) {
      process.stderr.write('diffmesh: no running mesh found on this machine; pass --nats URL or start one with `diffmesh up`\n');
      return 1;
    }
    url = state.natsUrl;
  }
  const log = createLogger({ name: 'diffmesh-status', level: 'silent' });
  let discovery;
  try {
    discovery = await createDiscovery({ backend: 'nats', url }, log);
    await discovery.refresh();
    const instances = await discovery.instances();
    if (flags.json) process.stdout.write(`${JSON.stringify(instances, null, 2)}\n`);
    else process.stdout.write(formatTable(instances));
    return 0;
  } catch (err) {
    process.stderr.write(`diffmesh: cannot read the mesh at ${url}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await discovery?.close();
  }
}

function formatTable(instances: Instance[]): string {
  const rows = [
    ['NAME', 'VERSION', 'POOL', 'STAGE', 'NODE', 'ADDRESS', 'LOAD', 'ID'],
    ...instances
      .sort((a, b) => a.name.localeCompare(b.name) || a.pool.localeCompare(b.pool) || a.id.localeCompare(b.id))
      .map((i) => [
        i.name,
        i.version,
        i.pool,
        i.stage,
        i.nodeId,
        i.grpcAddress,
        `${i.load?.inFlight ?? '?'}/${i.capacity}`,
        i.id,
      ]),
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return `${rows.map((r) => r.map((v, c) => v.padEnd(widths[c])).join('  ').trimEnd()).join('\n')}\n`;
}
