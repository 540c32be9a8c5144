/**
 * `diffmesh up` with a durable queue, driven as a user drives it: requests sent with
 * `diffmesh submit`, processes killed with SIGKILL mid-run, requests followed with
 * `diffmesh watch ID` (no flags beyond `--remote local`).
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { clientTls } from '@diffmesh/cli';
import { SchedulerClient } from '@diffmesh/client';
import { BIN, runCli, startUp, type UpProcess } from './up-process.js';

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

/** A client of the mesh's schedulers, with the client certificate `up` made for it. */
async function schedulerClient(u: UpProcess, timeoutMs?: number): Promise<SchedulerClient> {
  const state = await u.state();
  const tls = clientTls(state.schedulerAddresses, state, {});
  return new SchedulerClient({ addresses: state.schedulerAddresses, ...(tls ? { tls } : {}), ...(timeoutMs ? { timeoutMs } : {}) });
}

let current: UpProcess | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

async function up(args: string[]): Promise<UpProcess> {
  current = await startUp(['--no-gateway', ...args], 'diffmesh-up-durable-');
  return current;
}

const run = (args: string[], env: NodeJS.ProcessEnv) => runCli(args, env);

/** Submits `n` requests with `diffmesh submit`; returns their ids. */
async function submitAll(u: UpProcess, n: number): Promise<string[]> {
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
async function watchAll(u: UpProcess, ids: string[]): Promise<void> {
  const outcomes = await pool(ids, 4, (id) => run(['watch', id, '--remote', 'local', '--no-progress'], u.env));
  for (const [i, o] of outcomes.entries()) {
    expect(o.stdout.trim(), `${ids[i]}: ${o.stderr}`).toBe('completed');
    expect(o.code).toBe(0);
  }
  // Exactly once: one end in each request's history, read again from its first event.
  const client = await schedulerClient(u);
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
async function waitForScheduler(u: UpProcess): Promise<void> {
  await waitFor(async () => {
    const client = await schedulerClient(u, 2_000);
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

  it('sqlite, one scheduler: diffmesh watch started while the scheduler is down waits for it, saying so, and completes once it is back', async () => {
    const u = await up(['--queue', 'sqlite']);
    const [id] = await submitAll(u, 1);
    const state = await u.state();
    const address = state.schedulerAddresses[0];
    // The supervisor (diffmesh up) is paused while the scheduler is killed, so the scheduler
    // stays down until the watch has said it is waiting: no race with a fast restart.
    process.kill(u.proc.pid!, 'SIGSTOP');
    let stdout = '';
    let stderr = '';
    let exited: Promise<number | null> = Promise.resolve(null);
    try {
      process.kill(state.processes.find((p) => p.name === 'scheduler')!.pid, 'SIGKILL');
      const watch = spawn(process.execPath, [BIN, 'watch', id, '--remote', 'local', '--no-progress'], { env: u.env });
      watch.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      watch.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      exited = new Promise((resolve) => watch.once('exit', resolve));
      await waitFor(() => stderr.includes('waiting for the scheduler'), 60_000);
    } finally {
      process.kill(u.proc.pid!, 'SIGCONT');
    }
    const code = await exited;
    expect(stderr).toContain(`diffmesh: waiting for the scheduler at ${address} (connection refused)`);
    expect(stdout.trim(), stderr).toBe('completed');
    expect(code).toBe(0);
    expect((await u.state()).processes.find((p) => p.name === 'scheduler')?.restarts).toBe(1);
  }, 300_000);
});
