import { watch, type FSWatcher } from 'node:fs';
import { ADAPTER_NAME_PATTERN, DiffmeshError, invalidParameter, type AdapterReport, type Logger } from '@diffmesh/core';
import { AdapterCache } from './adapter-cache.js';
import {
  DEFAULT_MAX_ADAPTER_FILE_BYTES,
  listAdapterFiles,
  readAdapterBytes,
  statAdapterFile,
  type AdapterFileInfo,
} from './adapter-directory.js';
import type { MappedAdapter, ModelGraphs } from './adapter-mapping.js';
import { loadLoraAdapter } from './lora-adapter.js';

/** Wait after a change in the adapter folder before listing it (the events of one copy come together). */
const RELIST_DELAY_MS = 50;
/** How often a folder that cannot be watched is listed. */
const LIST_POLL_MS = 2000;

export interface AdapterStoreOptions {
  /** The directory of `<name>.safetensors` files requests name (watched: files added later are found). */
  dir: string;
  /** Bytes the loaded adapters may hold together (float32 matrices); default 1 GiB. */
  cacheBytes?: number;
  /** Largest adapter file read; default {@link DEFAULT_MAX_ADAPTER_FILE_BYTES}. */
  maxFileBytes?: number;
  log?: Logger;
  /** Called for each adapter a task uses: found loaded (`hit`) or read from its file (`load`). */
  onLookup?: (outcome: 'hit' | 'load') => void;
}

/**
 * The adapters a stage serves from its adapter directory (`--lora-dir`): a request's adapter is
 * read from `<name>.safetensors` once per instance, mapped to the graphs of a model and kept in
 * a byte-bounded cache keyed by model, name, size and modification time (a file changed on disk
 * is read again). The denoising and the text-encoding stages each hold one, mapping the part of
 * a file their graphs take.
 */
export class AdapterStore {
  private readonly cache: AdapterCache<MappedAdapter>;
  private readonly loading = new Map<string, Promise<MappedAdapter>>();
  private readonly maxFileBytes: number;
  /** Files found, by name; dropped when the folder changes (an unknown name is looked up every time). */
  private readonly files = new Map<string, AdapterFileInfo>();
  private watcher: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private relisting: NodeJS.Timeout | undefined;
  private firstListing: Promise<void> | undefined;
  /** The folder's names when last listed; undefined before the first listing. */
  private available: string[] | undefined;
  private readonly listeners = new Set<() => void>();
  private nextId = 0;
  private readonly ids = new WeakMap<MappedAdapter, number>();

  constructor(private readonly opts: AdapterStoreOptions) {
    this.cache = new AdapterCache(opts.cacheBytes ?? 1024 * 1024 * 1024);
    this.maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_ADAPTER_FILE_BYTES;
  }

  /** The adapter directory. */
  get dir(): string {
    return this.opts.dir;
  }

