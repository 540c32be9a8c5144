import {
  ErrorCode,
  Events,
  NatsError,
  RequestStrategy,
  connect,
  headers,
  type NatsConnection,
  type Service,
  type ServiceClient,
  type ServiceStats,
  type Subscription,
} from 'nats';
import { Code, ConfigError, DiffmeshError, silentLogger, type Logger, injectTraceContext } from '@diffmesh/core';
import {
  ListenerSet,
  cloneInstance,
  compareInstances,
  fromServiceIdentity,
  matchesFilter,
  sameJson,
  toServiceMetadata,
  validateLoad,
  validateRegistration,
  type ServiceIdentityLike,
} from './instance.js';
import { natsConnectionOptions, type NatsTlsFiles } from './nats-connection.js';
import type {
  Discovery,
  DiscoveryListener,
  Instance,
  InstanceFilter,
  InstanceInfo,
  InstanceLoad,
  InstanceRegistration,
  LoadFn,
  Registration,
  SubscribeOptions,
} from './types.js';

/** Default subject prefix of the `up`/`down` notices and the per-instance `load` endpoint. */
export const DEFAULT_DISCOVERY_SUBJECT_PREFIX = 'diffmesh.discovery';
/** Name of the micro-service endpoint that answers an instance's current load as JSON. */
export const LOAD_ENDPOINT = 'load';

/** Options of {@link NatsDiscovery}. */
export interface NatsDiscoveryOptions {
  log?: Logger;
  /** How often watchers poll `$SRV.STATS`. Default 1000 ms. */
  pollIntervalMs?: number;
  /**
   * How long one poll collects answers. Default `min(500, pollIntervalMs / 2)` ms: local
   * and same-datacenter services answer within milliseconds.
   */
  pollWindowMs?: number;
  /** Consecutive polls an instance may miss before it is reported `down`. Default 2. */
  missesBeforeDown?: number;
  /**
   * Prefix of the subjects this module uses besides `$SRV.*`: `<prefix>.up`,
   * `<prefix>.down` and `<prefix>.load.<instance id>`. Default `diffmesh.discovery`.
   */
  subjectPrefix?: string;
}

/** Options of {@link NatsDiscovery.connect}. */
export interface NatsDiscoveryConnectOptions extends NatsDiscoveryOptions {
  /** Client connection name shown by the server (`nats server report connections`). Default `diffmesh-discovery`. */
  connectionName?: string;
  /** Initial connection timeout. Default 5000 ms. */
  connectTimeoutMs?: number;
  /**
   * File with this process's NATS credentials (an nkey seed, a `.creds` file or
   * `user:password`; see {@link natsAuthenticatorFromFile}). Absent: connect without any.
   */
  credentialsFile?: string;
  /**
   * TLS of the connection (PEM files: the CA that signed the server's certificate, and this
   * process's certificate and key for a server that verifies clients). Set: TLS only.
   */
  tls?: NatsTlsFiles;
}

/** Payload of the `<prefix>.up` and `<prefix>.down` notices. */
interface Notice extends ServiceIdentityLike {
  started?: string;
}

interface Entry {
  instance: Instance;
  /** NATS micro-service id; differs from `instance.id` when the registration chose its id. */
  serviceId: string;
  misses: number;
}

interface Sighting {
  info: InstanceInfo;
  serviceId: string;
  startedAt?: string;
  load?: InstanceLoad;
}

