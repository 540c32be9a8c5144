#!/usr/bin/env node
// @ts-check
// The compose stack's one-shot credentials service: `entrypoint.mjs credentials`. It makes (or
// reuses, when still valid) the same material as `diffmesh up`: a CA, a certificate per
// identity (scheduler, tensor-svc, gateway, client, nats and `stage:<pool>` for each pool), an nkey
// seed per NATS role, plus what compose needs besides:
//   <dir>/nats/nats-server.conf  the nats-server config: TLS only (its certificate `nats.pem`, the
//                                mesh's CA, client certificates verified), and only the mesh's
//                                nkeys, each with its role's permissions
//   <dir>/api-key                the gateway's API key (DIFFMESH_API_KEY, else generated)
// With DIFFMESH_AUTH=off it writes only a nats-server config that admits anyone (and the
// services drop their credentials settings, see entrypoint.mjs). A generated API key is printed once, when it is made (`docker compose logs credentials`);
// the key file stays in the volume. Delete the volume to rotate everything.
//
//   credentials.mjs [--dir /credentials] [--hosts a,b] [--pools encoder-tiny,dit-tiny] [--nats-port 4222]
// Environment: DIFFMESH_CREDENTIALS_DIR, DIFFMESH_CREDENTIALS_HOSTS, DIFFMESH_CREDENTIALS_POOLS,
// DIFFMESH_API_KEY (the gateway's key instead of a generated one).
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ensureMeshCredentials, meshNatsPermissions } from '@diffmesh/cli';
import { natsAuthorizationConfig, natsTlsConfig } from '@diffmesh/testing';

/** @param {string[]} argv @param {NodeJS.ProcessEnv} env */
export function parseArgs(argv, env = process.env) {
  const list = (/** @type {string | undefined} */ s) =>
    (s ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  const o = {
    dir: env.DIFFMESH_CREDENTIALS_DIR || '/credentials',
    hosts: list(env.DIFFMESH_CREDENTIALS_HOSTS),
    pools: list(env.DIFFMESH_CREDENTIALS_POOLS),
    natsPort: 4222,
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === '--dir') o.dir = value();
    else if (flag === '--hosts') o.hosts = list(value());
    else if (flag === '--pools') o.pools = list(value());
    else if (flag === '--nats-port') o.natsPort = Number(value());
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!Number.isInteger(o.natsPort) || o.natsPort <= 0) throw new Error('--nats-port must be a port number');
  return o;
}

/**
 * The config of the mesh's nats-server: JetStream, the monitoring port for health checks,
 * and only the mesh's nkey users admitted (anyone when `nkeys` is empty: DIFFMESH_AUTH=off),
 * with `security`'s per-user permissions and its TLS block (clients over TLS only).
 * @param {string[]} nkeys @param {number} port
 * @param {{ permissions?: Record<string, import('@diffmesh/testing').NatsPermissions>, tls?: import('@diffmesh/testing').NatsServerTls }} [security]
 */
export function natsServerConfig(nkeys, port, security = {}) {
  const head = `# Written by the diffmesh credentials service; made again on each start.\nport: ${port}\nhttp_port: 8222\nserver_name: diffmesh-compose\njetstream {\n  store_dir: /data\n}\n`;
  if (!nkeys.length) return head;
  return `${head}${natsAuthorizationConfig(nkeys, security.permissions)}${security.tls ? natsTlsConfig(security.tls) : ''}`;
}

/** The gateway's API key: the one in `file`, else DIFFMESH_API_KEY, else a new one. @param {string} file */
async function ensureApiKey(file, env = process.env) {
  const existing = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (env.DIFFMESH_API_KEY && env.DIFFMESH_API_KEY !== existing) {
    await writeFile(file, `${env.DIFFMESH_API_KEY}\n`, { mode: 0o600 });
    return { key: env.DIFFMESH_API_KEY, made: false };
  }
  if (existing) return { key: existing, made: false };
  const key = `dm-${randomBytes(24).toString('base64url')}`;
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return { key, made: true };
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`credentials: ${/** @type {Error} */ (e).message}\n`);
    process.exit(2);
  }
  const natsConf = path.join(o.dir, 'nats', 'nats-server.conf');
  if ((process.env.DIFFMESH_AUTH ?? 'on').toLowerCase() === 'off') {
    await mkdir(path.dirname(natsConf), { recursive: true, mode: 0o700 });
    await writeFile(natsConf, natsServerConfig([], o.natsPort), { mode: 0o600 });
    process.stdout.write('credentials: DIFFMESH_AUTH=off: none made; NATS admits anyone, no TLS, no API key\n');
    return;
  }
  const creds = await ensureMeshCredentials(o.dir, { hosts: o.hosts });
  for (const pool of o.pools) await creds.tls(`stage:${pool}`);
  const server = await creds.tls('nats');
  const security = {
    permissions: meshNatsPermissions(creds),
    tls: { cert: server.cert, key: server.key, ca: creds.ca, verify: true },
  };
  await writeFile(natsConf, natsServerConfig(creds.natsPublicKeys, o.natsPort, security), { mode: 0o600 });
  const api = await ensureApiKey(path.join(o.dir, 'api-key'));
  process.stdout.write(
    `credentials ready in ${o.dir}: CA, ${5 + o.pools.length} certificates, ${creds.natsPublicKeys.length} NATS users\n`,
  );
  if (api.made) process.stdout.write(`gateway API key (shown once; kept in the credentials volume): ${api.key}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) await main();
