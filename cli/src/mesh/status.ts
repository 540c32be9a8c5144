import { createDiscovery, type Instance, type NatsTlsFiles } from '@diffmesh/discovery';
import { createLogger } from '@diffmesh/core/client';
import { readState, type MeshState } from './state.js';

/**
 * `diffmesh status`: prints the registered services, signing in to NATS with the credentials of
 * the mesh `up` runs here (or those `DIFFMESH_NATS_CREDENTIALS` names for another).
 */
export async function runStatus(flags: { nats?: string; json?: boolean }): Promise<number> {
  let url = flags.nats;
  const state = await readState();
  if (!url) {
    if (!state) {
      process.stderr.write('diffmesh: no running mesh found on this machine; pass --nats URL or start one with `diffmesh up`\n');
      return 1;
    }
    url = state.natsUrl;
  }
  // The processes `up` supervises (with their restarts), when this is its mesh; and its NATS credentials.
  const ours = state !== undefined && state.natsUrl === url;
  const processes = ours ? (state.processes ?? []) : [];
  // Another mesh's NATS: its credentials file from DIFFMESH_NATS_CREDENTIALS (a path, never the secret).
  const credentialsFile = ours ? state.credentials?.nats : process.env.DIFFMESH_NATS_CREDENTIALS || undefined;
  const tls = ours ? ownNatsTls(state) : envNatsTls(process.env);
  const log = createLogger({ name: 'diffmesh-status', level: 'silent' });
  let discovery;
  try {
    discovery = await createDiscovery(
      { backend: 'nats', url, ...(credentialsFile ? { credentialsFile } : {}), ...(tls ? { tls } : {}) },
      log,
    );
    await discovery.refresh();
    const instances = await discovery.instances();
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(processes.length > 0 ? { instances, processes } : instances, null, 2)}\n`);
    } else {
      process.stdout.write(formatTable(instances));
      if (processes.length > 0) process.stdout.write(`\n${formatProcesses(processes, state?.queue)}`);
    }
    return 0;
  } catch (err) {
    process.stderr.write(`diffmesh: cannot read the mesh at ${url}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await discovery?.close();
  }
}

/** The processes of the mesh `up` runs: one row each, with restarts. */
function formatProcesses(processes: NonNullable<MeshState['processes']>, queue: string | undefined): string {
  const rows = [
    ['PROCESS', 'PID', 'STATE', 'RESTARTS', 'ADDRESS'],
    ...processes.map((p) => [p.name, String(p.pid), p.state, String(p.restarts), p.address]),
  ];
  return `${columns(rows)}${queue ? `queue: ${queue}\n` : ''}`;
}

function columns(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return `${rows
    .map((r) =>
      r
        .map((v, c) => v.padEnd(widths[c]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

function formatTable(instances: Instance[]): string {
  const rows = [
    ['NAME', 'VERSION', 'POOL', 'STAGE', 'NODE', 'ADDRESS', 'LOAD', 'ADAPTERS', 'ID'],
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
        adapterColumn(i),
        i.id,
      ]),
  ];
  return columns(rows);
}

/** The TLS files of this machine's mesh's own nats-server (its client identity's), when it speaks TLS. */
function ownNatsTls(state: MeshState): NatsTlsFiles | undefined {
  const c = state.credentials;
  return c?.natsTls ? { ca: c.ca, cert: c.cert, key: c.key } : undefined;
}

/** Another mesh's NATS TLS: DIFFMESH_NATS_TLS_CA, _CERT and _KEY (paths). */
function envNatsTls(env: NodeJS.ProcessEnv): NatsTlsFiles | undefined {
  const ca = env.DIFFMESH_NATS_TLS_CA || undefined;
  const cert = env.DIFFMESH_NATS_TLS_CERT || undefined;
  const key = env.DIFFMESH_NATS_TLS_KEY || undefined;
  return ca || cert || key ? { ca, cert, key } : undefined;
}

/** `held/available` LoRA adapters of a denoiser that reports them (in its load), else `-`. */
function adapterColumn(i: Instance): string {
  const held = i.load?.adaptersHeld;
  const available = i.load?.adaptersAvailable;
  return held === undefined || available === undefined ? '-' : `${held}/${available}`;
}