/**
 * Discovery over NATS using the NATS micro-service protocol.
 *
 * Registering adds a micro-service (`nc.services.add`) named after the service kind with
 * the instance's semver version and its fields as metadata, so `$SRV.PING`, `$SRV.INFO`
 * and `$SRV.STATS` (and `nats micro ls`) answer for it. It also adds a `load` endpoint on
 * `<prefix>.load.<id>` answering the current load as JSON; the same load is the endpoint's
 * `data` in `$SRV.STATS`.
 *
 * Watching (started lazily by `instances`, `subscribe` or `refresh`) polls `$SRV.STATS`
 * every `pollIntervalMs` and diffs the answers: a new instance is `up`, a changed one
 * `updated`, and one that misses `missesBeforeDown` consecutive polls is `down` — a killed
 * process disappears within about `missesBeforeDown × pollIntervalMs + pollWindowMs`. A
 * graceful `stop()` publishes a `down` notice so watchers drop the instance at once, and a
 * registration publishes an `up` notice so it appears without waiting for a poll.
 *
 * While the connection is down, polls are skipped rather than counted as misses; after a
 * reconnect, registrations announce themselves again and watchers poll at once.
 */
export class NatsDiscovery implements Discovery {
  readonly backend = 'nats' as const;
  private readonly log: Logger;
  private readonly pollIntervalMs: number;
  private readonly pollWindowMs: number;
  private readonly missesBeforeDown: number;
  private readonly prefix: string;
  private readonly listeners: ListenerSet;
  private readonly known = new Map<string, Entry>();
  /**
   * The last identity each service id answered with, and what it read as: a poll answer with
   * the same identity (every poll, for almost every service) is not parsed and validated again.
   */
  private readonly identities = new Map<string, { name: string; version: string; metadata: Record<string, string>; info: InstanceInfo }>();
  /** Service ids that said goodbye, with when to forget them: late poll answers must not resurrect them. */
  private readonly tombstones = new Map<string, number>();
  private readonly registrations = new Set<NatsRegistration>();
  private readonly client: ServiceClient;
  private readonly noticeSubs: Subscription[] = [];
  private watching: Promise<void> | undefined;
  private pollChain: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  /** Bumped on every disconnect, so a poll that straddles one does not count misses. */
  private connectionEpoch = 0;
  private connected = true;
  private closed = false;
  private closing: Promise<void> | undefined;

  /**
   * Uses an existing connection. With `ownsConnection` (as {@link NatsDiscovery.connect}
   * does) `close()` drains it; otherwise the caller keeps it.
   */
  constructor(
    private readonly nc: NatsConnection,
    opts: NatsDiscoveryOptions = {},
    private readonly ownsConnection = false,
  ) {
    this.log = opts.log ?? silentLogger();
    this.pollIntervalMs = positive('pollIntervalMs', opts.pollIntervalMs ?? 1000);
    this.pollWindowMs = positive('pollWindowMs', opts.pollWindowMs ?? Math.min(500, Math.max(1, Math.floor(this.pollIntervalMs / 2))));
    this.missesBeforeDown = positive('missesBeforeDown', opts.missesBeforeDown ?? 2);
    this.prefix = opts.subjectPrefix ?? DEFAULT_DISCOVERY_SUBJECT_PREFIX;
    this.listeners = new ListenerSet(this.log);
    this.client = nc.services.client({ strategy: RequestStrategy.Timer, maxWait: this.pollWindowMs });
    void this.followStatus();
  }

