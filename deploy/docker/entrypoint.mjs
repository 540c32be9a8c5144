#!/usr/bin/env node
// @ts-check
// The diffmesh image's entry point: `entrypoint.mjs <command> [flags…]` runs one service in
// this process (no wrapper child: signals reach the service directly).
//
// What it adds to running `node <service>/dist/main.js` by hand, for containers:
//  1. `$(POD_IP)` and `$(HOSTNAME)` in the arguments and in DIFFMESH_* variables become the
//     container's address and host name. Kubernetes expands `$(POD_IP)` itself when the pod
//     defines POD_IP from the downward API; compose has no such thing, so this does it.
//     POD_IP is the variable when set, else the first non-loopback IPv4 address.
//  2. Container defaults for what a service would otherwise bind to loopback or a random port
//     (see CONTAINER_DEFAULTS), each applied only when neither a flag, the service's env
//     variable nor a config file sets it.
//  3. Compose's security switches (see deploy/compose/compose.yaml): the gateway's API keys read
//     from DIFFMESH_GATEWAY_API_KEYS_FILE (a file in the credentials volume, not an environment
//     value in `docker inspect`), and DIFFMESH_AUTH=off, which drops every TLS, NATS
//     credentials and API key setting, for a stack on a machine of one's own.
//  4. It writes what healthcheck.mjs probes (gRPC health at the service's address, or the
//     gateway's /healthz) to $DIFFMESH_HEALTH_FILE (default /tmp/diffmesh-health.json).
import { readFileSync, writeFileSync } from 'node:fs';
import { networkInterfaces, hostname } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const APP = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * @typedef {{ main: string, envPrefix?: string, defaults?: Array<[flag: string, value: string]>,
 *   health?: { kind: 'grpc', flag: string } | { kind: 'http', flag: string, path: string } }} Command
 */

/** @type {Record<string, Command>} */
export const COMMANDS = {
  scheduler: {
    main: 'scheduler/dist/main.js',
    envPrefix: 'DIFFMESH_SCHEDULER_',
    defaults: [
      ['listen', '$(POD_IP):7000'],
      ['metrics-listen', '0.0.0.0:9464'],
    ],
    health: { kind: 'grpc', flag: 'listen' },
  },
  'tensor-svc': {
    main: 'tensor-svc/dist/main.js',
    envPrefix: 'DIFFMESH_TENSOR_',
    defaults: [
      ['listen', '0.0.0.0:7070'],
      ['advertise-address', '$(POD_IP):7070'],
      ['metrics-listen', '0.0.0.0:9464'],
    ],
    health: { kind: 'grpc', flag: 'listen' },
  },
  'encoder-svc': stage('encoder-svc', 'DIFFMESH_ENCODER_'),
  'dit-svc': stage('dit-svc', 'DIFFMESH_DIT_'),
  'vae-svc': stage('vae-svc', 'DIFFMESH_VAE_'),
  gateway: {
    main: 'gateway/dist/main.js',
    envPrefix: 'DIFFMESH_GATEWAY_',
    defaults: [
      ['listen', '0.0.0.0:8080'],
      ['admin-listen', '0.0.0.0:9464'],
    ],
    health: { kind: 'http', flag: 'admin-listen', path: '/healthz' },
  },
  operator: { main: 'deploy/operator/dist/main.js', health: { kind: 'http', flag: 'health-listen', path: '/healthz' } },
  diffmesh: { main: 'cli/bin/diffmesh.js' },
  credentials: { main: 'deploy/docker/credentials.mjs' },
  'build-models': { main: 'models/dist/cli.js' },
};

/** @param {string} name @param {string} envPrefix @returns {Command} */
function stage(name, envPrefix) {
  return {
    main: `${name}/dist/main.js`,
    envPrefix,
    defaults: [
      ['listen', '$(POD_IP):7100'],
      ['metrics-listen', '0.0.0.0:9464'],
      // /models is where the chart and compose mount users' models; the image's built-in
      // models come second. A missing folder is skipped.
      ['models-dirs', '/models,/app/models/generated'],
    ],
    health: { kind: 'grpc', flag: 'listen' },
  };
}

/** The container's address: POD_IP, else the first non-internal IPv4 address, else 127.0.0.1. */
export function podIp(env = process.env, nets = networkInterfaces()) {
  if (env.POD_IP) return env.POD_IP;
  for (const list of Object.values(nets)) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/** Replaces `$(POD_IP)` and `$(HOSTNAME)`. @param {string} s @param {{ip: string, host: string}} v */
export function expand(s, v) {
  return s.replaceAll('$(POD_IP)', v.ip).replaceAll('$(HOSTNAME)', v.host);
}

/** The `--flag` value in args (`--flag v` or `--flag=v`). @param {string[]} args @param {string} flag */
export function flagValue(args, flag) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === `--${flag}`) return args[i + 1];
    if (args[i].startsWith(`--${flag}=`)) return args[i].slice(flag.length + 3);
  }
  return undefined;
}

/** `--metrics-listen` → `METRICS_LISTEN`. @param {string} flag */
const envSuffix = (flag) => flag.toUpperCase().replaceAll('-', '_');

/**
 * The arguments a command runs with: the given ones (expanded) plus each container default that
 * no flag, env variable or config file sets.
 * @param {Command} cmd @param {string[]} args @param {NodeJS.ProcessEnv} env @param {{ip: string, host: string}} v
 */
