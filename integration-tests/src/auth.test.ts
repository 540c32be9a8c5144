/**
 * `diffmesh up` is authenticated without any flag: every gRPC hop on mutual TLS with the
 * certificates it made, NATS only for its nkey users. A client without a certificate, a NATS
 * connection without credentials and a stage process started by hand are refused; no secret
 * shows in the logs or in `diffmesh status`. `--insecure` turns it off and says so.
 */
import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientTls, serviceEntry } from '@diffmesh/cli';
import { schedulerStub } from '@diffmesh/client';
import { Code, loadTlsFiles, silentLogger } from '@diffmesh/core';
import { createDiscovery } from '@diffmesh/discovery';
import { decodePng } from '@diffmesh/media';
import { defaultModelsRoot } from '@diffmesh/models';
import { InlineTensorStore, RemoteTensorStore } from '@diffmesh/tensor-client';
import { generate, last, rejection, submit } from './harness.js';
import { runCli, startUp, type UpProcess } from './up-process.js';

/** Every secret the mesh's credentials folder holds: nkey seeds and the base64 of each private key. */
async function secretsOf(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const f of await readdir(path.join(dir, 'nats'))) out.push((await readFile(path.join(dir, 'nats', f), 'utf8')).trim());
  for (const f of (await readdir(dir)).filter((n) => n.endsWith('-key.pem'))) {
    const body = (await readFile(path.join(dir, f), 'utf8')).split('\n').filter((l) => l && !l.startsWith('-----'));
    out.push(...body);
  }
  return out;
}

/** A reader of one tensor-svc, with these TLS files (or none). */
function tensorReader(address: string, tls: ReturnType<typeof loadTlsFiles>): InlineTensorStore {
  return new InlineTensorStore(
    new RemoteTensorStore({ address, nodeId: 'auth-test', log: silentLogger(), sameNodeReads: false, ...(tls ? { tls } : {}) }),
  );
}

