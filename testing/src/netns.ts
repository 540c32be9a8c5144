/**
 * Several "nodes" on one Linux machine: each node is a network namespace with its own network
 * stack, loopback and private address, joined to the others by a veth link into a bridge. The
 * bridge lives in a namespace of its own (the "fabric"), so the machine's own namespace gets
 * one veth link and nothing else: its end has an address on the nodes' subnet, which lets
 * this process (and servers it starts, such as nats-server) reach every node and be reached
 * from them. Traffic between nodes crosses two veth pairs and the bridge, a real network
 * stack (without emulated latency or loss).
 *
 * ```
 *   this namespace            fabric namespace            node namespaces
 *   dm…h 10.213.S.1/24 ──veth── host ┐
 *                                    ├ br0 ── n1 ──veth── eth0 10.213.S.11/24 (node1)
 *                                    └────── n2 ──veth── eth0 10.213.S.12/24 (node2) …
 * ```
 *
 * Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2's `ip`; {@link netnsSupport} says
 * whether both are here, so tests can skip with the reason. Every namespace and link has a
 * random suffix, and {@link NodeNetwork.destroy} (also run when this process exits) kills the
 * processes inside the namespaces and deletes them with their links.
 */
import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { silentLogger, type Logger } from '@diffmesh/core';
import { findBinary } from './find-binary.js';

const run = promisify(execFile);

/** Whether nodes can be made here, and if not, why. */
export interface NetnsSupport {
  available: boolean;
  /** Why not (empty when available): not Linux, not root, no `ip`, or the kernel refused. */
  reason: string;
}

/** One node: a network namespace with its own address. */
export interface NetnsNode {
  /** `node1`, `node2`, … */
  name: string;
  /** The namespace's name (`ip netns exec <netns> …`). */
  netns: string;
  /** The node's IPv4 address on the fabric. */
  address: string;
  /** Prefix that runs a command inside the node: `[ip, netns, exec, <netns>]` (the command keeps its pid). */
  launcher: string[];
  /** Starts `command args` inside the node. */
  spawn(command: string, args: string[], options?: SpawnOptions): ChildProcess;
  /** Every process inside the node's namespace (`ip netns pids`). */
  pids(): Promise<number[]>;
  /** Sends `signal` (default SIGKILL) to every process inside the node, as a node that dies; resolves with their pids. */
  killAll(signal?: NodeJS.Signals): Promise<number[]>;
}

/** Nodes joined by veth links, see the module comment. */
export interface NodeNetwork {
  nodes: NetnsNode[];
  /** This namespace's address on the fabric: servers started here bind it to be reachable from every node. */
  hostAddress: string;
  /** The nodes' subnet, e.g. `10.213.42.0/24`. */
  subnet: string;
  /** The fabric namespace (holds the bridge). */
  fabric: string;
  /** Kills what runs in the namespaces and deletes them and their links. Idempotent. */
  destroy(): Promise<void>;
}

export interface CreateNodeNetworkOptions {
  /** How many nodes (1–200). */
  nodes: number;
  /** Binary of iproute2 (default `ip`, looked up on PATH and in the system folders). */
  ip?: string;
  log?: Logger;
}

let support: Promise<NetnsSupport> | undefined;

/**
 * Whether {@link createNodeNetwork} can work here: Linux, root, `ip` found, and the kernel
 * lets this process create a namespace with a bridge and a veth pair (tried in a namespace
 * of its own that is deleted again). Cached for the process.
 */
export function netnsSupport(): Promise<NetnsSupport> {
  support ??= probe();
  return support;
}