export function withDefaults(cmd, args, env, v) {
  const out = args.map((a) => expand(a, v));
  const hasConfigFile = flagValue(out, 'config') !== undefined || (cmd.envPrefix && env[`${cmd.envPrefix}CONFIG`]);
  if (hasConfigFile) return out;
  for (const [flag, value] of cmd.defaults ?? []) {
    if (flagValue(out, flag) !== undefined) continue;
    if (cmd.envPrefix && env[`${cmd.envPrefix}${envSuffix(flag)}`]) continue;
    out.push(`--${flag}`, expand(value, v));
  }
  return out;
}

/**
 * What healthcheck.mjs probes for this command, or undefined.
 * @param {Command} cmd @param {string[]} args @param {NodeJS.ProcessEnv} env
 */
export function healthTarget(cmd, args, env) {
  if (!cmd.health) return undefined;
  const fromEnv = cmd.envPrefix ? env[`${cmd.envPrefix}${envSuffix(cmd.health.flag)}`] : undefined;
  const listen = flagValue(args, cmd.health.flag) ?? fromEnv;
  if (!listen) return undefined;
  const i = listen.lastIndexOf(':');
  let host = listen.slice(0, i);
  const port = listen.slice(i + 1);
  if (host === '0.0.0.0' || host === '' || host === '::' || host === '[::]') host = '127.0.0.1';
  const address = `${host}:${port}`;
  if (cmd.health.kind === 'http') return { http: `http://${address}${cmd.health.path}` };
  /** @type {Record<string, string>} */
  const tls = {};
  const fields = { 'tls-ca': 'ca', 'tls-cert': 'cert', 'tls-key': 'key', 'tls-server-name': 'serverName' };
  for (const [k, field] of Object.entries(fields)) {
    const val = flagValue(args, k) ?? (cmd.envPrefix ? env[`${cmd.envPrefix}${envSuffix(k)}`] : undefined);
    if (val) tls[field] = val;
  }
  return { grpc: address, ...(Object.keys(tls).length ? { tls } : {}) };
}

/** Settings DIFFMESH_AUTH=off removes: TLS files, NATS credentials, API keys. */
const AUTH_SETTING = /^DIFFMESH_[A-Z]+_((NATS_)?TLS_[A-Z_]+|NATS_CREDENTIALS|API_KEYS(_FILE)?)$/;

/**
 * The environment a service runs with after compose's security switches: with
 * `DIFFMESH_AUTH=off` no TLS, NATS credentials or API keys; otherwise the gateway's keys read
 * from DIFFMESH_GATEWAY_API_KEYS_FILE when that is set. Returns the variables removed or set.
 * @param {NodeJS.ProcessEnv} env @param {(file: string) => string} read
 */
export function applyAuthSwitches(env, read = (f) => readFileSync(f, 'utf8')) {
  const mode = (env.DIFFMESH_AUTH ?? 'on').toLowerCase();
  if (mode !== 'on' && mode !== 'off') throw new Error(`DIFFMESH_AUTH must be on or off, not ${JSON.stringify(env.DIFFMESH_AUTH)}`);
  if (mode === 'off') {
    const removed = Object.keys(env).filter((k) => AUTH_SETTING.test(k));
    for (const k of removed) delete env[k];
    return { off: true, removed };
  }
  const file = env.DIFFMESH_GATEWAY_API_KEYS_FILE;
  if (file) {
    env.DIFFMESH_GATEWAY_API_KEYS = read(file)
      .split(/[\s,]+/)
      .filter(Boolean)
      .join(',');
    delete env.DIFFMESH_GATEWAY_API_KEYS_FILE;
  }
  return { off: false, removed: [] };
}

const USAGE = `usage: entrypoint.mjs <command> [flags…] | --version
commands: ${Object.keys(COMMANDS).join(', ')}
Each service takes its own flags (see its README); --help is passed through.`;

/** `diffmesh <version> (node <version>)`: the version of the image's diffmesh, from /app/package.json. */
export function versionLine(app = APP) {
  const { version } = JSON.parse(readFileSync(path.join(app, 'package.json'), 'utf8'));
  return `diffmesh ${version} (node ${process.versions.node})`;
}

async function main() {
  const [name, ...rest] = process.argv.slice(2);
  if (!name || name === 'help' || name === '--help') {
    process.stdout.write(`${USAGE}\n`);
    process.exit(name ? 0 : 2);
  }
  if (name === '--version' || name === 'version') {
    process.stdout.write(`${versionLine()}\n`);
    process.exit(0);
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    process.stderr.write(`entrypoint: unknown command "${name}"\n${USAGE}\n`);
    process.exit(2);
  }
  try {
    const auth = applyAuthSwitches(process.env);
    if (auth.off && name !== 'credentials')
      process.stderr.write('entrypoint: DIFFMESH_AUTH=off: no TLS, no NATS credentials, no API keys (local use only)\n');
  } catch (e) {
    process.stderr.write(`entrypoint: ${/** @type {Error} */ (e).message}\n`);
    process.exit(2);
  }
  const v = { ip: podIp(), host: hostname() };
  process.env.POD_IP ??= v.ip;
  for (const [k, val] of Object.entries(process.env)) {
    if (k.startsWith('DIFFMESH_') && val?.includes('$(')) process.env[k] = expand(val, v);
  }
  const args = withDefaults(cmd, rest, process.env, v);
  const target = healthTarget(cmd, args, process.env);
  if (target) {
    try {
      writeFileSync(process.env.DIFFMESH_HEALTH_FILE ?? '/tmp/diffmesh-health.json', JSON.stringify(target));
    } catch {
      // A read-only /tmp only costs the image's HEALTHCHECK; Kubernetes probes do not use it.
    }
  }
  const main = path.join(APP, cmd.main);
  process.argv = [process.argv[0], main, ...args];
  await import(main);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