  /**
   * Connects to NATS (reconnecting forever after the first success) and returns a
   * discovery that owns the connection. Rejects with `UNAVAILABLE` naming the URL when
   * the first connection fails.
   */
  static async connect(servers: string | string[], opts: NatsDiscoveryConnectOptions = {}): Promise<NatsDiscovery> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers,
        name: opts.connectionName ?? 'diffmesh-discovery',
        timeout: opts.connectTimeoutMs ?? 5000,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        // With async traces on, the client builds a NatsError (its stack captured) for every
        // request up front, in case it times out, and an Error per poll: a cost per call
        // that failures never repay here (a failed poll is logged without its stack).
        noAsyncTraces: true,
        ...natsConnectionOptions(opts),
      });
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      const list = Array.isArray(servers) ? servers.join(', ') : servers;
      const refused = (err as { code?: string }).code === ErrorCode.AuthorizationViolation;
      const why = refused
        ? `authorization violation: the server refused ${opts.credentialsFile ? 'these credentials' : 'a connection without credentials (set the NATS credentials file)'}`
        : (err as Error).message;
      throw new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', `discovery: cannot connect to NATS at ${list}: ${why}`, {
        cause: err,
      });
    }
    return new NatsDiscovery(nc, opts, true);
  }

  /** The underlying connection (for services that also use NATS for other things). */
  get connection(): NatsConnection {
    return this.nc;
  }

  async register(spec: InstanceRegistration, loadFn?: LoadFn): Promise<Registration> {
    if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'discovery: closed');
    const v = validateRegistration(spec);
    const reg = new NatsRegistration(this.nc, this.log, this.prefix, loadFn, (r) => this.registrations.delete(r));
    await reg.start(v);
    this.registrations.add(reg);
    return reg;
  }

  async instances(filter?: InstanceFilter): Promise<Instance[]> {
    if (!this.closed) await this.startWatching();
    return this.snapshot(filter);
  }

  subscribe(listener: DiscoveryListener, opts: SubscribeOptions = {}): () => void {
    if (this.closed) return () => {};
    if (opts.replay ?? true) for (const i of this.snapshot()) this.listeners.call(listener, { type: 'up', instance: i });
    const off = this.listeners.add(listener);
    this.startWatching().catch((err: unknown) => this.log.warn({ err }, 'discovery: first poll failed'));
    return off;
  }

  async refresh(): Promise<void> {
    if (this.closed) return;
    if (this.watching === undefined) return this.startWatching();
    await this.watching;
    await this.poll();
  }

  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.registrations].map((r) => r.stop()));
    for (const s of this.noticeSubs) s.unsubscribe();
    this.listeners.clear();
    await this.pollChain.catch(() => {});
    if (this.nc.isClosed()) return;
    try {
      if (this.ownsConnection) await this.nc.drain();
      else await this.nc.flush();
    } catch (err) {
      this.log.warn({ err }, 'discovery: draining the NATS connection failed');
    }
  }

  private startWatching(): Promise<void> {
    this.watching ??= (async () => {
      const sub = (subject: string, fn: (n: Notice) => void): void => {
        this.noticeSubs.push(
          this.nc.subscribe(subject, {
            callback: (err, msg) => {
              if (err || this.closed) return;
              let n: Notice;
              try {
                n = JSON.parse(new TextDecoder().decode(msg.data)) as Notice;
              } catch {
                this.log.debug({ subject }, 'discovery: ignoring a malformed notice');
                return;
              }
              if (n && typeof n === 'object' && typeof n.id === 'string') fn(n);
            },
          }),
        );
      };
      sub(`${this.prefix}.up`, (n) => this.onUpNotice(n));
      sub(`${this.prefix}.down`, (n) => this.onDownNotice(n));
      await this.poll();
      this.schedule();
    })();
    return this.watching;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.poll().finally(() => this.schedule());
    }, this.pollIntervalMs);
    this.timer.unref();
  }

  /** Runs one poll after any poll in flight; polls never overlap. */
  private poll(): Promise<void> {
    const run = this.pollChain.then(() => this.pollOnce());
    this.pollChain = run.catch(() => {});
    return run.catch((err: unknown) => this.log.warn({ err }, 'discovery: poll failed'));
  }

  private async pollOnce(): Promise<void> {
    if (this.closed || this.nc.isClosed()) return;
    if (!this.connected) return;
    const epoch = this.connectionEpoch;
    const seen = new Map<string, Sighting>();
    try {
      const answers = await this.client.stats();
      for await (const s of answers) this.collect(s, seen);
    } catch (err) {
      if (!(err instanceof NatsError && err.code === ErrorCode.NoResponders)) {
        this.log.debug({ err }, 'discovery: poll interrupted; not counting misses');
        return;
      }
      // No responders: nobody is registered at all.
    }
    if (this.closed) return;
    const complete = this.connected && epoch === this.connectionEpoch;
    this.apply(seen, complete);
  }

  private collect(s: ServiceStats, seen: Map<string, Sighting>): void {
    const sighting = this.toSighting(s);
    if (!sighting) return;
    const load = s.endpoints?.find((e) => e.name === LOAD_ENDPOINT)?.data;
    if (load && typeof load === 'object') {
      try {
        sighting.load = validateLoad(load as InstanceLoad);
      } catch {
        // A malformed load report is left out; the instance itself is still valid.
      }
    }
    const other = seen.get(sighting.info.id);
    if (other && other.serviceId !== sighting.serviceId) {
      this.log.warn(
        { instanceId: sighting.info.id, services: [other.serviceId, sighting.serviceId] },
        'discovery: two live services claim one instance id; keeping the older',
      );
      if ((other.startedAt ?? '') <= (sighting.startedAt ?? '')) return;
    }
    seen.set(sighting.info.id, sighting);
  }

  private toSighting(s: Notice): Sighting | undefined {
    if (this.tombstones.has(s.id)) return undefined;
    const info = this.identityOf(s);
    if (typeof info === 'string') {
      this.log.trace({ service: s.name, serviceId: s.id, why: info }, 'discovery: ignoring service');
      return undefined;
    }
    return { info, serviceId: s.id, ...(typeof s.started === 'string' ? { startedAt: s.started } : {}) };
  }

  /** {@link fromServiceIdentity}, reusing the last answer for an unchanged identity. */
  private identityOf(s: Notice): InstanceInfo | string {
    const prev = typeof s.id === 'string' ? this.identities.get(s.id) : undefined;
    const metadata = s.metadata ?? {};
    if (prev && prev.name === s.name && prev.version === s.version && sameStrings(prev.metadata, metadata)) return prev.info;
    const info = fromServiceIdentity(s);
    if (typeof info !== 'string' && typeof s.id === 'string') {
      this.identities.set(s.id, { name: s.name, version: s.version, metadata: { ...metadata }, info });
    }
    return info;
  }

  /** Diffs a poll against what is known and emits the events. */
  private apply(seen: Map<string, Sighting>, countMisses: boolean): void {
    // A service that said goodbye while the poll collected (its answer came first) stays gone.
    for (const s of seen.values()) if (!this.tombstones.has(s.serviceId)) this.upsert(s, true);
    if (countMisses) {
      for (const [id, e] of [...this.known]) {
        if (seen.has(id)) continue;
        e.misses += 1;
        if (e.misses >= this.missesBeforeDown) {
          this.known.delete(id);
          this.log.info({ instanceId: id, name: e.instance.name, misses: e.misses }, 'discovery: instance stopped answering');
          this.listeners.emit({ type: 'down', instance: e.instance, why: 'unanswered' });
        }
      }
    }
    const now = Date.now();
    for (const [sid, until] of this.tombstones) if (until <= now) this.tombstones.delete(sid);
    // Identities of services no longer known are forgotten.
    if (this.identities.size > this.known.size) {
      const live = new Set<string>();
      for (const e of this.known.values()) live.add(e.serviceId);
      for (const sid of this.identities.keys()) if (!live.has(sid)) this.identities.delete(sid);
    }
  }

  /** Records a sighting: `up` when new, `updated` when changed. `withLoad`: the sighting carries the load. */
  private upsert(s: Sighting, withLoad: boolean): void {
    const prev = this.known.get(s.info.id);
    const instance: Instance = { ...s.info, serviceId: s.serviceId };
    if (s.startedAt !== undefined) instance.startedAt = s.startedAt;
    const load = withLoad ? s.load : prev?.instance.load;
    if (load) instance.load = load;
    if (prev && prev.serviceId !== s.serviceId) {
      // The same instance id re-registered (a restart): the old process is gone.
      this.known.delete(s.info.id);
      this.listeners.emit({ type: 'down', instance: prev.instance, why: 'restarted' });
    } else if (prev) {
      prev.misses = 0;
      if (!sameInstance(prev.instance, instance)) {
        prev.instance = instance;
        this.listeners.emit({ type: 'updated', instance });
      }
      return;
    }
    this.known.set(s.info.id, { instance, serviceId: s.serviceId, misses: 0 });
    this.log.info(
      { instanceId: instance.id, name: instance.name, version: instance.version, grpcAddress: instance.grpcAddress },
      'discovery: instance up',
    );
    this.listeners.emit({ type: 'up', instance });
  }

  private onUpNotice(n: Notice): void {
    const s = this.toSighting(n);
    if (s) this.upsert(s, false);
  }

  private onDownNotice(n: Notice): void {
    this.tombstones.set(n.id, Date.now() + Math.max(30_000, 10 * this.pollIntervalMs));
    for (const [id, e] of this.known) {
      if (e.serviceId !== n.id) continue;
      this.known.delete(id);
      this.log.info({ instanceId: id, name: e.instance.name }, 'discovery: instance unregistered');
      this.listeners.emit({ type: 'down', instance: e.instance, why: 'unregistered' });
    }
  }

  private async followStatus(): Promise<void> {
    try {
      for await (const s of this.nc.status()) {
        if (s.type === Events.Disconnect) {
          this.connected = false;
          this.connectionEpoch += 1;
          this.log.warn({ server: s.data }, 'discovery: NATS connection lost; reconnecting');
        } else if (s.type === Events.Reconnect) {
          this.connected = true;
          this.log.info({ server: s.data }, 'discovery: NATS connection restored');
          for (const r of this.registrations) r.announce();
          if (this.watching !== undefined && !this.closed) void this.poll();
        }
      }
    } catch (err) {
      this.log.debug({ err }, 'discovery: status stream ended');
    }
  }

  /** Copies of the known instances that match `filter` (filtered first: only those are copied and sorted). */
  private snapshot(filter?: InstanceFilter): Instance[] {
    const out: Instance[] = [];
    for (const e of this.known.values()) if (!filter || matchesFilter(e.instance, filter)) out.push(cloneInstance(e.instance));
    return out.sort(compareInstances);
  }
}

