import { randomBytes } from 'node:crypto';
import { Code, DiffmeshError, silentLogger, type Logger } from '@diffmesh/core';
import { ListenerSet, cloneInstance, compareInstances, matchesFilter, sameJson, validateLoad, validateRegistration } from './instance.js';
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

/** Options of {@link MemoryDiscovery}. */
export interface MemoryDiscoveryOptions {
  log?: Logger;
}

interface Entry {
  info: InstanceInfo;
  startedAt: string;
  load?: InstanceLoad;
  loadFn?: LoadFn;
}

/**
 * In-process discovery, the embedded default: every component of the mesh runs in one
 * process and shares one MemoryDiscovery. Events are delivered synchronously, before the
 * call that caused them returns (`up` before `register` resolves, `down` before `stop`
 * resolves).
 */
export class MemoryDiscovery implements Discovery {
  readonly backend = 'memory' as const;
  private readonly log: Logger;
  private readonly entries = new Map<string, Entry>();
  private readonly owned = new Set<Registration>();
  private readonly listeners: ListenerSet;
  private closed = false;

  constructor(opts: MemoryDiscoveryOptions = {}) {
    this.log = opts.log ?? silentLogger();
    this.listeners = new ListenerSet(this.log);
  }

  async register(spec: InstanceRegistration, loadFn?: LoadFn): Promise<Registration> {
    if (this.closed) throw new DiffmeshError(Code.UNAVAILABLE, 'DRAINING', 'discovery: closed');
    const v = validateRegistration(spec);
    const id = v.id ?? `${v.name}-${randomBytes(6).toString('hex')}`;
    if (this.entries.has(id)) {
      throw new DiffmeshError(Code.ALREADY_EXISTS, 'INVALID_PARAMETER', `id: instance "${id}" is already registered`, {
        metadata: { field: 'id' },
      });
    }
    const info: InstanceInfo = { ...v, id };
    const entry: Entry = { info, startedAt: new Date().toISOString(), ...(loadFn ? { loadFn } : {}) };
    this.entries.set(id, entry);
    this.log.debug({ instanceId: id, name: info.name, version: info.version }, 'instance registered');
    this.listeners.emit({ type: 'up', instance: this.view(entry) });

    let stopped = false;
    const reg: Registration = {
      instance: { ...info, models: [...info.models], metadata: { ...info.metadata } },
      update: (load: InstanceLoad) => {
        if (stopped) return;
        const next = validateLoad(load);
        if (sameJson(entry.load, next)) return;
        entry.load = next;
        this.listeners.emit({ type: 'updated', instance: this.view(entry) });
      },
      stop: async () => {
        if (stopped) return;
        stopped = true;
        this.owned.delete(reg);
        if (this.entries.get(id) !== entry) return;
        this.entries.delete(id);
        this.log.debug({ instanceId: id }, 'instance unregistered');
        this.listeners.emit({ type: 'down', instance: this.view(entry), why: 'unregistered' });
      },
    };
    this.owned.add(reg);
    return reg;
  }

  async instances(filter?: InstanceFilter): Promise<Instance[]> {
    return this.snapshot().filter((i) => matchesFilter(i, filter));
  }

  subscribe(listener: DiscoveryListener, opts: SubscribeOptions = {}): () => void {
    if (this.closed) return () => {};
    if (opts.replay ?? true) for (const i of this.snapshot()) this.listeners.call(listener, { type: 'up', instance: i });
    return this.listeners.add(listener);
  }

  async refresh(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const reg of [...this.owned]) await reg.stop();
    this.listeners.clear();
  }

  private snapshot(): Instance[] {
    return [...this.entries.values()].map((e) => this.view(e)).sort(compareInstances);
  }

  private view(e: Entry): Instance {
    const inst: Instance = { ...e.info, startedAt: e.startedAt };
    const load = this.currentLoad(e);
    if (load) inst.load = load;
    return cloneInstance(inst);
  }

  private currentLoad(e: Entry): InstanceLoad | undefined {
    if (!e.loadFn) return e.load;
    try {
      return validateLoad(e.loadFn());
    } catch (err) {
      this.log.warn({ err, instanceId: e.info.id }, 'load function failed');
      return e.load;
    }
  }
}
