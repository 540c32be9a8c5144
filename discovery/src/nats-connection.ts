import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'nats';
import { z } from 'zod';
import { ConfigError } from '@diffmesh/core';
import { natsAuthenticatorFromFile, natsCredentialsKind, nkeyPublicKey } from './nats-credentials.js';

/**
 * TLS of a NATS connection, as PEM files: `ca` verifies the server's certificate; `cert` and
 * `key` are presented when the server verifies clients (`tls { verify: true }`). Any of them
 * set: the connection must be TLS (a server without TLS is refused, never used in plain text).
 */
export interface NatsTlsFiles {
  ca?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
}

/**
 * The schema fields a service embeds for its NATS TLS (top-level, beside `natsUrl` and
 * `natsCredentials`): `natsTlsCa`, `natsTlsCert`, `natsTlsKey` (flags `--nats-tls-ca`,
 * `--nats-tls-cert`, `--nats-tls-key`; env `<PREFIX>NATS_TLS_CA` …).
 */
export const natsTlsConfigFields = {
  natsTlsCa: z
    .string()
    .default('')
    .describe(
      "PEM CA that signed the NATS server's certificate; set, NATS is spoken over TLS only (empty = plain NATS, unless a client certificate is set)",
    ),
  natsTlsCert: z.string().default('').describe('PEM client certificate presented to a NATS server that verifies clients (with natsTlsKey)'),
  natsTlsKey: z.string().default('').describe('PEM private key of natsTlsCert'),
};

/** The env suffixes and flags of {@link natsTlsConfigFields}, for configs that list their mappings by hand. */
export function natsTlsConfigMappings(): {
  env: Record<string, 'natsTlsCa' | 'natsTlsCert' | 'natsTlsKey'>;
  flags: Record<string, 'natsTlsCa' | 'natsTlsCert' | 'natsTlsKey'>;
} {
  return {
    env: { NATS_TLS_CA: 'natsTlsCa', NATS_TLS_CERT: 'natsTlsCert', NATS_TLS_KEY: 'natsTlsKey' },
    flags: { 'nats-tls-ca': 'natsTlsCa', 'nats-tls-cert': 'natsTlsCert', 'nats-tls-key': 'natsTlsKey' },
  };
}

/** The TLS files of a service config with {@link natsTlsConfigFields}; undefined when none is set. */
export function natsTlsOf(cfg: { natsTlsCa: string; natsTlsCert: string; natsTlsKey: string }): NatsTlsFiles | undefined {
  if (!cfg.natsTlsCa && !cfg.natsTlsCert && !cfg.natsTlsKey) return undefined;
  return {
    ...(cfg.natsTlsCa ? { ca: cfg.natsTlsCa } : {}),
    ...(cfg.natsTlsCert ? { cert: cfg.natsTlsCert } : {}),
    ...(cfg.natsTlsKey ? { key: cfg.natsTlsKey } : {}),
  };
}

/**
 * The reply-subject prefix of the nkey user `publicKey`: `_INBOX.<public key>`. A client
 * connecting with that user's seed asks with reply subjects under it, so a server can let
 * each nkey user subscribe to its own replies only (`_INBOX.<public key>.>`) and one process
 * cannot read the answers another asked for (a JetStream pull's messages are such answers).
 */
export function natsInboxPrefix(publicKey: string): string {
  return `_INBOX.${publicKey}`;
}

/**
 * The `connect()` options that authenticate and secure one process's NATS connection: the
 * authenticator of its credentials file, the inbox prefix of its nkey, and TLS from its PEM
 * files. Fails with {@link ConfigError} naming `field` (the credentials) or the TLS file
 * that cannot be read; never shows a file's content.
 */
export function natsConnectionOptions(
  opts: { credentialsFile?: string | undefined; tls?: NatsTlsFiles | undefined },
  field = 'natsCredentials',
): Partial<ConnectionOptions> {
  const out: Partial<ConnectionOptions> = {};
  if (opts.credentialsFile) {
    out.authenticator = natsAuthenticatorFromFile(opts.credentialsFile, field);
    const text = readFileSync(opts.credentialsFile, 'utf8').trim();
    if (natsCredentialsKind(text) === 'nkey') out.inboxPrefix = natsInboxPrefix(nkeyPublicKey(text));
  }
  const tls = opts.tls;
  if (tls && (tls.ca || tls.cert || tls.key)) {
    if (Boolean(tls.cert) !== Boolean(tls.key)) {
      throw new ConfigError([{ path: 'natsTlsCert', source: 'config', message: 'natsTlsCert and natsTlsKey must be given together' }]);
    }
    const read = (path: string, file: string): string => {
      try {
        return readFileSync(file, 'utf8');
      } catch (err) {
        throw new ConfigError([
          { path, source: 'file', message: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}` },
        ]);
      }
    };
    out.tls = {
      ...(tls.ca ? { ca: read('natsTlsCa', tls.ca) } : {}),
      ...(tls.cert ? { cert: read('natsTlsCert', tls.cert) } : {}),
      ...(tls.key ? { key: read('natsTlsKey', tls.key) } : {}),
    };
  }
  return out;
}
