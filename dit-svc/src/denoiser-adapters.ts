import { watch, type FSWatcher } from 'node:fs';
import { link, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  addLoraBranches,
  decodeModel,
  DEFAULT_MAX_ADAPTER_FILE_BYTES,
  encodeModel,
  externalDataFiles,
  findGraphLinears,
  inlineExternalData,
  listAdapterFiles,
  loadLoraAdapter,
  loraFeeds,
  readAdapterBytes,
  statAdapterFile,
  type AdapterFileInfo,
  type AdapterUse,
  type LoraSlot,
  type MappedAdapter,
  type ModelGraphs,
} from '@diffmesh/adapters';
import {
  ADAPTER_NAME_PATTERN,
  DiffmeshError,
  invalidParameter,
  type AdapterReport,
  type GenerationParams,
  type Logger,
} from '@diffmesh/core';
import { ort, type LoadedModelDirectory, type SessionVariant } from '@diffmesh/stage-host';
import { AdapterCache } from './adapter-cache.js';

export interface DenoiserAdaptersOptions {
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

/** The LoRA side of one model directory's denoiser: its layers, and the inputs the branches take. */
interface DirectoryLora {
  graphs: ModelGraphs;
  slots: LoraSlot[];
  /** Feeds of recent runs, by who used what (most runs repeat the last one). */
  feeds: Map<string, Record<string, ort.Tensor>>;
}

const FEED_CACHE_ENTRIES = 8;
/** Wait after a change in the adapter folder before listing it (the events of one copy come together). */
const RELIST_DELAY_MS = 50;
/** How often a folder that cannot be watched is listed. */
const LIST_POLL_MS = 2000;

/**
 * LoRA adapters for the denoisers of model directories: the denoiser's session is a variant of
 * its graph with a LoRA branch on every linear layer (adapters-package pass), shared by every
 * request — with adapters, with other adapters, or with none; a task's adapters are read from
 * the adapter directory once per instance, mapped to the graph and kept in a byte-bounded cache
 * (a file changed on disk is read again); each run gets the branch inputs of its batch items.
 * Only the denoiser's part of a file applies (text-encoder targets are counted, not applied).
 */
export class DenoiserAdapters {
  private readonly loras = new Map<string, Promise<DirectoryLora>>();
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

  constructor(private readonly opts: DenoiserAdaptersOptions) {
    this.cache = new AdapterCache(opts.cacheBytes ?? 1024 * 1024 * 1024);
    this.maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_ADAPTER_FILE_BYTES;
  }

  /** Stops watching the folder. */
  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.pollTimer);
    clearTimeout(this.relisting);
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

  /** The session variant of a directory's denoiser: its graph with the LoRA branches. */
  variant(directory: LoadedModelDirectory): SessionVariant {
    return { key: 'lora', source: (file) => this.branchedGraph(directory, file) };
  }

  /**
   * The adapters of a request, loaded and mapped to the directory's denoiser. Throws
   * INVALID_ARGUMENT naming `adapters[i].name` for an unknown adapter or a file that cannot be
   * applied (the reason in the message).
   */
  async resolve(params: GenerationParams, directory: LoadedModelDirectory): Promise<AdapterUse[]> {
    const list = params.adapters ?? [];
    if (list.length === 0) return [];
    const lora = await this.lora(directory);
    return Promise.all(list.map(async (a, i) => ({ adapter: await this.adapter(a.name, i, directory.id, lora.graphs), scale: a.scale })));
  }

  /** The branch inputs of a run whose batch items use `rows[b]`. */
  async feeds(directory: LoadedModelDirectory, rows: AdapterUse[][]): Promise<Record<string, ort.Tensor>> {
    const lora = await this.lora(directory);
    // Who uses what at which scale: adapters by identity (a file read again is a new one).
    const signature = rows.map((uses) => uses.map((u) => `${this.idOf(u.adapter)}:${u.scale}`).join(',')).join('|');
    const hit = lora.feeds.get(signature);
    if (hit) return hit;
    const feeds: Record<string, ort.Tensor> = {};
    for (const f of loraFeeds(lora.slots, 'denoiser', rows)) feeds[f.name] = new ort.Tensor(f.type, f.data, f.dims);
    lora.feeds.set(signature, feeds);
    if (lora.feeds.size > FEED_CACHE_ENTRIES) lora.feeds.delete(lora.feeds.keys().next().value as string);
    return feeds;
  }

  private nextId = 0;
  private readonly ids = new WeakMap<MappedAdapter, number>();
  private idOf(a: MappedAdapter): number {
    let id = this.ids.get(a);
    if (id === undefined) {
      id = ++this.nextId;
      this.ids.set(a, id);
    }
    return id;
  }

  private lora(directory: LoadedModelDirectory): Promise<DirectoryLora> {
    let p = this.loras.get(directory.id);
    if (!p) {
      p = this.readLora(directory);
      p.catch(() => this.loras.delete(directory.id));
      this.loras.set(directory.id, p);
    }
    return p;
  }

  private async readLora(directory: LoadedModelDirectory): Promise<DirectoryLora> {
    const model = decodeModel(await readFile(directory.layout.denoiser.model));
    const linears = findGraphLinears(model);
    const layersPerBlock = Number(directory.layout.denoiser.config.layers_per_block ?? 2);
    const graphs: ModelGraphs = {
      family: directory.layout.kind,
      linears: { denoiser: linears },
      layersPerBlock: Number.isFinite(layersPerBlock) ? layersPerBlock : 2,
      skip: ['text_encoder', 'text_encoder_2'],
    };
    const { slots } = addLoraBranches(model, [...linears.byModule.values()]);
    return { graphs, slots, feeds: new Map() };
  }

  /**
   * The rewritten graph, as bytes. Weights in external data stay in their file: the graph is
   * written to a temporary folder beside hard links to the data (onnxruntime refuses data
   * outside the model's folder, symbolic links included); where the folder is on another file
   * system, weights that fit a protobuf are read into the graph instead.
   */
  private async branchedGraph(directory: LoadedModelDirectory, file: string): Promise<string | Uint8Array> {
    const model = decodeModel(await readFile(file));
    const external = externalDataFiles(model);
    const { model: rewritten } = addLoraBranches(model, [...findGraphLinears(model).byModule.values()]);
    if (external.length === 0) return encodeModel(rewritten);
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-lora-graph-'));
    try {
      for (const location of external) await link(path.resolve(path.dirname(file), location), path.join(dir, location));
    } catch {
      await rm(dir, { recursive: true, force: true });
      await inlineExternalData(rewritten, path.dirname(file));
      return encodeModel(rewritten);
    }
    const out = path.join(dir, 'model.onnx');
    await writeFile(out, encodeModel(rewritten));
    this.opts.log?.info({ model: directory.id, file: out }, 'LoRA-branched denoiser graph written beside links to its external data');
    return out;
  }

  private async adapter(name: string, i: number, model: string, graphs: ModelGraphs): Promise<MappedAdapter> {
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
