import { DEFAULT_DISCOVERY_SUBJECT_PREFIX, natsInboxPrefix } from '@diffmesh/discovery';
import type { NatsPermissions, StartNatsServerOptions } from '@diffmesh/testing';
import type { MeshCredentials, NatsRole } from './mesh-credentials.js';

/** The subjects a mesh's NATS users work on. */
export interface MeshSubjects {
  /** Prefix of discovery's notices and load endpoints (default `diffmesh.discovery`). */
  discoveryPrefix?: string;
  /** The scheduler's queue namespace: its streams, KV bucket and announcements (default `diffmesh`). */
  queueNamespace?: string;
}

/**
 * What one NATS role of a mesh may do. Every role takes part in discovery: it registers
 * (answers `$SRV.PING|INFO|STATS`, serves `<prefix>.load.<id>`, announces `<prefix>.up` and
 * `.down`) and watches (asks `$SRV.STATS`). Replies reach a client on
 * `_INBOX.<its public key>.…` (see `natsInboxPrefix`), and a role may subscribe to its own
 * replies only: a stage cannot read what JetStream answers the scheduler. Only the scheduler
 * may use JetStream (`$JS.API.>`, acknowledgements), its KV bucket `<ns>_requests` and its
 * queue subjects `<ns>.t.>`, `<ns>.chg`, `<ns>.q`; the queued prompts are out of every other
 * role's reach.
 */
export function natsRolePermissions(role: NatsRole, publicKey: string, subjects: MeshSubjects = {}): NatsPermissions {
  const p = subjects.discoveryPrefix ?? DEFAULT_DISCOVERY_SUBJECT_PREFIX;
  const inbox = natsInboxPrefix(publicKey);
  const publish = ['$SRV.>', `${p}.>`];
  const subscribe = ['$SRV.>', `${p}.>`, `${inbox}.>`];
  if (role === 'scheduler') {
    const ns = subjects.queueNamespace ?? 'diffmesh';
    publish.push('$JS.API.>', '$JS.ACK.>', `$KV.${ns}_requests.>`, `${ns}.t.>`, `${ns}.chg`, `${ns}.q`);
    subscribe.push(`${ns}.chg`, `${ns}.q`);
  }
  return { publish: { allow: publish }, subscribe: { allow: subscribe }, allowResponses: true };
}

/** The permissions of every NATS user of a mesh, by public key (for `startNatsServer`'s `authorization`). */
export function meshNatsPermissions(
  credentials: Pick<MeshCredentials, 'natsRoleKeys'>,
  subjects: MeshSubjects = {},
): Record<string, NatsPermissions> {
  const out: Record<string, NatsPermissions> = {};
  for (const [role, key] of Object.entries(credentials.natsRoleKeys) as Array<[NatsRole, string]>) {
    out[key] = natsRolePermissions(role, key, subjects);
  }
  return out;
}

/**
 * How the mesh's own nats-server admits clients: only the mesh's nkey users, each with its
 * role's permissions, over TLS only with a certificate from the mesh's CA (mutual TLS).
 */
export async function meshNatsServerSecurity(credentials: MeshCredentials): Promise<Pick<StartNatsServerOptions, 'authorization' | 'tls'>> {
  const server = await credentials.tls('nats');
  const probe = await credentials.tls('client');
  return {
    authorization: {
      nkeys: credentials.natsPublicKeys,
      clientSeed: credentials.natsClientSeed,
      permissions: meshNatsPermissions(credentials),
    },
    tls: { cert: server.cert, key: server.key, ca: server.ca, verify: true, probeCert: probe.cert, probeKey: probe.key },
  };
}
