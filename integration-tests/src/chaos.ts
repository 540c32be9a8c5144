/**
 * The chaos suite: a mesh with a durable queue, several schedulers and several workers per
 * stage, all supervised (restarted when they die), under a steady load of requests, while
 * stage workers are killed with SIGKILL, a scheduler is killed (and restarted), and
 * tensor-svc is restarted. Every request is followed by id, re-attaching on any scheduler
 * when a stream breaks. It counts what happened to each: no accepted request may be lost,
 * none may complete twice.
 */
import { randomUUID } from 'node:crypto';
import { defaultModelsRoot } from '@diffmesh/models';
import { startLocalMesh, type LocalMesh } from '@diffmesh/cli';
import type { RequestEvent__Output, SubmitRequest } from '@diffmesh/protos';
import { SchedulerClient } from '@diffmesh/client';
import { Code, fromWire, paramsToWire, silentLogger, type Logger } from '@diffmesh/core';

/** Durable backends the suite runs against. */
export const CHAOS_BACKENDS = ['sqlite', 'redis', 'jetstream'] as const;
export type ChaosBackend = (typeof CHAOS_BACKENDS)[number];

export interface ChaosOptions {
  backend: ChaosBackend;
  /** Requests to send (default 24). */
  requests?: number;
  /** Requests sent per second (default 4). */
  ratePerSecond?: number;
  /** Most faults injected (default 6), one every `faultEveryMs` (default 2000). */
  faults?: number;
  faultEveryMs?: number;
  /** The run gives up waiting for requests after this long (default 150 s): what is left is lost. */
  timeLimitMs?: number;
  /** Denoising steps per request (default 8: short requests, many in flight). */
  steps?: number;
  /** Random seed of the fault schedule (default: random). */
  seed?: number;
  log?: Logger;
  /** Progress lines (faults as they happen). */
  onLine?: (line: string) => void;
}

/** What happened to followed requests (see {@link countOutcomes}). */
export interface Outcomes {
  submitted: number;
  completed: number;
  failed: Record<string, number>;
  lost: number;
  duplicated: number;
  /** Requests the client could not get accepted at all (every scheduler refused); not counted as submitted. */
  refused: number;
}

export interface ChaosReport extends Outcomes {
  backend: ChaosBackend;
  faults: string[];
  restarts: Record<string, number>;
  seconds: number;
}

/** The line `npm run chaos` and the test print. */
export function formatReport(r: ChaosReport): string {
  const failed = Object.entries(r.failed);
  const failedText =
    failed.length === 0 ? '0' : `${failed.reduce((n, [, c]) => n + c, 0)} (${failed.map(([k, c]) => `${k} ${c}`).join(', ')})`;
  return (
    `chaos ${r.backend}: submitted ${r.submitted} / completed ${r.completed} / failed ${failedText} / lost ${r.lost} / duplicated ${r.duplicated}` +
    ` — ${r.faults.length} faults (${r.faults.join(', ')}), ${r.seconds.toFixed(0)} s`
  );
}

/** A small deterministic generator for the fault schedule. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A request's end: its kind, with the result's object ids for a completed one, the reason for a failed one. */
export interface RequestEnd {
  type: 'completed' | 'failed' | 'cancelled';
  result?: string;
  reason?: string;
}

/** A request followed by {@link followRequest}. */
export interface Tracked {
  id: string;
  /** Submit answered: the request is the mesh's to finish. */
  accepted: boolean;
  /** Ends seen while following it. */
  ends: RequestEnd[];
  /** Ends in its whole history, read again from its first event once it ended (undefined when that read failed). */
  history?: RequestEnd[];
  done: boolean;
}

/**
 * Counts followed requests: not accepted (refused), ended (by their first end), lost (no end
 * seen), duplicated (more than one end in the history read again, or ends that disagree).
 */
