import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { serviceEntry } from '@diffmesh/cli';
import type { RequestEvent } from '@diffmesh/core';
import { openDurableStore } from '@diffmesh/tensor-client';
import { startRedisServer, startS3Server, type RunningRedisServer, type RunningS3Server } from '@diffmesh/testing';
import { generate, last, startTestMesh, type TestMesh } from './harness.js';

// Tensors that outlive their tensor-svc: write-through to redis, SIGKILL mid-request, restart;
// and `diffmesh up` with the redis and S3 backends.
const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

let redis: RunningRedisServer;
let s3: RunningS3Server;
beforeAll(async () => {
  [redis, s3] = await Promise.all([startRedisServer(), startS3Server({ buckets: ['diffmesh'] })]);
});
afterAll(async () => {
  await Promise.all([redis?.stop(), s3?.stop()]);
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/** Keys of the redis test server matching `pattern`. */
function redisKeys(pattern: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-h', redis.host, '-p', String(redis.port), '--scan', '--pattern', pattern], (err, out) => {
      if (err) reject(new Error(`redis-cli failed: ${err.message}`));
      else resolve(out.split('\n').filter(Boolean));
    });
  });
}

const PARAMS = { prompt: 'a red circle on a blue background', seed: '11', steps: 30, width: 256, height: 256 };

describe('tensor-svc killed with SIGKILL mid-request, with write-through to redis', () => {
  let t: TestMesh | undefined;
  let dirs: string | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
    if (dirs) await rm(dirs, { recursive: true, force: true });
  });

  it('completes the request from the durable copies with the same pixels, and leaves nothing behind after the TTL', async () => {
    dirs = await mkdtemp(path.join(tmpdir(), 'diffmesh-durable-it-'));
    const port = await freePort();
    const durable = `${redis.url}/0`;
    const ttlMs = 15_000;
    // Its own directories (not the stages' node's shared memory): every transfer goes over gRPC,
    // and losing them is losing the node's copies.
    const tensorArgs = [
      '--durable',
      durable,
      '--write-through',
      'all',
      '--listen',
      `127.0.0.1:${port}`,
      '--shm-dir',
      path.join(dirs, 'shm'),
      '--spill-dir',
      path.join(dirs, 'spill'),
      '--default-ttl-ms',
      String(ttlMs),
    ];
    t = await startTestMesh({
      tensorArgs,
      stageArgs: ['--inline-max-bytes', '0'],
      schedulerArgs: ['--max-attempts', '8', '--retry-backoff-ms', '300'],
    });
    const mesh = t.mesh;

    // An uninterrupted run gives the pixels to expect.
    const baseline = last(await generate(t.client, { params: PARAMS }));
    expect(baseline.type).toBe('completed');
    const expected = (await t.store.get((baseline as Extract<RequestEvent, { type: 'completed' }>).outputs.pixels)).data;
    expect(expected.byteLength).toBe(256 * 256 * 3);

    // Kill tensor-svc while the denoiser works (the prompt embeddings are in it), lose its
    // directories as a lost node would, and start it again on its address once the denoiser
    // has failed to store its output (or the next stage wants its input).
    let killed: Promise<void> | undefined;
    let restarted: Promise<unknown> | undefined;
    const restart = (): void => {
      restarted ??= (async () => {
        await killed;
        await mesh.supervisor.start({
          name: 'tensor-svc',
          entry: serviceEntry('tensor-svc'),
          args: ['--node-id', mesh.nodeId, '--log-level', 'info', '--nats', mesh.natsUrl, ...tensorArgs],
          readyPrefix: 'tensor-svc listening on ',
        });
      })();
    };
    const events = await generate(t.client, { params: PARAMS }, (e) => {
      if (e.type === 'progress' && e.stage === 'denoising' && !killed) {
        killed = (async () => {
          await mesh.supervisor.stop('tensor-svc', 'SIGKILL');
          await rm(path.join(dirs!, 'shm'), { recursive: true, force: true });
          await rm(path.join(dirs!, 'spill'), { recursive: true, force: true });
        })();
        setTimeout(restart, 8000).unref(); // in case no stage needs the service before then
      }
      if (killed && e.type === 'stage_started' && (e.attempt > 1 || e.stage === 'vae_decoding')) restart();
    });
    await restarted;
    const end = last(events);
    expect(end.type).toBe('completed');
    expect(killed).toBeDefined();
    const pixels = (end as Extract<RequestEvent, { type: 'completed' }>).outputs.pixels;
    expect(pixels.durableUri).toBe(durable);
    const got = await t.store.get(pixels);
    expect(Buffer.from(got.data).equals(Buffer.from(expected))).toBe(true);

    // Some reader was served by a durable copy: a stage (its owner unreachable) or the restarted tensor-svc.
    const logs = await Promise.all(
      (await readdir(mesh.logDir)).map(async (f) => readFile(path.join(mesh.logDir, f), 'utf8').catch(() => '')),
    );
    expect(logs.some((l) => /served from the durable copy|from its durable copy/.test(l))).toBe(true);

    // The scheduler deleted the intermediates, the client deletes the result; whatever the kill
    // orphaned expires with its TTL: no object bytes are left in redis.
    await t.store.delete(pixels);
    await t.store.delete((baseline as Extract<RequestEvent, { type: 'completed' }>).outputs.pixels);
    const deadline = Date.now() + ttlMs + 15_000;
    let left = await redisKeys('diffmesh:tensor:d:*');
    while (left.length > 0 && Date.now() < deadline) {
      await sleep(500);
      left = await redisKeys('diffmesh:tensor:d:*');
    }
    expect(left).toEqual([]);
    const store = openDurableStore(durable);
    try {
      expect(await store.usage()).toMatchObject({ objects: 0, bytes: 0 });
    } finally {
      await store.close();
    }
  }, 240_000);
});

