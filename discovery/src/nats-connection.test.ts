import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '@diffmesh/core';
import { createNkeyUser } from './nats-credentials.js';
import { natsConnectionOptions, natsTlsOf } from './nats-connection.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-nats-conn-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('natsConnectionOptions', () => {
  it("asks with reply subjects under the nkey's own public key, and with none for other credentials", async () => {
    const user = createNkeyUser();
    const seed = path.join(dir, 'user.nk');
    await writeFile(seed, `${user.seed}\n`, { mode: 0o600 });
    expect(natsConnectionOptions({ credentialsFile: seed }).inboxPrefix).toBe(`_INBOX.${user.publicKey}`);
    const pw = path.join(dir, 'pw');
    await writeFile(pw, 'svc:secret\n', { mode: 0o600 });
    const opts = natsConnectionOptions({ credentialsFile: pw });
    expect(opts.inboxPrefix).toBeUndefined();
    expect(opts.authenticator).toBeTypeOf('function');
  });

  it('reads the TLS files, and names the field of one that cannot be read (never its content)', async () => {
    const ca = path.join(dir, 'ca.pem');
    await writeFile(ca, '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n');
    expect(natsConnectionOptions({ tls: { ca } }).tls).toEqual({ ca: expect.stringContaining('BEGIN CERTIFICATE') });
    expect(natsConnectionOptions({ tls: {} }).tls).toBeUndefined();
    const missing = (): unknown => natsConnectionOptions({ tls: { ca: path.join(dir, 'nope.pem') } });
    expect(missing).toThrow(ConfigError);
    expect(missing).toThrow(/natsTlsCa.*nope\.pem.*ENOENT|cannot read .*nope\.pem: ENOENT/);
    expect(() => natsConnectionOptions({ tls: { ca, cert: ca } })).toThrow(/natsTlsCert and natsTlsKey must be given together/);
  });

  it('takes a service config’s NATS TLS fields, none when all are empty', () => {
    expect(natsTlsOf({ natsTlsCa: '', natsTlsCert: '', natsTlsKey: '' })).toBeUndefined();
    expect(natsTlsOf({ natsTlsCa: '/c', natsTlsCert: '', natsTlsKey: '' })).toEqual({ ca: '/c' });
  });
});
