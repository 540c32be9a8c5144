import { STAGE_NAMES, type Discovery, type Instance, type Logger, type StageName, type TlsFiles } from '@diffmesh/runtime';
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
 */
export function followDiscovery(scheduler: Scheduler, discovery: Discovery, opts: MembershipOptions): () => void {
  const known = new Map<string, RemoteInstance>();
  const recheckMs = opts.recheckMs ?? 1000;
  let stopped = false;

  const add = (i: Instance): void => {
    // One the scheduler closed (removed it) is looked at again when discovery still shows it.
    const current = known.get(i.id);
    if (stopped || (current && !current.isGone()) || !isStage(i.stage) || !i.grpcAddress) return;
    const remote = new RemoteInstance({
      info: {
        id: i.id,
        pool: i.pool,
        stage: i.stage,
        nodeId: i.nodeId,
        version: i.version,
        capacity: i.capacity,
        models: i.models,
        grpcAddress: i.grpcAddress,
      },
      log: opts.log,
      ...(opts.tls ? { tls: opts.tls } : {}),
      onGone: (id) => {
        if (known.get(id) !== remote) return;
        known.delete(id);
        scheduler.removeInstance(id);
        // The process may still be there (a transient break): look again shortly.
        setTimeout(() => {
          void discovery
            .instances()
            .then((all) => all.filter((x) => x.id === id).forEach(add))
            .catch(() => undefined);
        }, recheckMs).unref();
      },
    });
    known.set(i.id, remote);
    scheduler.addInstance(remote);
    opts.log.info({ instance: i.id, pool: i.pool, stage: i.stage, version: i.version, address: i.grpcAddress }, 'stage instance up');
  };

  // A registration that goes away is draining (or dead): no new work; running tasks finish,
  // or fail over when its connection breaks.
  const remove = (id: string): void => {
    if (!known.delete(id)) return;
    scheduler.retireInstance(id);
    opts.log.info({ instance: id }, 'stage instance down');
  };

  const unsubscribe = discovery.subscribe(
    (e) => {
      if (e.type === 'down') remove(e.instance.id);
      else add(e.instance);
    },
    { replay: true },
  );
  return () => {
    stopped = true;
    unsubscribe();
    for (const id of [...known.keys()]) remove(id);
  };
}
