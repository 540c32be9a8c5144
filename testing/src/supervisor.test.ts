import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Supervisor, type SupervisorEvent } from './supervisor.js';

/**
 * A fake service: listens on --listen (port 0 = any), prints its ready line with the address,
 * and exits after --live-ms when given.
 */
const SERVICE = `
import { createServer } from 'node:net';
const arg = (name) => { const i = process.argv.indexOf(name); return i === -1 ? undefined : process.argv[i + 1]; };
const [host, port] = (arg('--listen') ?? '127.0.0.1:0').split(':');
const server = createServer().listen(Number(port), host, () => {
  process.stdout.write('fake listening on ' + host + ':' + server.address().port + '\\n');
  const live = arg('--live-ms');
  if (live) setTimeout(() => process.exit(3), Number(live));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;

let dir = '';
const supervisors: Supervisor[] = [];
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stopAll(2000);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function setup(opts: ConstructorParameters<typeof Supervisor>[0]): Promise<{ s: Supervisor; entry: string }> {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-supervisor-'));
  const entry = path.join(dir, 'fake.mjs');
  await writeFile(entry, SERVICE);
  const s = new Supervisor(opts);
  supervisors.push(s);
  return { s, entry };
}

describe('Supervisor', () => {
  it('restarts a process that was killed, on the address it first listened on, and counts it', async () => {
    const events: SupervisorEvent[] = [];
    const { s, entry } = await setup({ restart: { initialBackoffMs: 50 }, onEvent: (e) => events.push(e) });
    const p = await s.start({
      name: 'fake',
      entry,
      args: ['--listen', '127.0.0.1:0'],
      readyPrefix: 'fake listening on ',
      listenFlag: '--listen',
    });
    const { address, pid } = p;
    expect(s.kill('fake', 'SIGKILL')).toBe(true);
    await expect.poll(() => p.restarts, { timeout: 10_000 }).toBe(1);
    expect(p.state).toBe('running');
    expect(p.pid).not.toBe(pid);
    expect(p.address).toBe(address);
    expect(events.map((e) => e.type)).toEqual(['exited', 'restarted']);
    expect(events[0]).toMatchObject({ name: 'fake', how: 'SIGKILL', restartInMs: 50, restarts: 0 });
    // Stopped on purpose: not restarted.
    await s.stop('fake');
    await new Promise((r) => setTimeout(r, 200));
    expect(p.state).toBe('stopped');
    expect(s.get('fake')).toBeUndefined();
    expect(p.restarts).toBe(1);
  });

  it('backs off, doubling, while a process keeps dying', async () => {
    const events: SupervisorEvent[] = [];
    const { s, entry } = await setup({ restart: { initialBackoffMs: 50, maxBackoffMs: 150 }, onEvent: (e) => events.push(e) });
    await s.start({ name: 'flaky', entry, args: ['--live-ms', '20'], readyPrefix: 'fake listening on ' });
    await expect.poll(() => events.filter((e) => e.type === 'exited').length, { timeout: 15_000 }).toBeGreaterThanOrEqual(4);
    const delays = events.filter((e) => e.type === 'exited').map((e) => (e as { restartInMs?: number }).restartInMs);
    expect(delays.slice(0, 4)).toEqual([50, 100, 150, 150]);
    await s.stop('flaky');
  });

  it('without a restart policy, reports the exit and leaves the process stopped', async () => {
    const events: SupervisorEvent[] = [];
    const { s, entry } = await setup({ onEvent: (e) => events.push(e) });
    const p = await s.start({ name: 'once', entry, args: ['--live-ms', '20'], readyPrefix: 'fake listening on ' });
    await expect.poll(() => p.state, { timeout: 10_000 }).toBe('stopped');
    expect(events).toEqual([{ type: 'exited', name: 'once', how: 3, restarts: 0 }]);
  });
});
