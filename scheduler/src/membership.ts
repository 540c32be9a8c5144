import { STAGE_NAMES, type Logger, type StageName, type TlsFiles } from '@diffmesh/core';
import { type Discovery, type Instance } from '@diffmesh/discovery';
import { RemoteInstance } from './remote-instance.js';
import type { Scheduler } from './scheduler.js';

export interface MembershipOptions {
  log: Logger;
  tls?: TlsFiles;
  /** How long after a broken dispatch stream to look the instance up again. */
  recheckMs?: number;
}

function isStage(stage: string): stage is StageName {
  return (STAGE_NAMES as readonly string[]).includes(stage);
}

/**
 * Keeps the scheduler's instances in step with discovery: every stage instance that comes
 * up gets a dispatch stream; one that goes down (or whose stream breaks) is removed, and
 * its running tasks are retried elsewhere. Returns a function that stops following.
 *
 * An instance that only missed discovery's polls while its dispatch stream is open stays:
 * a process that is gone closes its connection (or stops answering the stream's keepalive
 * pings within 15 s), while one whose main thread was busy for a couple of seconds is still
 * there and still running its tasks. Dropping it would refuse its pool's requests (and
 * restart its tasks) until the next poll.
 */
export function followDiscovery(scheduler: Scheduler, discovery: Discovery, opts: MembershipOptions): () => void {
  const known = new Map<string, RemoteInstance>();
  /** Ids discovery reported down (missed polls) that were kept for their open stream. */
  const unanswered = new Set<string>();
  const recheckMs = opts.recheckMs ?? 1000;
  // An instance another scheduler holds is tried again less often (it is taken over when
  // the holder goes away).
  const heldRecheckMs = Math.max(recheckMs, 2000);
  let stopped = false;

  // Instances whose stream broke or was refused, looked at again until they are back or
  // discovery says they are gone: a worker restarted under its id (by a supervisor) may
  // register again before discovery noticed it was away, so no event announces it.
  const lost = new Set<string>();
  // Rechecks due together (instances lost together, e.g. a worker host's) share one listing.
  let listing: Promise<Instance[]> | undefined;
  const list = (): Promise<Instance[]> =>
    (listing ??= discovery.instances().finally(() => {
      listing = undefined;
    }));
  const recheck = (id: string, afterMs: number): void => {
    lost.add(id);
    setTimeout(() => {
      if (stopped || !lost.has(id)) return;
      void list()
        .then((all) => {
          const found = all.filter((x) => x.id === id);
          if (found.length === 0) recheck(id, afterMs);
          found.forEach(add);
        })
        .catch(() => recheck(id, afterMs));
    }, afterMs).unref();
  };

  const add = (i: Instance): void => {
    // One the scheduler closed (removed it) is looked at again when discovery still shows it.
    const current = known.get(i.id);
    if (stopped || (current && !current.isGone()) || !isStage(i.stage) || !i.grpcAddress) return;
    const info = {
      id: i.id,
      pool: i.pool,
      stage: i.stage,
      nodeId: i.nodeId,
      version: i.version,
      capacity: i.capacity,
      models: i.models,
      grpcAddress: i.grpcAddress,
    };
    const remote = new RemoteInstance({
      info,
      log: opts.log,
      ...(opts.tls ? { tls: opts.tls } : {}),
      exclusive: scheduler.requests.durable,
      onGone: (id) => {
        if (known.get(id) !== remote) return;
        known.delete(id);
        scheduler.removeInstance(id);
        if (remote.isHeldElsewhere()) {
          // Another scheduler dispatches to it. With a shared store its pool is served all
          // the same (that scheduler takes this one's tasks from the queue); with the memory
          // store it is of no use here.
          if (scheduler.requests.durable) scheduler.addForeignInstance({ ...info, address: info.grpcAddress });
          recheck(id, heldRecheckMs);
          return;
        }
        // Discovery already lost it, and now its stream broke too: it is gone.
        if (unanswered.delete(id)) return;
        // The process may still be there (a transient break): look again shortly.
        recheck(id, recheckMs);
      },
    });
    known.set(i.id, remote);
    // Until its stream is answered it counts as serving its pool (admission accepts work for
    // it, which waits for it); it gets work once it has answered (another scheduler may hold it).
    if (!scheduler.instances(i.pool).some((s) => s.instance.id === i.id))
      scheduler.addForeignInstance({ ...info, address: info.grpcAddress });
    void remote.attached.then((how) => {
      if (how === 'lost' || (how === 'held' && !scheduler.requests.durable)) scheduler.removeForeignInstance(i.id);
      if (how !== 'ready' || known.get(i.id) !== remote || stopped) return;
      lost.delete(i.id);
      scheduler.removeForeignInstance(i.id);
      scheduler.addInstance(remote);
      opts.log.info({ instance: i.id, pool: i.pool, stage: i.stage, version: i.version, address: i.grpcAddress }, 'stage instance up');
    });
  };

  // A registration that goes away is draining (or dead): no new work; running tasks finish,
  // or fail over when its connection breaks.
  const remove = (id: string): void => {
    lost.delete(id);
    scheduler.removeForeignInstance(id);
    const remote = known.get(id);
    if (!remote) return;
    known.delete(id);
    scheduler.retireInstance(id);
    // One that never became ready is not in the scheduler: close its stream here.
    void remote.attached.then((how) => {
      if (how !== 'ready') remote.close();
    });
    opts.log.info({ instance: id }, 'stage instance down');
  };

  const unsubscribe = discovery.subscribe(
    (e) => {
      if (e.type === 'down') {
        const remote = known.get(e.instance.id);
        // Its stream is open and answered when the scheduler dispatches to it.
        const dispatching = remote !== undefined && !remote.isGone() && scheduler.instances(remote.pool).some((s) => s.instance === remote);
        if (e.why === 'unanswered' && dispatching) {
          unanswered.add(e.instance.id);
          opts.log.warn(
            { instance: e.instance.id, pool: e.instance.pool },
            'stage instance missed discovery polls but its dispatch stream is open; keeping it (the stream decides)',
          );
          return;
        }
        unanswered.delete(e.instance.id);
        remove(e.instance.id);
      } else {
        unanswered.delete(e.instance.id);
        add(e.instance);
      }
    },
    { replay: true },
  );
  return () => {
    stopped = true;
    unsubscribe();
    for (const id of [...known.keys()]) remove(id);
  };
}
