import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerStub } from '@diffmesh/client';
import { Code, loadTlsFiles } from '@diffmesh/core';
import { decodePng } from '@diffmesh/media';
import { generate, last, rejection, startTestMesh, submit, type TestMesh } from './harness.js';

// Service-to-service TLS with a CA generated for the test: every process serves TLS and
// presents the same certificate as a client (mutual TLS).

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd }, (err, _out, stderr) => (err ? reject(new Error(`openssl ${args[0]}: ${stderr}`)) : resolve()));
  });
}

/** A CA and a certificate it signed for 127.0.0.1/localhost, usable by servers and clients. */
async function makeCa(dir: string, name: string): Promise<{ ca: string; cert: string; key: string }> {
  const p = (f: string) => path.join(dir, `${name}-${f}`);
  await openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${name} test CA`,
      '-keyout',
      p('ca.key'),
      '-out',
      p('ca.pem'),
    ],
    dir,
  );
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=diffmesh-mesh', '-keyout', p('key.pem'), '-out', p('csr.pem')], dir);
  await writeFile(
    p('ext.cnf'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n',
  );
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      p('csr.pem'),
      '-CA',
      p('ca.pem'),
      '-CAkey',
      p('ca.key'),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      p('ext.cnf'),
      '-out',
      p('cert.pem'),
    ],
    dir,
  );
  return { ca: p('ca.pem'), cert: p('cert.pem'), key: p('key.pem') };
}

let dir: string;
let t: TestMesh;
let tls: { ca: string; cert: string; key: string };
let other: { ca: string; cert: string; key: string };

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-tls-'));
  tls = await makeCa(dir, 'mesh');
  other = await makeCa(dir, 'other');
  t = await startTestMesh({ tls, stageArgs: ['--inline-max-bytes', '0'], gateway: { apiKeys: ['k1'] } });
}, 120_000);

afterAll(async () => {
  await t?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('service-to-service TLS', () => {
  it('runs a request end to end with every hop on mutual TLS', async () => {
    const events = await generate(t.client, {
      params: { prompt: 'a green circle on a white background', width: 64, height: 64, numInferenceSteps: 4 },
    });
    const end = last(events);
    if (end.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(end)}`);
    // The pixels came through tensor-svc (TLS), read by a TLS client.
    expect((await t.store.get(end.outputs.pixels)).data.byteLength).toBe(64 * 64 * 3);
  });

  it('serves the gateway over a TLS mesh (gateway → scheduler and tensor-svc on mutual TLS)', async () => {
    const res = await fetch(`${t.mesh.gatewayUrl}/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k1' },
      body: JSON.stringify({
        model: 'diffmesh/tiny-shapes',
        prompt: 'a red square',
        size: '64x64',
        response_format: 'b64_json',
        num_inference_steps: 4,
      }),
    });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { data: Array<{ b64_json: string }> };
    expect(decodePng(Buffer.from(json.data[0].b64_json, 'base64')).width).toBe(64);
  });

  it('refuses a plaintext client', async () => {
    const plain = schedulerStub(t.mesh.schedulerAddress);
    try {
      const err = await rejection(submit(plain, { params: { prompt: 'x' } }, 5000));
      expect(err.code).toBe(Code.UNAVAILABLE);
    } finally {
      plain.close();
    }
  });

  it('refuses a client without a certificate, and one that trusts another CA', async () => {
    const noCert = schedulerStub(t.mesh.schedulerAddress, loadTlsFiles({ ca: tls.ca, cert: '', key: '', requireClientCert: false }));
    const wrongCa = schedulerStub(t.mesh.schedulerAddress, loadTlsFiles({ ...other, requireClientCert: false }));
    try {
      expect((await rejection(submit(noCert, { params: { prompt: 'x' } }, 5000))).code).toBe(Code.UNAVAILABLE);
      expect((await rejection(submit(wrongCa, { params: { prompt: 'x' } }, 5000))).code).toBe(Code.UNAVAILABLE);
    } finally {
      noCert.close();
      wrongCa.close();
    }
  });
});
