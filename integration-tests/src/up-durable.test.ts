/**
 * `diffmesh up` with a durable queue, driven as a user drives it: requests sent with
 * `diffmesh submit`, processes killed with SIGKILL mid-run, requests followed with
 * `diffmesh watch ID` (no flags beyond `--remote local`).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulerClient } from '@diffmesh/client';

const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

/** Runs `fn` over `items`, `n` at a time. */
async function pool<T, R>(items: T[], n: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    }),
  );
  return out;
}

interface Up {
  proc: ChildProcess;
  env: NodeJS.ProcessEnv;
  dir: string;
  lines: string[];
  state(): Promise<{ schedulerAddresses: string[]; processes: Array<{ name: string; pid: number; restarts: number }> }>;
}

let current: Up | undefined;
afterEach(async () => {
  if (current) {
    if (current.proc.exitCode === null) {
      current.proc.kill('SIGINT');
      await new Promise((r) => current!.proc.once('exit', r));
    }
    await rm(current.dir, { recursive: true, force: true });
    current = undefined;
  }
});

async function up(args: string[]): Promise<Up> {
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-up-durable-'));
  const env = { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'mesh.json') };
  const proc = spawn(process.execPath, [BIN, 'up', '--no-gateway', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const u: Up = {
    proc,
    env,
    dir,
    lines,
    state: async () => JSON.parse(await readFile(path.join(dir, 'mesh.json'), 'utf8')) as Awaited<ReturnType<Up['state']>>,
  };
  current = u;
  createInterface({ input: proc.stderr }).on('line', (l) => lines.push(l));
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: proc.stdout }).on('line', (l) => {
      lines.push(l);
      if (l.startsWith('mesh ready')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`diffmesh up exited with ${code}:\n${lines.join('\n')}`)));
  });
  return u;
}

/** Submits `n` requests with `diffmesh submit`; returns their ids. */
async function submitAll(u: Up, n: number): Promise<string[]> {
  return pool(
    Array.from({ length: n }, (_, i) => i),
    4,
    async (i) => {
      const r = await run(
        ['submit', `a ${['red', 'green', 'blue'][i % 3]} square ${i}`, '--remote', 'local', '--seed', String(i + 1), '--steps', '12'],
        u.env,
      );
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.trim();
    },
  );
}

/** Follows each with `diffmesh watch ID --remote local`; then reads each request's whole history. */
async function watchAll(u: Up, ids: string[]): Promise<void> {
  const outcomes = await pool(ids, 4, (id) => run(['watch', id, '--remote', 'local', '--no-progress'], u.env));
  for (const [i, o] of outcomes.entries()) {
    expect(o.stdout.trim(), `${ids[i]}: ${o.stderr}`).toBe('completed');
    expect(o.code).toBe(0);
  }
  // Exactly once: one end in each request's history, read again from its first event.
  const client = new SchedulerClient({ addresses: (await u.state()).schedulerAddresses });
  try {
    for (const id of ids) {
      const ends: string[] = [];
      for await (const e of client.watch(id)) if (e.completed || e.failed || e.cancelled) ends.push(e.completed ? 'completed' : 'other');
      expect(ends, id).toEqual(['completed']);
    }
  } finally {
    await client.close();
  }
}

async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Resolves once a scheduler of the mesh answers a status call again. */
async function waitForScheduler(u: Up): Promise<void> {
  await waitFor(async () => {
    const client = new SchedulerClient({ addresses: (await u.state()).schedulerAddresses, timeoutMs: 2_000 });
    try {
      await client.status();
      return true;
    } catch {
      return false;
    } finally {
      await client.close();
    }
  });
}

describe('diffmesh up with a durable queue', () => {
  it('jetstream, 2 schedulers, 2 dit: 30 requests survive SIGKILL of a scheduler and a dit-svc, each completing exactly once', async () => {
    const u = await up(['--queue', 'jetstream', '--replicas', 'scheduler=2,dit=2']);
    const ids = await submitAll(u, 30);
    const before = await u.state();
    const kill = (name: string): boolean => process.kill(before.processes.find((p) => p.name === name)!.pid, 'SIGKILL');
    kill('scheduler-1');
    kill('dit-svc-1');
    await watchAll(u, ids);
    const after = await u.state();
    expect(after.processes.find((p) => p.name === 'scheduler-1')?.restarts).toBe(1);
    expect(after.processes.find((p) => p.name === 'dit-svc-1')?.restarts).toBe(1);
    expect(u.lines.join('\n')).toMatch(/scheduler-1 exited \(SIGKILL\); restarting in \d+ ms/);
    const status = await run(['status'], u.env);
    expect(status.stdout).toMatch(/^scheduler-1\s+\d+\s+running\s+1\s/m);
  }, 300_000);

  it('sqlite, one scheduler: the supervisor restarts the killed scheduler and every accepted request completes', async () => {
    const u = await up(['--queue', 'sqlite']);
    const ids = await submitAll(u, 12);
    process.kill((await u.state()).processes.find((p) => p.name === 'scheduler')!.pid, 'SIGKILL');
    // With one scheduler there is nobody to fail over to: as a user would, wait for the
    // supervisor's restart (its log line) before following the requests.
    await waitFor(() => /scheduler exited \(SIGKILL\); restarting in \d+ ms/.test(u.lines.join('\n')));
    await waitForScheduler(u);
    await watchAll(u, ids);
    expect((await u.state()).processes.find((p) => p.name === 'scheduler')?.restarts).toBe(1);
  }, 300_000);
});
