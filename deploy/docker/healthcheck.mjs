#!/usr/bin/env node
// @ts-check
// A small gRPC health probe (grpc.health.v1.Health/Check), in the spirit of grpc_health_probe,
// plus an HTTP probe for the gateway's admin port. Exit 0 = SERVING / 2xx, 1 = anything else,
// 2 = bad usage.
//
//   healthcheck.mjs                                   # the target entrypoint.mjs wrote
//   healthcheck.mjs --grpc 10.0.0.7:7000 [--service NAME] [--timeout-ms 3000]
//                   [--tls-ca ca.pem [--tls-cert crt.pem --tls-key key.pem] [--tls-server-name NAME]]
//   healthcheck.mjs --http http://127.0.0.1:9464/healthz
//
// Kubernetes probes use the kubelet's own `grpc:` probe; this script is for the image's
// HEALTHCHECK, compose, and Kubernetes `exec` probes when the services speak TLS (the
// kubelet's gRPC probe cannot).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** @param {string[]} argv */
export function parseArgs(argv) {
  /** @type {{grpc?: string, http?: string, service: string, timeoutMs: number, tls: Record<string,string>}} */
  const o = { service: '', timeoutMs: 3000, tls: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--grpc') o.grpc = next();
    else if (a === '--http') o.http = next();
    else if (a === '--service') o.service = next();
    else if (a === '--timeout-ms') o.timeoutMs = Number(next());
    else if (a === '--tls-ca') o.tls.ca = next();
    else if (a === '--tls-cert') o.tls.cert = next();
    else if (a === '--tls-key') o.tls.key = next();
    else if (a === '--tls-server-name') o.tls.serverName = next();
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isFinite(o.timeoutMs) || o.timeoutMs <= 0) throw new Error('--timeout-ms must be a positive number');
  return o;
}

/**
 * The serving status of `service` at `address` (`SERVING`, `NOT_SERVING`, …), or throws.
 * @param {string} address @param {string} service @param {number} timeoutMs @param {Record<string,string>} tls
 * @returns {Promise<string>}
 */
export function checkGrpc(address, service, timeoutMs, tls = {}) {
  const grpc = require('@grpc/grpc-js');
  const { service: definition } = require('grpc-health-check');
  const Health = grpc.makeGenericClientConstructor(definition, 'Health');
  const creds = tls.ca
    ? grpc.credentials.createSsl(readFileSync(tls.ca), tls.key ? readFileSync(tls.key) : null, tls.cert ? readFileSync(tls.cert) : null)
    : grpc.credentials.createInsecure();
  /** @type {Record<string, unknown>} */
  const options = tls.serverName ? { 'grpc.ssl_target_name_override': tls.serverName } : {};
  const client = new Health(address, creds, options);
  return new Promise((resolve, reject) => {
    client.Check({ service }, { deadline: Date.now() + timeoutMs }, (/** @type {any} */ err, /** @type {any} */ res) => {
      client.close();
      if (err) reject(new Error(`${address}: ${err.details || err.message}`));
      else resolve(String(res.status));
    });
  });
}

/** @param {string} url @param {number} timeoutMs */
export async function checkHttp(url, timeoutMs) {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return res.status;
}

async function main() {
  let o;
  try {
    const argv = process.argv.slice(2);
    o = parseArgs(argv);
    if (argv.length === 0) {
      const file = process.env.DIFFMESH_HEALTH_FILE ?? '/tmp/diffmesh-health.json';
      const t = JSON.parse(readFileSync(file, 'utf8'));
      o = { ...o, grpc: t.grpc, http: t.http, tls: t.tls ?? {} };
    }
    if (!o.grpc === !o.http) throw new Error('give exactly one of --grpc ADDRESS or --http URL');
  } catch (e) {
    process.stderr.write(`healthcheck: ${/** @type {Error} */ (e).message}\n`);
    process.exit(2);
  }
  try {
    if (o.grpc) {
      const status = await checkGrpc(o.grpc, o.service, o.timeoutMs, o.tls);
      process.stdout.write(`${status}\n`);
      process.exit(status === 'SERVING' ? 0 : 1);
    } else if (o.http) {
      const status = await checkHttp(o.http, o.timeoutMs);
      process.stdout.write(`HTTP ${status}\n`);
      process.exit(status >= 200 && status < 300 ? 0 : 1);
    }
  } catch (e) {
    process.stderr.write(`healthcheck: ${/** @type {Error} */ (e).message}\n`);
    process.exit(1);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
