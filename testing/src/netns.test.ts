import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createNodeNetwork, netnsSupport, type NodeNetwork } from './netns.js';
import { Supervisor } from './supervisor.js';

const run = promisify(execFile);
const support = await netnsSupport();
if (!support.available) console.warn(`network-namespace tests skipped: ${support.reason}`);

/** Listens on --listen, answers every connection with the name of its node's address, prints its ready line. */
const SERVER = `
import { createServer } from 'node:net';
const i = process.argv.indexOf('--listen');
const [host, port] = process.argv[i + 1].split(':');
const server = createServer((s) => s.end('hello from ' + host)).listen(Number(port), host, () => {
  process.stdout.write('server listening on ' + host + ':' + server.address().port + '\\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;

/** Connects to argv[2]:argv[3] and prints what it reads. */
const CLIENT = `
import { connect } from 'node:net';
const s = connect(Number(process.argv[3]), process.argv[2]);
let got = '';
s.on('data', (d) => (got += d));
s.on('end', () => { process.stdout.write(got); process.exit(0); });
s.on('error', (e) => { process.stdout.write('error ' + e.code); process.exit(1); });
`;

function read(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, host);
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString()));
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
}

function output(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', () => resolve(out));
  });
}

describe.skipIf(!support.available)(`network-namespace nodes${support.available ? '' : ` (skipped: ${support.reason})`}`, () => {
  let net: NodeNetwork | undefined;
  let dir = '';
  afterAll(async () => {
    await net?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('joins nodes and this process on one subnet, runs supervised processes inside a node, kills them all, and deletes everything', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-netns-'));
    const server = path.join(dir, 'server.mjs');
    const client = path.join(dir, 'client.mjs');
    await writeFile(server, SERVER);
    await writeFile(client, CLIENT);
    net = await createNodeNetwork({ nodes: 2 });
    const [n1, n2] = net.nodes;
    expect(n1.address).not.toBe(n2.address);
    expect(net.subnet).toMatch(/^10\.213\.\d+\.0\/24$/);

    // A supervised process in node1, listening on node1's address only.
    const supervisor = new Supervisor();
    const proc = await supervisor.start({
      name: 'server',
      entry: server,
      args: ['--listen', `${n1.address}:0`],
      readyPrefix: 'server listening on ',
      launcher: n1.launcher,
    });
    const port = Number(proc.address.split(':')[1]);
    expect(await n1.pids()).toContain(proc.pid);
    // Reached from this namespace (through the host link and the bridge) and from node2.
    expect(await read(n1.address, port)).toBe(`hello from ${n1.address}`);
    const fromNode2 = n2.spawn(process.execPath, [client, n1.address, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
    expect(await output(fromNode2)).toBe(`hello from ${n1.address}`);
    // node2's loopback is its own: nothing listens there.
    const loop = n2.spawn(process.execPath, [client, '127.0.0.1', String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
    expect(await output(loop)).toBe('error ECONNREFUSED');

    // A node that dies: every process inside is killed.
    const exited = proc.exited;
    expect(await n1.killAll()).toEqual([proc.pid]);
    expect(await exited).toBe('SIGKILL');
    expect(await n1.pids()).toEqual([]);
    await supervisor.stopAll();

    // A second process keeps running until destroy() kills it with its node.
    const sleeper = n2.spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000); console.log("up")'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    await new Promise<void>((resolve) => createInterface({ input: sleeper.stdout! }).once('line', () => resolve()));
    const gone = new Promise((resolve) => sleeper.once('exit', (_code, signal) => resolve(signal)));
    const hostLink = (await run('ip', ['-o', 'addr', 'show', 'to', net.subnet])).stdout;
    expect(hostLink).toContain(net.hostAddress);
    await net.destroy();
    expect(await gone).toBe('SIGKILL');
    const names = (await run('ip', ['netns', 'list'])).stdout;
    for (const ns of [net.fabric, n1.netns, n2.netns]) expect(names).not.toContain(ns);
    expect((await run('ip', ['-o', 'addr', 'show', 'to', net.subnet])).stdout).toBe('');
    expect((await run('ip', ['-4', 'route', 'show', net.subnet])).stdout).toBe('');
  });
});
