/**
 * (d) What each queue backend costs per request: the scheduler section's 3-stage no-op plan
 * (every service its own process, gRPC on loopback), once per backend, side by side with
 * the in-process memory store, in one run.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SchedulerSession, schedulerStub } from '@diffmesh/client';
import { silentLogger } from '@diffmesh/core';
import { createDiscovery } from '@diffmesh/discovery';
import { Supervisor, startNatsServer, startRedisServer, type RunningRedisServer } from '@diffmesh/testing';
import { cpuSnapshot, NOOP_TASKS_PER_REQUEST, pct, startNoopPlan, timedSessionRequest, type WarmupOptions } from './mesh.js';

export const QUEUE_BACKENDS = ['memory', 'sqlite', 'redis', 'jetstream'] as const;
export type QueueBackend = (typeof QUEUE_BACKENDS)[number];

export interface QueueRow {
  backend: QueueBackend;
  /** 1 client: p50 and p99 ms. */
  p50: number;
  p99: number;
  /** 8 clients: requests per second, and p50 ms. */
  perSecond: number;
  p50At8: number;
  /** CPU ms per request (8 clients) of the scheduler and of the store's server (redis-server, nats-server). */
  schedulerCpuMs?: number;
  /** The scheduler's CPU ms per request over the plan's tasks (3 stages: 3 tasks a request). */
  schedulerCpuMsPerTask?: number;
  serverCpuMs?: number;
}

/** Runs the no-op plan through a scheduler on each backend in turn. */
export async function runQueueBackends(
  requests = 300,
  backends: readonly QueueBackend[] = QUEUE_BACKENDS,
  opts: WarmupOptions = {},
): Promise<QueueRow[]> {
  const rows: QueueRow[] = [];
  for (const backend of backends) {
    process.stderr.write(`queues: ${backend}…\n`);
    rows.push(await runOne(backend, requests, opts.warmupPerClient ?? 100));
  }
  return rows;
}

async function runOne(backend: QueueBackend, requests: number, warmup: number): Promise<QueueRow> {
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-bench-queue-'));
  const log = silentLogger();
  const nats = await startNatsServer({ log, jetstream: backend === 'jetstream' });
  let redis: RunningRedisServer | undefined;
  const supervisor = new Supervisor({ logPath: (n) => path.join(dir, `${n}.log`) });
  const discovery = await createDiscovery({ backend: 'nats', url: nats.url }, log);
  try {
    if (backend === 'redis') redis = await startRedisServer({ log });
    const queueArgs =
      backend === 'memory'
        ? []
        : backend === 'sqlite'
          ? ['--queue', 'sqlite', '--sqlite-path', path.join(dir, 'scheduler.sqlite')]
          : ['--queue', backend, '--queue-url', backend === 'redis' ? redis!.url : nats.url];
    const { sched } = await startNoopPlan(supervisor, discovery, nats.url, dir, queueArgs);
    process.stderr.write(`queues: ${backend}: scheduler pid ${sched.pid}\n`);
    const pids: Record<string, number> = {
      scheduler: sched.pid,
      ...(redis ? { server: redis.pid } : backend === 'jetstream' ? { server: nats.pid } : {}),
    };
    const client = schedulerStub(sched.address);
    const session = new SchedulerSession(client);
    const run = (): Promise<number> => timedSessionRequest(session, 'bench/noop', { prompt: 'noop' });
    // The scheduler attaches the stages just after they register: the first requests may wait.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < warmup; i += 1) await run();
      }),
    );
    const one: number[] = [];
    for (let i = 0; i < requests; i += 1) one.push(await run());
    one.sort((a, b) => a - b);
    const eight: number[] = [];
    const per = Math.ceil(requests / 8);
    const before = cpuSnapshot(pids);
    const start = performance.now();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < per; i += 1) eight.push(await run());
      }),
    );
    const elapsed = (performance.now() - start) / 1000;
    const after = cpuSnapshot(pids);
    eight.sort((a, b) => a - b);
    await session.close();
    client.close();
    const cpu = (name: string): number | undefined =>
      after[name] !== undefined && before[name] !== undefined ? (after[name] - before[name]) / eight.length : undefined;
    const schedulerCpuMs = cpu('scheduler');
    const serverCpuMs = cpu('server');
    return {
      backend,
      p50: pct(one, 50),
      p99: pct(one, 99),
      perSecond: eight.length / elapsed,
      p50At8: pct(eight, 50),
      ...(schedulerCpuMs !== undefined ? { schedulerCpuMs, schedulerCpuMsPerTask: schedulerCpuMs / NOOP_TASKS_PER_REQUEST } : {}),
      ...(serverCpuMs !== undefined ? { serverCpuMs } : {}),
    };
  } finally {
    await supervisor.stopAll(5000);
    await discovery.close();
    await nats.stop();
    await redis?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

export function formatQueueBackends(rows: QueueRow[]): string {
  const memory = rows.find((r) => r.backend === 'memory');
  const lines = [
    '(d) queue backends — the 3-stage no-op plan through one scheduler per backend (requests on a Session stream, send to completed event)',
    '    memory = in the scheduler process; sqlite = a file on this node; redis = a redis-server; jetstream = nats-server -js (loopback)',
    "    scheduler CPU ms/task = its CPU ms/request over the plan's 3 tasks (admission, events and the Session stream included); goal ≤ 0.5 on the durable queues",
    '    backend    1 client: p50 ms  p99 ms   8 clients: p50 ms  requests/s   vs memory: p50   requests/s   CPU ms/request: scheduler  store server   scheduler CPU ms/task',
    ...rows.map((r) => {
      const vs =
        memory && r !== memory
          ? `${(r.p50 / memory.p50).toFixed(2)}×`.padStart(6) + `${(r.perSecond / memory.perSecond).toFixed(2)}×`.padStart(13)
          : ''.padStart(19);
      return (
        `    ${r.backend.padEnd(9)}  ${r.p50.toFixed(2).padStart(16)}  ${r.p99.toFixed(2).padStart(6)}  ${r.p50At8.toFixed(2).padStart(18)}  ${r.perSecond.toFixed(0).padStart(10)}` +
        `   ${vs}   ${(r.schedulerCpuMs?.toFixed(2) ?? '-').padStart(24)}  ${(r.serverCpuMs?.toFixed(2) ?? '-').padStart(12)}` +
        `   ${(r.schedulerCpuMsPerTask?.toFixed(2) ?? '-').padStart(21)}`
      );
    }),
  ];
  return `${lines.join('\n')}\n`;
}
