import { X509Certificate } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCredentials, loadTlsFiles, peerIdentity, serverCredentials } from '@diffmesh/core';
import { ensureMeshCredentials, type IdentityTls, type MeshCredentials } from './mesh-credentials.js';

// A one-method service that answers with the identity the server sees for its caller.
const raw = (b: Buffer): Buffer => b;
const WHO = {
  whoAmI: {
    path: '/diffmesh.test.Who/WhoAmI',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
} as const;
const WhoClient = grpc.makeGenericClientConstructor(WHO, 'Who');

function tlsOf(files: IdentityTls, requireClientCert = false) {
  return loadTlsFiles({ ...files, requireClientCert })!;
}

function ask(address: string, creds: grpc.ChannelCredentials): Promise<string> {
  const client = new WhoClient(address, creds);
  return new Promise<string>((resolve, reject) => {
    client.makeUnaryRequest(WHO.whoAmI.path, raw, raw, Buffer.alloc(0), { deadline: Date.now() + 10_000 }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve((res as Buffer).toString());
    });
  });
}

let dir: string;
let creds: MeshCredentials;
let server: grpc.Server;
let address: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-creds-'));
  creds = await ensureMeshCredentials(path.join(dir, 'credentials'));
  server = new grpc.Server();
  server.addService(WHO, {
    whoAmI: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
      cb(null, Buffer.from(peerIdentity(call) ?? '(none)')),
  });
  const serverTls = serverCredentials(tlsOf(await creds.tls('scheduler'), true));
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', serverTls, (e, p) => (e ? reject(e) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
});

afterAll(async () => {
  server?.forceShutdown();
  await rm(dir, { recursive: true, force: true });
});

describe('mesh credentials', () => {
  it('makes a CA and per-identity certificates for loopback, keys and seeds readable by the owner only', async () => {
    const stage = await creds.tls('stage:dit');
    const cert = new X509Certificate(await readFile(stage.cert));
    expect(cert.subjectAltName).toContain('DNS:localhost');
    expect(cert.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(cert.subjectAltName).toContain('URI:urn:diffmesh:stage:dit');
    expect(cert.checkIssued(new X509Certificate(await readFile(creds.ca)))).toBe(true);
    for (const secret of [stage.key, path.join(creds.dir, 'ca-key.pem'), creds.natsSeedFile('stage')]) {
      expect((await stat(secret)).mode & 0o077).toBe(0);
    }
    expect((await stat(creds.dir)).mode & 0o077).toBe(0);
    expect(creds.natsPublicKeys).toHaveLength(5);
    expect((await readFile(creds.natsSeedFile('client'), 'utf8')).trim()).toMatch(/^SU[A-Z2-7]+$/);
  });

  it('reuses what is there and valid, and makes again what is not', async () => {
    const before = await readFile((await creds.tls('client')).cert);
    await chmod((await creds.tls('client')).key, 0o644);
    const seed = await readFile(creds.natsSeedFile('gateway'), 'utf8');
    const again = await ensureMeshCredentials(creds.dir);
    expect((await readFile((await again.tls('client')).cert)).equals(before)).toBe(true);
    expect((await stat((await again.tls('client')).key)).mode & 0o077).toBe(0); // made private again
    expect(await readFile(again.natsSeedFile('gateway'), 'utf8')).toBe(seed);
    // A damaged certificate is replaced, still signed by the same CA.
    await writeFile((await again.tls('gateway')).cert, 'not a certificate');
    const repaired = await ensureMeshCredentials(creds.dir);
    const gw = new X509Certificate(await readFile((await repaired.tls('gateway')).cert));
    expect(gw.checkIssued(new X509Certificate(await readFile(creds.ca)))).toBe(true);
  });

  it('tells the server who the caller is from its verified client certificate', async () => {
    expect(await ask(address, clientCredentials(tlsOf(await creds.tls('client'))))).toBe('urn:diffmesh:client');
    expect(await ask(address, clientCredentials(tlsOf(await creds.tls('stage:dit'))))).toBe('urn:diffmesh:stage:dit');
  });

  it('refuses a client without a certificate, and a plaintext one', async () => {
    const noCert = clientCredentials(loadTlsFiles({ ca: creds.ca, cert: '', key: '', requireClientCert: false }));
    await expect(ask(address, noCert)).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    await expect(ask(address, grpc.credentials.createInsecure())).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });
});