  /** Stops watching the folder. */
  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.pollTimer);
    clearTimeout(this.relisting);
  }

  /**
   * What this stage holds (loaded, with its file still in the folder) and can load (the folder's
   * names); undefined until the folder was first listed (the listing starts on the first call).
   */
  report(): AdapterReport | undefined {
    if (!this.available) {
      this.watchDir();
      if (!this.firstListing) this.firstListing = this.relist();
      return undefined;
    }
    const available = new Set(this.available);
    const held = new Set<string>();
    // Keys are `model|name|size|mtime`; a name has no `|`.
    for (const k of this.cache.keys()) {
      const name = k.split('|').at(-3);
      if (name !== undefined && available.has(name)) held.add(name);
    }
    return { held: [...held].sort(), available: [...this.available] };
  }

  /** Calls `listener` when {@link report} may answer otherwise (a load, the folder changed). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Names of the adapters the directory holds now. */
  async names(): Promise<string[]> {
    return (await listAdapterFiles(this.opts.dir)).map((f) => f.name);
  }

  /** Bytes the loaded adapters hold. */
  get cachedBytes(): number {
    return this.cache.bytes;
  }

  /** A number that tells loaded adapters apart (a file read again is another adapter): for keys of what was computed from one. */
  idOf(a: MappedAdapter): number {
    let id = this.ids.get(a);
    if (id === undefined) {
      id = ++this.nextId;
      this.ids.set(a, id);
    }
    return id;
  }

  /** The file of an adapter: from what the folder held when last looked at, while it has not changed since. */
  private async file(name: string): Promise<AdapterFileInfo | undefined> {
    const known = this.files.get(name);
    if (known) return known;
    const info = await statAdapterFile(this.opts.dir, name);
    if (!info) return undefined;
    // A folder that cannot be watched is looked at on every task.
    if (this.watchDir()) this.files.set(name, info);
    return info;
  }

  /**
   * Watches the folder once (false when it cannot be): a changed file is looked at again, and
   * the names it holds are listed again (then {@link onChange} listeners are called when they
   * changed). A folder that cannot be watched is listed every few seconds instead.
   */
  private watchDir(): boolean {
    if (this.watcher) return true;
    if (this.pollTimer) return false;
    try {
      this.watcher = watch(this.opts.dir, { persistent: false }, (_event, changed) => {
        if (changed) this.files.delete(String(changed).replace(/\.safetensors$/, ''));
        else this.files.clear();
        this.relistSoon();
      });
      this.watcher.on('error', () => {
        this.close();
        this.files.clear();
      });
      return true;
    } catch {
      this.pollTimer = setInterval(() => this.relistSoon(), LIST_POLL_MS);
      this.pollTimer.unref();
      return false;
    }
  }

  /** Lists the folder again after the changes of this moment (a copy is several events). */
  private relistSoon(): void {
    if (this.relisting) return;
    this.relisting = setTimeout(() => {
      this.relisting = undefined;
      void this.relist();
    }, RELIST_DELAY_MS);
    this.relisting.unref();
  }

  private async relist(): Promise<void> {
    const names = await this.names().catch(() => undefined);
    if (!names) return;
    const before = this.available;
    this.available = names;
    if (!before || before.join('\n') !== names.join('\n')) this.changed();
  }

  private changed(): void {
    for (const l of this.listeners) {
      try {
        l();
      } catch (err) {
        this.opts.log?.warn({ err }, 'adapter change listener failed');
      }
    }
  }

  /**
   * Adapter `name` (the request's `adapters[i]`) mapped to `graphs`, the graphs of model `model`.
   * Throws INVALID_ARGUMENT naming `adapters[i].name` for an unknown adapter or a file that
   * cannot be applied (the reason in the message).
   */
  async load(name: string, i: number, model: string, graphs: ModelGraphs): Promise<MappedAdapter> {
    const field = `adapters[${i}].name`;
    if (!ADAPTER_NAME_PATTERN.test(name))
      throw invalidParameter(field, `${JSON.stringify(name)} is not an adapter name (no path characters)`);
    const info = await this.file(name);
    if (!info) {
      const known = await this.names();
      throw invalidParameter(
        field,
        `no adapter named ${name} here (${known.length ? `known: ${known.join(', ')}` : 'the adapter directory is empty'})`,
      );
    }
    const key = `${model}|${name}|${info.sizeBytes}|${info.modifiedMs}`;
    const hit = this.cache.get(key);
    if (hit) {
      this.opts.onLookup?.('hit');
      return hit;
    }
    let p = this.loading.get(key);
    if (!p) {
      p = (async () => {
        const adapter = loadLoraAdapter(await readAdapterBytes(info, this.maxFileBytes), `${name}.safetensors`, graphs);
        for (const k of this.cache.keys()) if (k.startsWith(`${model}|${name}|`)) this.cache.delete(k);
        this.cache.set(key, adapter);
        this.opts.log?.info({ adapter: name, model, bytes: adapter.bytes, skippedTargets: adapter.skipped }, 'adapter loaded');
        this.opts.onLookup?.('load');
        this.changed();
        return adapter;
      })().finally(() => this.loading.delete(key));
      this.loading.set(key, p);
    }
    try {
      return await p;
    } catch (err) {
      if (err instanceof DiffmeshError && err.reason === 'INVALID_PARAMETER') throw invalidParameter(field, err.message);
      throw err;
    }
  }
}
