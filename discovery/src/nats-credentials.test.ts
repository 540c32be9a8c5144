import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '@diffmesh/core';
import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';
import { createDiscovery } from './factory.js';
import { createNkeyUser } from './nats-credentials.js';

// A nats-server that admits one nkey user: discovery signs in with the seed file, and is
// refused without it or with another user's seed.

let dir: string;
let nats: RunningNatsServer;
let seedFile: string;
let strangerFile: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-nats-auth-'));
  const user = createNkeyUser();
  seedFile = path.join(dir, 'user.nk');
  strangerFile = path.join(dir, 'stranger.nk');
  await writeFile(seedFile, `${user.seed}\n`, { mode: 0o600 });
  await writeFile(strangerFile, `${createNkeyUser().seed}\n`, { mode: 0o600 });
  nats = await startNatsServer({ authorization: { nkeys: [user.publicKey], clientSeed: user.seed } });
}, 30_000);

afterAll(async () => {
  await nats?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('NATS credentials', () => {
  it('registers and discovers with the seed file', async () => {
    const d = await createDiscovery({ backend: 'nats', url: nats.url, credentialsFile: seedFile });
    try {
      const reg = await d.register({
        name: 'dit-svc',
        version: '0.1.0',
        grpcAddress: '127.0.0.1:1',
        nodeId: 'n1',
        pool: 'dit',
        stage: 'denoising',
        models: ['m'],
        capacity: 1,
        id: 'dit-1',
      });
      await d.refresh();
      expect((await d.instances()).map((i) => i.id)).toEqual(['dit-1']);
      await reg.stop();
    } finally {
      await d.close();
    }
  });

  it('is refused without credentials, and with a seed the server does not know', async () => {
    await expect(createDiscovery({ backend: 'nats', url: nats.url })).rejects.toThrow(/authorization violation.*without credentials/);
    await expect(createDiscovery({ backend: 'nats', url: nats.url, credentialsFile: strangerFile })).rejects.toThrow(
      /authorization violation/,
    );
  });

  it('names a bad credentials file without repeating what is in it', async () => {
    const bad = path.join(dir, 'bad.nk');
    await writeFile(bad, 'hunter2-not-a-seed but with spaces');
    const err = await createDiscovery({ backend: 'nats', url: nats.url, credentialsFile: bad }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain(bad);
    expect((err as Error).message).not.toContain('hunter2');
  });
});