export function countOutcomes(tracked: Tracked[]): Outcomes {
  const accepted = tracked.filter((t) => t.accepted);
  const failed: Record<string, number> = {};
  let completed = 0;
  let lost = 0;
  let duplicated = 0;
  for (const t of accepted) {
    const all = [...t.ends, ...(t.history ?? [])];
    const kinds = new Set(all.map((e) => `${e.type}:${e.result ?? e.reason ?? ''}`));
    if (kinds.size > 1 || (t.history?.length ?? 0) > 1) duplicated += 1;
    const end = all[0];
    if (!end) lost += 1;
    else if (end.type === 'completed') completed += 1;
    else {
      const key = end.type === 'failed' ? (end.reason ?? 'UNKNOWN') : 'CANCELLED';
      failed[key] = (failed[key] ?? 0) + 1;
    }
  }
  return { submitted: accepted.length, completed, failed, lost, duplicated, refused: tracked.length - accepted.length };
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? silentLogger();
  const line = opts.onLine ?? (() => undefined);
  const requests = opts.requests ?? 24;
  const rate = opts.ratePerSecond ?? 4;
  const maxFaults = opts.faults ?? 6;
  const faultEveryMs = opts.faultEveryMs ?? 2000;
  const timeLimitMs = opts.timeLimitMs ?? 150_000;
  const random = rng(opts.seed ?? Math.floor(Math.random() * 2 ** 31));
  const started = Date.now();
  const mesh: LocalMesh = await startLocalMesh({
    modelsDirs: [defaultModelsRoot()],
    models: ['diffmesh/tiny-shapes'],
    threads: 1,
    log,
    queue: opts.backend,
    leaseMs: 3000,
    replicas: { scheduler: 2, 'encoder-svc': 2, 'dit-svc': 2, 'vae-svc': 2 },
    restart: { initialBackoffMs: 300, maxBackoffMs: 3000 },
    schedulerArgs: ['--max-attempts', '6', '--retry-backoff-ms', '250', '--stranded-timeout-ms', '60000'],
    onEvent: (e) => {
      if (e.type === 'restarted') line(`  ${e.name} restarted (restart ${e.restarts})`);
    },
  });
  const client = new SchedulerClient({ addresses: mesh.schedulerAddresses, reattachTimeoutMs: 30_000, log });
  const tracked: Tracked[] = [];
  const faults: string[] = [];
  let restarts: Record<string, number> = {};
  try {
    // Load: requests at a steady rate, each followed to its end.
    const followers: Array<Promise<void>> = [];
    let loading = true;
    const load = (async () => {
      for (let i = 0; i < requests; i += 1) {
        const t: Tracked = { id: `chaos-${randomUUID()}`, accepted: false, ends: [], done: false };
        tracked.push(t);
        const params = paramsToWire({
          prompt: `a ${['red', 'green', 'blue', 'yellow'][i % 4]} circle on a gray background`,
          numInferenceSteps: opts.steps ?? 8,
          seed: String(i + 1),
        });
        followers.push(
          followRequest(client, t, { model: 'diffmesh/tiny-shapes', params, priority: 0 }, started + timeLimitMs).catch(() => undefined),
        );
        await sleep(1000 / rate);
      }
      loading = false;
    })();
    // Faults, while the load runs.
    const chaos = (async () => {
      await sleep(1500);
      while (faults.length < maxFaults && (loading || tracked.some((t) => !t.done)) && Date.now() - started < timeLimitMs) {
        const f = await inject(mesh, random, faults.length);
        if (f) {
          faults.push(f);
          line(`  fault ${faults.length}: ${f}`);
        }
        await sleep(faultEveryMs);
      }
    })();
    await load;
    await Promise.all([chaos, ...followers]);
  } finally {
    await client.close();
    restarts = Object.fromEntries(mesh.supervisor.processes.filter((p) => p.restarts > 0).map((p) => [p.name, p.restarts]));
    await mesh.stop();
  }
  return {
    backend: opts.backend,
    ...countOutcomes(tracked),
    faults,
    restarts,
    seconds: (Date.now() - started) / 1000,
  };
}

