import { STAGE_NAMES, type Logger, type StageName, type TlsFiles } from '@diffmesh/core';
import { type Discovery, type DiscoveryEvent, type Instance } from '@diffmesh/discovery';
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
  const m = new Membership(scheduler, discovery, opts);
  const unsubscribe = discovery.subscribe((e) => m.event(e), { replay: true });
  return () => {
    unsubscribe();
    m.stop();
  };
}

/** The registration an instance is known by (what the scheduler and its peers see of it). */
type Registered = Pick<Instance, 'id' | 'pool' | 'nodeId' | 'version' | 'capacity' | 'models'> & { stage: StageName; grpcAddress: string };

class Membership {
  private readonly known = new Map<string, RemoteInstance>();
  /** Ids discovery reported down (missed polls) that were kept for their open stream. */
  private readonly unanswered = new Set<string>();
  /**
   * Instances whose stream broke or was refused, looked at again until they are back or
   * discovery says they are gone: a worker restarted under its id (by a supervisor) may
   * register again before discovery noticed it was away, so no event announces it.
   */
  private readonly lost = new Set<string>();
  /** Rechecks due together (instances lost together, e.g. a worker host's) share one listing. */
  private listing: Promise<Instance[]> | undefined;
  private readonly recheckMs: number;
  /** An instance another scheduler holds is tried again less often (it is taken over when the holder goes away). */
  private readonly heldRecheckMs: number;
  private stopped = false;

  constructor(
    private readonly scheduler: Scheduler,
    private readonly discovery: Discovery,
    private readonly opts: MembershipOptions,
  ) {
    this.recheckMs = opts.recheckMs ?? 1000;
    this.heldRecheckMs = Math.max(this.recheckMs, 2000);
  }

  event(e: DiscoveryEvent): void {
    if (e.type !== 'down') {
      this.unanswered.delete(e.instance.id);
      this.add(e.instance);
      return;
    }
    const remote = this.known.get(e.instance.id);
    // Its stream is open and answered when the scheduler dispatches to it.
    const dispatching =
      remote !== undefined && !remote.isGone() && this.scheduler.instances(remote.pool).some((s) => s.instance === remote);
    if (e.why === 'unanswered' && dispatching) {
      this.unanswered.add(e.instance.id);
      this.opts.log.warn(
        { instance: e.instance.id, pool: e.instance.pool },
        'stage instance missed discovery polls but its dispatch stream is open; keeping it (the stream decides)',
      );
      return;
    }
    this.unanswered.delete(e.instance.id);
    this.remove(e.instance.id);
  }

  stop(): void {
    this.stopped = true;
    for (const id of [...this.known.keys()]) this.remove(id);
  }

  private list(): Promise<Instance[]> {
    return (this.listing ??= this.discovery.instances().finally(() => {
      this.listing = undefined;
    }));
  }

  private recheck(id: string, afterMs: number): void {
    this.lost.add(id);
    setTimeout(() => {
      if (this.stopped || !this.lost.has(id)) return;
      void this.list()
        .then((all) => {
          const found = all.filter((x) => x.id === id);
          if (found.length === 0) this.recheck(id, afterMs);
          for (const f of found) this.add(f);
        })
        .catch(() => this.recheck(id, afterMs));
    }, afterMs).unref();
  }

  private add(i: Instance): void {
    // One the scheduler closed (removed it) is looked at again when discovery still shows it.
    const current = this.known.get(i.id);
    if (this.stopped || (current && !current.isGone()) || !isStage(i.stage) || !i.grpcAddress) return;
    const { scheduler, opts } = this;
    const info: Registered = {
      id: i.id,
      pool: i.pool,
      stage: i.stage,
      nodeId: i.nodeId,
      version: i.version,
      capacity: i.capacity,
      models: i.models,
      grpcAddress: i.grpcAddress,
    };
    const remote: RemoteInstance = new RemoteInstance({
      info,
      log: opts.log,
      ...(opts.tls ? { tls: opts.tls } : {}),
      exclusive: scheduler.requests.durable,
      onGone: (id) => this.gone(id, remote, info),
    });
    this.known.set(i.id, remote);
    // Until its stream is answered it counts as serving its pool (admission accepts work for
    // it, which waits for it); it gets work once it has answered (another scheduler may hold it).
    if (!scheduler.instances(i.pool).some((s) => s.instance.id === i.id))
      scheduler.addForeignInstance({ ...info, address: info.grpcAddress });
    void remote.attached.then((how) => {
      if (how === 'lost' || (how === 'held' && !scheduler.requests.durable)) scheduler.removeForeignInstance(i.id);
      if (how !== 'ready' || this.known.get(i.id) !== remote || this.stopped) return;
      this.lost.delete(i.id);
      scheduler.removeForeignInstance(i.id);
      scheduler.addInstance(remote);
      opts.log.info({ instance: i.id, pool: i.pool, stage: i.stage, version: i.version, address: i.grpcAddress }, 'stage instance up');
    });
  }

  /** An instance's stream broke or was refused. */
  private gone(id: string, remote: RemoteInstance, info: Registered): void {
    const { scheduler } = this;
    if (this.known.get(id) !== remote) return;
    this.known.delete(id);
    scheduler.removeInstance(id);
    if (remote.isHeldElsewhere()) {
      // Another scheduler dispatches to it. With a shared store its pool is served all
      // the same (that scheduler takes this one's tasks from the queue); with the memory
      // store it is of no use here.
      if (scheduler.requests.durable) scheduler.addForeignInstance({ ...info, address: info.grpcAddress });
      this.recheck(id, this.heldRecheckMs);
      return;
    }
    // Discovery already lost it, and now its stream broke too: it is gone.
    if (this.unanswered.delete(id)) return;
    // The process may still be there (a transient break): look again shortly.
    this.recheck(id, this.recheckMs);
  }

  /**
   * A registration that goes away is draining (or dead): no new work; running tasks finish,
   * or fail over when its connection breaks.
   */
  private remove(id: string): void {
    this.lost.delete(id);
    this.scheduler.removeForeignInstance(id);
    const remote = this.known.get(id);
    if (!remote) return;
    this.known.delete(id);
    this.scheduler.retireInstance(id);
    // One that never became ready is not in the scheduler: close its stream here.
    void remote.attached.then((how) => {
      if (how !== 'ready') remote.close();
    });
    this.opts.log.info({ instance: id }, 'stage instance down');
  }
}