async function probe(): Promise<NetnsSupport> {
  const no = (reason: string): NetnsSupport => ({ available: false, reason });
  if (process.platform !== 'linux') return no(`network namespaces need Linux (this is ${process.platform})`);
  if (process.getuid?.() !== 0) return no('not root: creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)');
  const ip = await findBinary('ip');
  if (!ip) return no('no `ip` binary on PATH or in the system folders (install iproute2)');
  const ns = `dm-probe-${randomBytes(4).toString('hex')}`;
  try {
    await run(ip, ['netns', 'add', ns]);
  } catch (err) {
    return no(`network namespace creation refused: ${errorText(err)}`);
  }
  try {
    await run(ip, ['-n', ns, 'link', 'add', 'br0', 'type', 'bridge']);
    await run(ip, ['-n', ns, 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1']);
    return { available: true, reason: '' };
  } catch (err) {
    return no(`bridge or veth links refused inside a network namespace: ${errorText(err)}`);
  } finally {
    await run(ip, ['netns', 'del', ns]).catch(() => undefined);
  }
}

function errorText(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return (e.stderr || e.message || String(err)).trim().split('\n')[0];
}

/** A /24 under 10.213/16 that this namespace has no address or route in. */
async function freeSubnet(ip: string): Promise<number> {
  const { stdout } = await run(ip, ['-4', '-o', 'route', 'show', 'table', 'all']);
  const { stdout: addrs } = await run(ip, ['-4', '-o', 'addr', 'show']);
  const used = new Set<number>();
  for (const m of `${stdout}\n${addrs}`.matchAll(/\b10\.213\.(\d+)\./g)) used.add(Number(m[1]));
  // A route for all of 10.213/16 means the machine uses it: no /24 of it is ours to take.
  if (/\b10\.213\.0\.0\/16\b/.test(stdout)) used.add(-1);
  const free = Array.from({ length: 254 }, (_, i) => i + 1).filter((s) => !used.has(s));
  if (free.length === 0 || used.has(-1)) throw new Error('createNodeNetwork: no free /24 under 10.213.0.0/16 on this machine');
  return free[Math.floor(Math.random() * free.length)];
}

/**
 * Creates `nodes` node namespaces, each with an address on a fresh 10.213.S.0/24, joined by
 * veth links to a bridge in a fabric namespace, and a veth link from this namespace to the
 * bridge (address 10.213.S.1). Tears down whatever it made when any step fails.
 */
export async function createNodeNetwork(opts: CreateNodeNetworkOptions): Promise<NodeNetwork> {
  const log = opts.log ?? silentLogger();
  const count = opts.nodes;
  if (!Number.isInteger(count) || count < 1 || count > 200) throw new RangeError(`createNodeNetwork: nodes must be 1–200 (got ${count})`);
  const ok = await netnsSupport();
  if (!ok.available) throw new Error(`createNodeNetwork: ${ok.reason}`);
  const ip = (await findBinary(opts.ip ?? 'ip')) ?? 'ip';
  const suffix = randomBytes(3).toString('hex');
  const fabric = `dm-${suffix}-fabric`;
  const hostLink = `dm${suffix}h`;
  const created: string[] = [];
  const ipc = (...args: string[]): Promise<unknown> => run(ip, args);

  /** Every process in `ns`. */
  const pidsOf = async (ns: string): Promise<number[]> => {
    const { stdout } = await run(ip, ['netns', 'pids', ns]).catch(() => ({ stdout: '' }));
    return stdout
      .split(/\s+/)
      .filter((s) => /^\d+$/.test(s))
      .map(Number);
  };
  const killAll = async (ns: string, signal: NodeJS.Signals): Promise<number[]> => {
    const pids = await pidsOf(ns);
    for (const pid of pids) {
      try {
        process.kill(pid, signal);
      } catch {
        // Gone already.
      }
    }
    return pids;
  };

  let destroying: Promise<void> | undefined;
  const destroySync = (): void => {
    for (const ns of [...created].reverse()) {
      try {
        const out = execFileSync(ip, ['netns', 'pids', ns], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
        for (const pid of out.split(/\s+/).filter((s) => /^\d+$/.test(s))) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // Gone already.
          }
        }
        execFileSync(ip, ['netns', 'del', ns], { stdio: 'ignore' });
      } catch {
        // Deleted already.
      }
    }
    try {
      execFileSync(ip, ['link', 'del', hostLink], { stdio: 'ignore' });
    } catch {
      // Went with the fabric.
    }
  };
  process.once('exit', destroySync);
  const destroy = (): Promise<void> => {
    destroying ??= (async () => {
      for (const ns of [...created].reverse()) {
        await killAll(ns, 'SIGKILL');
        // A process still inside keeps the namespace alive past `del`: wait for them to go.
        for (let i = 0; i < 50 && (await pidsOf(ns)).length > 0; i += 1) await new Promise((r) => setTimeout(r, 20));
        await ipc('netns', 'del', ns).catch((err: unknown) => log.warn({ ns, err: errorText(err) }, 'could not delete network namespace'));
      }
      // Deleting the fabric deletes the peer of the host link, but the kernel does so later:
      // delete it now so that the subnet's route goes at once.
      await ipc('link', 'del', hostLink).catch(() => undefined);
      process.removeListener('exit', destroySync);
      log.debug({ fabric }, 'node network deleted');
    })();
    return destroying;
  };

  try {
    const s = await freeSubnet(ip);
    const subnet = `10.213.${s}.0/24`;
    const hostAddress = `10.213.${s}.1`;
    await ipc('netns', 'add', fabric);
    created.push(fabric);
    await ipc('-n', fabric, 'link', 'add', 'br0', 'type', 'bridge');
    await ipc('-n', fabric, 'link', 'set', 'br0', 'up');
    // The host's link: one end here with the subnet's first address, the other on the bridge.
    await ipc('link', 'add', hostLink, 'type', 'veth', 'peer', 'name', 'host', 'netns', fabric);
    await ipc('-n', fabric, 'link', 'set', 'host', 'master', 'br0', 'up');
    await ipc('addr', 'add', `${hostAddress}/24`, 'dev', hostLink);
    await ipc('link', 'set', hostLink, 'up');
    const nodes: NetnsNode[] = [];
    for (let i = 1; i <= count; i += 1) {
      const name = `node${i}`;
      const ns = `dm-${suffix}-${name}`;
      const address = `10.213.${s}.${10 + i}`;
      await ipc('netns', 'add', ns);
      created.push(ns);
      await ipc('-n', fabric, 'link', 'add', `n${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
      await ipc('-n', fabric, 'link', 'set', `n${i}`, 'master', 'br0', 'up');
      await ipc('-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
      await ipc('-n', ns, 'link', 'set', 'eth0', 'up');
      await ipc('-n', ns, 'link', 'set', 'lo', 'up');
      const launcher = [ip, 'netns', 'exec', ns];
      nodes.push({
        name,
        netns: ns,
        address,
        launcher,
        spawn: (command, args, options = {}) => spawn(launcher[0], [...launcher.slice(1), command, ...args], options),
        pids: () => pidsOf(ns),
        killAll: (signal = 'SIGKILL') => killAll(ns, signal),
      });
    }
    log.info({ subnet, fabric, nodes: nodes.map((n) => `${n.name}=${n.address}`) }, 'node network created');
    return { nodes, hostAddress, subnet, fabric, destroy };
  } catch (err) {
    await destroy();
    throw err;
  }
}