/** One micro-service registration. */
class NatsRegistration implements Registration {
  private svc: Service | undefined;
  private info!: InstanceInfo;
  private load: InstanceLoad | undefined;
  /** The micro-service's `started` time, as `$SRV.STATS` reports it. */
  private started: string | undefined;
  /** The NATS micro-service id (unique per registration). */
  private serviceId = '';
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    private readonly prefix: string,
    private readonly loadFn: LoadFn | undefined,
    private readonly onStopped: (r: NatsRegistration) => void,
  ) {}

  get instance(): InstanceInfo {
    return { ...this.info, models: [...this.info.models], metadata: { ...this.info.metadata } };
  }

  async start(v: InstanceRegistration & { metadata: Record<string, string> }): Promise<void> {
    const explicitId = v.id !== undefined;
    const provisional: InstanceInfo = { ...v, id: v.id ?? '' };
    let loadSubject = '';
    const svc = await this.nc.services.add({
      name: v.name,
      version: v.version,
      description: `diffmesh ${v.stage}${v.pool ? ` (pool ${v.pool})` : ''} at ${v.grpcAddress}`,
      metadata: toServiceMetadata(provisional, explicitId),
      statsHandler: async (endpoint) => (endpoint.subject === loadSubject ? (this.currentLoad() ?? null) : null),
    });
    this.svc = svc;
    try {
      this.serviceId = svc.ping().id;
      this.info = { ...provisional, id: v.id ?? this.serviceId };
      this.started = (await svc.stats()).started;
      loadSubject = `${this.prefix}.load.${this.info.id}`;
      svc.addEndpoint(LOAD_ENDPOINT, {
        subject: loadSubject,
        handler: (_err, msg) => {
          msg.respond(new TextEncoder().encode(JSON.stringify(this.currentLoad() ?? null)));
        },
      });
      // Registered means answerable: the server has our subscriptions before we return.
      await this.nc.flush();
    } catch (err) {
      await svc.stop().catch(() => null);
      throw err;
    }
    svc.stopped.then(
      (err) => {
        if (err && !this.stopping) this.log.error({ err, instanceId: this.info.id }, 'discovery: registration stopped unexpectedly');
      },
      () => {},
    );
    this.log.info({ instanceId: this.info.id, name: v.name, version: v.version, serviceId: this.serviceId }, 'discovery: registered');
    this.announce();
  }

  update(load: InstanceLoad): void {
    if (this.stopping) return;
    this.load = validateLoad(load);
  }

  /** Publishes the `up` notice (after registering and after every reconnect). */
  announce(): void {
    const svc = this.svc;
    if (!svc || this.stopping || this.nc.isClosed()) return;
    const p = svc.ping();
    const notice: Notice = {
      name: p.name,
      id: p.id,
      version: p.version,
      metadata: p.metadata ?? {},
      ...(this.started ? { started: this.started } : {}),
    };
    this.publish(`${this.prefix}.up`, notice);
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    const svc = this.svc;
    this.onStopped(this);
    if (!svc) return;
    try {
      await svc.stop();
    } catch (err) {
      this.log.warn({ err, instanceId: this.info.id }, 'discovery: stopping the micro-service failed');
    }
    // Stop answering first, then say goodbye: a watcher that hears the notice tombstones
    // the service id, so a poll answer already on its way cannot bring it back.
    this.publish(`${this.prefix}.down`, { name: this.info.name, id: this.serviceId, version: this.info.version });
    if (!this.nc.isClosed()) await this.nc.flush().catch(() => {});
    this.log.info({ instanceId: this.info.id }, 'discovery: unregistered');
  }

  private currentLoad(): InstanceLoad | undefined {
    if (!this.loadFn) return this.load;
    try {
      return validateLoad(this.loadFn());
    } catch (err) {
      this.log.warn({ err, instanceId: this.info.id }, 'discovery: load function failed');
      return this.load;
    }
  }

  private publish(subject: string, body: unknown): void {
    if (this.nc.isClosed()) return;
    try {
      // The active trace context (if any) travels in the message headers.
      const trace = Object.entries(injectTraceContext());
      let h;
      if (trace.length > 0) {
        h = headers();
        for (const [k, v] of trace) h.set(k, v);
      }
      this.nc.publish(subject, new TextEncoder().encode(JSON.stringify(body)), h ? { headers: h } : undefined);
    } catch (err) {
      this.log.debug({ err, subject }, 'discovery: publishing a notice failed');
    }
  }
}

/** True when two string maps hold the same entries. */
function sameStrings(a: Record<string, string>, b: Record<string, string>): boolean {
  if (a === b) return true;
  let n = 0;
  for (const k in b) {
    if (a[k] !== b[k]) return false;
    n += 1;
  }
  return n === Object.keys(a).length;
}

/**
 * `sameJson` of two readings of one instance: when both came from the same identity (the
 * common case, see `identityOf`) only their start time and load can differ.
 */
function sameInstance(a: Instance, b: Instance): boolean {
  if (a.id === b.id && a.name === b.name && a.version === b.version && a.metadata === b.metadata && a.models === b.models) {
    return a.serviceId === b.serviceId && a.startedAt === b.startedAt && sameJson(a.load, b.load);
  }
  return sameJson(a, b);
}

function positive(field: string, v: number): number {
  if (!Number.isFinite(v) || v <= 0) {
    throw new DiffmeshError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `${field}: must be a positive number (got ${String(v)})`, {
      metadata: { field },
    });
  }
  return v;
}