describe('diffmesh up, authenticated by default', () => {
  let up: UpProcess;
  let state: Awaited<ReturnType<UpProcess['state']>>;

  beforeAll(async () => {
    up = await startUp(['--gateway-listen', '127.0.0.1:0', '--queue', 'memory'], 'diffmesh-auth-');
    state = await up.state();
  }, 120_000);

  afterAll(async () => {
    await up?.stop();
  });

  it('serves generate --remote local on mutual TLS, with the client certificate found through the state file', async () => {
    expect(up.lines).toContain(`security mutual TLS and NATS nkeys; credentials in ${path.join(up.dir, 'credentials')}`);
    expect(state.credentials).toBeDefined();
    const r = await runCli(['generate', 'a red circle on a blue background', '--remote', 'local', '-o', 'a.png', '--no-progress'], up.env, {
      cwd: up.dir,
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(decodePng(await readFile(path.join(up.dir, 'a.png'))).width).toBe(256);
  });

  it('refuses a scheduler client without a certificate, plaintext or TLS', async () => {
    const plain = schedulerStub(state.schedulerAddress);
    const noCert = schedulerStub(
      state.schedulerAddress,
      loadTlsFiles({ ca: state.credentials!.ca, cert: '', key: '', requireClientCert: false }),
    );
    try {
      expect((await rejection(submit(plain, { params: { prompt: 'x' } }, 5000))).code).toBe(Code.UNAVAILABLE);
      expect((await rejection(submit(noCert, { params: { prompt: 'x' } }, 5000))).code).toBe(Code.UNAVAILABLE);
    } finally {
      plain.close();
      noCert.close();
    }
  });

  it("serves a tensor to the mesh's client certificate and refuses a reader without one", async () => {
    const tls = clientTls([state.schedulerAddress], state, {})!;
    const client = schedulerStub(state.schedulerAddress, tls);
    const good = tensorReader(state.tensorAddress, tls);
    const noCert = tensorReader(
      state.tensorAddress,
      loadTlsFiles({ ca: state.credentials!.ca, cert: '', key: '', requireClientCert: false }),
    );
    const plain = tensorReader(state.tensorAddress, undefined);
    try {
      const end = last(await generate(client, { params: { prompt: 'a green square', numInferenceSteps: 2 } }));
      if (end.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(end)}`);
      // 256×256 RGB: past the inline limit, so the bytes live in tensor-svc.
      expect((await good.get(end.outputs.pixels)).data.byteLength).toBe(256 * 256 * 3);
      expect((await rejection(noCert.get(end.outputs.pixels))).code).toBe(Code.UNAVAILABLE);
      expect((await rejection(plain.get(end.outputs.pixels))).code).toBe(Code.UNAVAILABLE);
    } finally {
      client.close();
      await Promise.all([good.close(), noCert.close(), plain.close()]);
    }
  });

  it("refuses a NATS connection without the mesh's credentials, and a stage started by hand cannot register", async () => {
    // TLS only, with a certificate from the mesh's CA: a client that does not trust that CA gets nowhere.
    await expect(createDiscovery({ backend: 'nats', url: state.natsUrl })).rejects.toThrow(/cannot connect to NATS.*certificate/);
    // The mesh's TLS files without its nkey: the server still refuses the connection.
    const { ca, cert, key } = state.credentials!;
    await expect(createDiscovery({ backend: 'nats', url: state.natsUrl, tls: { ca, cert, key } })).rejects.toThrow(
      /authorization violation/,
    );

    // A DiT process started by hand, pointed at the mesh's NATS and tensor-svc, without credentials.
    const intruder = spawn(
      process.execPath,
      [
        serviceEntry('dit-svc'),
        '--nats',
        state.natsUrl,
        '--tensor',
        state.tensorAddress,
        '--pool',
        'dit-tiny',
        '--instance-id',
        'intruder',
        '--listen',
        '127.0.0.1:0',
        '--models-dirs',
        defaultModelsRoot(),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, DIFFMESH_DIT_LOG_LEVEL: 'info' } },
    );
    let output = '';
    intruder.stdout.on('data', (b: Buffer) => (output += b.toString()));
    intruder.stderr.on('data', (b: Buffer) => (output += b.toString()));
    const code = await new Promise<number | null>((resolve) => intruder.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toMatch(/cannot connect to NATS/);

    const status = await runCli(['status', '--json'], up.env);
    expect(status.code).toBe(0);
    const ids = (JSON.parse(status.stdout) as { instances: Array<{ id: string }> }).instances.map((i) => i.id);
    expect(ids).toContain('dit-svc-1');
    expect(ids).not.toContain('intruder');
  });

  it('shows no secret in the logs, in the state file, on the status page or in diffmesh status', async () => {
    const secrets = await secretsOf(path.join(up.dir, 'credentials'));
    expect(secrets.length).toBeGreaterThan(10);
    // The gateway's status API answers (its calls to the scheduler are on mutual TLS).
    const apiKey = up.lines.find((l) => l.startsWith('API key '))!.split(' ')[2];
    const statusApi = await fetch(`${state.gatewayUrl}/api/v1/status`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(statusApi.status).toBe(200);
    const texts = [
      await statusApi.text(),
      await (await fetch(`${state.gatewayUrl}/status`)).text(),
      (await runCli(['status'], up.env)).stdout,
      (await runCli(['status', '--json'], up.env)).stdout,
      await readFile(path.join(up.dir, 'mesh.json'), 'utf8'),
      up.lines.join('\n'),
    ];
    const logDir = up.lines.find((l) => l.startsWith('mesh ready'))!.match(/logs in (\S+);/)![1];
    for (const f of await readdir(logDir)) if (f.endsWith('.log')) texts.push(await readFile(path.join(logDir, f), 'utf8'));
    expect(texts[2]).toMatch(/^scheduler\s/m); // diffmesh status did answer
    for (const text of texts) for (const secret of secrets) expect(text.includes(secret)).toBe(false);
  });
});

describe('diffmesh up --insecure', () => {
  it('says at start that anyone can join, and serves plaintext clients', async () => {
    const up = await startUp(['--no-gateway', '--queue', 'memory', '--insecure'], 'diffmesh-insecure-');
    try {
      expect(up.lines.join('\n')).toMatch(
        /WARNING: running WITHOUT TLS and NATS credentials \(--insecure\): any process on this network can join/,
      );
      const state = await up.state();
      expect(state.credentials).toBeUndefined();
      const plain = schedulerStub(state.schedulerAddress);
      try {
        const end = last(await generate(plain, { params: { prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 2 } }));
        expect(end.type).toBe('completed');
      } finally {
        plain.close();
      }
      const d = await createDiscovery({ backend: 'nats', url: state.natsUrl });
      await d.close();
    } finally {
      await up.stop();
    }
  }, 120_000);
});