function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, cwd, timeout: 90_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('diffmesh up --tensor-backend', () => {
  it.each([
    ['redis', 'yours'],
    ['s3', 'yours'],
    ['redis', 'started for the mesh'],
    ['s3', 'started for the mesh'],
  ] as const)(
    '%s (%s): generates the same pixels for the same seed as the embedded runtime',
    async (backend, store) => {
      const dir = await mkdtemp(path.join(tmpdir(), `diffmesh-up-${backend}-`));
      const own = store === 'yours';
      const env: NodeJS.ProcessEnv = { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'mesh.json'), ...(own ? s3.env : {}) };
      delete env.REDIS_URL;
      const flags = !own
        ? ['--tensor-backend', backend]
        : backend === 'redis'
          ? ['--tensor-backend', 'redis', '--tensor-durable', `${redis.url}/0/up`]
          : ['--tensor-backend', 's3', '--tensor-durable', 's3://diffmesh/up', '--s3-endpoint', s3.endpoint];
      const up = spawn(process.execPath, [BIN, 'up', '--no-gateway', ...flags], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      try {
        const lines: string[] = [];
        await new Promise<void>((resolve, reject) => {
          const rl = createInterface({ input: up.stdout });
          rl.on('line', (line) => {
            lines.push(line);
            if (line.startsWith('mesh ready')) resolve();
          });
          up.once('exit', (code) => reject(new Error(`diffmesh up exited with ${code}: ${lines.join('\n')}`)));
        });
        if (own) expect(lines).toContain(`tensor store ${flags[1]} ${flags[3]}`);
        else if (backend === 'redis')
          expect(lines.join('\n')).toMatch(/^tensor store redis redis:\/\/127\.0\.0\.1:\d+\/1\/tensors \(started for the mesh\)$/m);
        else
          expect(lines.join('\n')).toMatch(
            /^tensor store s3 s3:\/\/diffmesh\/tensors at http:\/\/127\.0\.0\.1:\d+ \(started for the mesh\)$/m,
          );
        const mesh = await run(
          ['generate', PARAMS.prompt, '--remote', 'local', '--seed', '9', '-o', 'mesh.png', '--no-progress'],
          env,
          dir,
        );
        expect(mesh.stderr).not.toMatch(/diffmesh:/);
        expect(mesh.code).toBe(0);
        const embedded = await run(['generate', PARAMS.prompt, '--seed', '9', '-o', 'embedded.png', '--no-progress'], env, dir);
        expect(embedded.code).toBe(0);
        const [a, b] = await Promise.all([readFile(path.join(dir, 'mesh.png')), readFile(path.join(dir, 'embedded.png'))]);
        expect(a.equals(b)).toBe(true);
        // The objects lived in the durable store: the tensor-svc log names it, without credentials.
        const log = await readFile(
          path.join(lines.find((l) => l.startsWith('mesh ready'))!.match(/logs in (\S+);/)![1], 'tensor-svc.log'),
          'utf8',
        );
        expect(log).toContain(`"backend":"${backend}"`);
        up.kill('SIGINT');
        expect(await new Promise<number | null>((resolve) => up.once('exit', resolve))).toBe(0);
      } finally {
        if (up.exitCode === null) up.kill('SIGKILL');
        await rm(dir, { recursive: true, force: true });
      }
    },
    180_000,
  );

  it('refuses a backend it does not know, naming the flag', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-up-bad-'));
    try {
      const r = await run(['up', '--tensor-backend', 'disk'], { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'm.json') }, dir);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('tensor-backend: expected memory, redis or s3, got "disk" (--tensor-backend)');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
