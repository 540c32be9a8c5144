import { readFileSync } from 'node:fs';
import { credsAuthenticator, nkeyAuthenticator, nkeys, usernamePasswordAuthenticator, type Authenticator } from 'nats';
import { ConfigError } from '@diffmesh/core';

/**
 * NATS credentials of a process, read from a file so that they never sit in argv (which
 * every user sees in `ps`) or in logs. The file holds one of:
 *
 * - an nkey user seed (`SU…`, one line): what `diffmesh up` generates; the server knows only
 *   the public key, and the seed signs the server's challenge (it is never sent);
 * - a `.creds` file (a user JWT and its seed, as `nsc` writes them) for operator/JWT setups;
 * - `user:password` on one line, for servers configured with plain users.
 */
export type NatsCredentialsKind = 'nkey' | 'creds' | 'user-password';

/** Which kind of credentials `text` holds; undefined when none fits. Never echoes `text`. */
export function natsCredentialsKind(text: string): NatsCredentialsKind | undefined {
  const t = text.trim();
  if (t.includes('-----BEGIN NATS USER JWT-----')) return 'creds';
  if (/^SU[A-Z2-7]{50,}$/.test(t)) return 'nkey';
  if (/^[^\s:]+:\S+$/.test(t)) return 'user-password';
  return undefined;
}

/**
 * An authenticator for `connect({ authenticator })` from the credentials file `file` (see
 * {@link NatsCredentialsKind}). Throws {@link ConfigError} naming `field` and the file, never
 * its content, when it cannot be read or holds nothing recognisable.
 */
export function natsAuthenticatorFromFile(file: string, field = 'natsCredentials'): Authenticator {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([
      { path: field, source: 'file', message: `cannot read NATS credentials ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}` },
    ]);
  }
  const t = text.trim();
  switch (natsCredentialsKind(t)) {
    case 'nkey':
      return nkeyAuthenticator(new TextEncoder().encode(t));
    case 'creds':
      return credsAuthenticator(new TextEncoder().encode(t));
    case 'user-password': {
      const i = t.indexOf(':');
      return usernamePasswordAuthenticator(t.slice(0, i), t.slice(i + 1));
    }
    default:
      throw new ConfigError([
        {
          path: field,
          source: 'file',
          message: `${file} holds no NATS credentials: expected an nkey user seed (SU…), a .creds file or user:password`,
        },
      ]);
  }
}

/** A new NATS nkey user: the seed (secret, for the client) and its public key (for the server's config). */
export interface NkeyUser {
  seed: string;
  publicKey: string;
}

/** Makes a new nkey user (ed25519) for a server's `authorization { users = [{ nkey: … }] }`. */
export function createNkeyUser(): NkeyUser {
  const kp = nkeys.createUser();
  const user = { seed: new TextDecoder().decode(kp.getSeed()), publicKey: kp.getPublicKey() };
  kp.clear();
  return user;
}

/** The public key of an nkey user seed (`SU…`), e.g. to list it in a server's config. */
export function nkeyPublicKey(seed: string): string {
  return nkeys.fromSeed(new TextEncoder().encode(seed.trim())).getPublicKey();
}