/** The end an event announces, if it is one. */
function endOf(e: RequestEvent__Output): RequestEnd | undefined {
  if (e.completed) return { type: 'completed', result: e.completed.results.map((r) => r.objectId).join(',') };
  if (e.failed) return { type: 'failed', reason: String(e.failed.error?.reason ?? 'UNKNOWN').replace(/^ERROR_REASON_/, '') };
  if (e.cancelled) return { type: 'cancelled' };
  return undefined;
}

/**
 * Submits a request under `t.id` (again after an error: a repeat attaches to the request)
 * and follows it to its end, re-attaching by id on any scheduler, until `deadline`; `onEvent`
 * sees each event once. At the end its whole history is read once more, from the first
 * event, into `t.history`: a second end in it (or a different result) is a duplicate.
 */
export async function followRequest(
  client: SchedulerClient,
  t: Tracked,
  request: Omit<SubmitRequest, 'requestId'>,
  deadline: number,
  onEvent?: (e: RequestEvent__Output) => void,
): Promise<void> {
  while (!t.accepted && Date.now() < deadline) {
    try {
      await client.submit({ ...request, requestId: t.id });
      t.accepted = true;
    } catch (err) {
      const e = fromWire(err);
      // Refused for good (a bad request): nothing was accepted.
      if (e.code === Code.INVALID_ARGUMENT || e.code === Code.NOT_FOUND) return;
      await sleep(500);
    }
  }
  let after = 0;
  while (!t.done && Date.now() < deadline) {
    try {
      for await (const e of client.watch(t.id, { afterSequence: after })) {
        if (e.sequence <= after) continue;
        after = e.sequence;
        onEvent?.(e);
        const end = endOf(e);
        if (end) t.ends.push(end);
        if (t.ends.length > 0) t.done = true;
      }
    } catch {
      await sleep(500);
    }
  }
  if (!t.done) return;
  // The whole history, read again from its first event (on whichever scheduler answers).
  for (let tries = 0; tries < 20; tries += 1) {
    try {
      const ends: RequestEnd[] = [];
      for await (const e of client.watch(t.id)) {
        const end = endOf(e);
        if (end) ends.push(end);
      }
      t.history = ends;
      return;
    } catch {
      await sleep(500);
    }
  }
}

/** Injects one fault: kills a stage worker, kills a scheduler, or restarts tensor-svc. */
async function inject(mesh: LocalMesh, random: () => number, n: number): Promise<string | undefined> {
  const running = mesh.supervisor.processes.filter((p) => p.state === 'running');
  const workers = running.filter((p) => /^(encoder|dit|vae)-svc-/.test(p.name));
  const schedulers = running.filter((p) => mesh.schedulers.includes(p.name));
  // The first three faults are one of each kind, then random ones.
  const kind =
    n < 3 ? (['worker', 'scheduler', 'tensor'] as const)[n] : random() < 0.6 ? 'worker' : random() < 0.5 ? 'scheduler' : 'tensor';
  if (kind === 'worker' && workers.length > 0) {
    const p = workers[Math.floor(random() * workers.length)];
    mesh.supervisor.kill(p.name, 'SIGKILL');
    return `SIGKILL ${p.name}`;
  }
  if (kind === 'scheduler' && schedulers.length > 1) {
    const p = schedulers[Math.floor(random() * schedulers.length)];
    mesh.supervisor.kill(p.name, 'SIGKILL');
    return `SIGKILL ${p.name}`;
  }
  if (kind === 'tensor' && running.some((p) => p.name === 'tensor-svc')) {
    mesh.supervisor.kill('tensor-svc', 'SIGTERM');
    return 'restart tensor-svc';
  }
  await sleep(0);
  return undefined;
}
