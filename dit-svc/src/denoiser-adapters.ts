import { readFile } from 'node:fs/promises';
import {
  addLoraBranches,
  AdapterStore,
  branchedGraphSource,
  decodeModel,
  findGraphLinears,
  loraFeeds,
  type AdapterStoreOptions,
  type AdapterUse,
  type LoraSlot,
  type ModelGraphs,
} from '@diffmesh/adapters';
import type { AdapterReport, GenerationParams } from '@diffmesh/core';
import { ort, type LoadedModelDirectory, type SessionVariant } from '@diffmesh/stage-host';

/** The adapter directory and its bounds (see `AdapterStore`). */
export type DenoiserAdaptersOptions = AdapterStoreOptions;

/** The LoRA side of one model directory's denoiser: its layers, and the inputs the branches take. */
interface DirectoryLora {
  graphs: ModelGraphs;
  slots: LoraSlot[];
  /** Feeds of recent runs, by who used what (most runs repeat the last one). */
  feeds: Map<string, Record<string, ort.Tensor>>;
}

const FEED_CACHE_ENTRIES = 8;

/**
 * LoRA adapters for the denoisers of model directories: the denoiser's session is a variant of
 * its graph with a LoRA branch on every linear layer (adapters-package pass), shared by every
 * request — with adapters, with other adapters, or with none; a task's adapters are read from
 * the adapter directory once per instance, mapped to the graph and kept in a byte-bounded cache
 * (a file changed on disk is read again); each run gets the branch inputs of its batch items.
 * Only the denoiser's part of a file applies here (text-encoder targets are counted and left to
 * the text-encoding stage, which applies them: encoder-svc's `TextEncoderAdapters`).
 */
export class DenoiserAdapters {
  private readonly loras = new Map<string, Promise<DirectoryLora>>();
  private readonly store: AdapterStore;

  constructor(private readonly opts: DenoiserAdaptersOptions) {
    this.store = new AdapterStore(opts);
  }

  /** Stops watching the folder. */
  close(): void {
    this.store.close();
  }

  /** What this stage holds and can load (see `AdapterStore.report`). */
  report(): AdapterReport | undefined {
    return this.store.report();
  }

  /** Calls `listener` when {@link report} may answer otherwise (a load, the folder changed). */
  onChange(listener: () => void): () => void {
    return this.store.onChange(listener);
  }

  /** Names of the adapters the directory holds now. */
  names(): Promise<string[]> {
    return this.store.names();
  }

  /** Bytes the loaded adapters hold. */
  get cachedBytes(): number {
    return this.store.cachedBytes;
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
    return Promise.all(
      list.map(async (a, i) => ({ adapter: await this.store.load(a.name, i, `${directory.id}#denoiser`, lora.graphs), scale: a.scale })),
    );
  }

  /** The branch inputs of a run whose batch items use `rows[b]`. */
  async feeds(directory: LoadedModelDirectory, rows: AdapterUse[][]): Promise<Record<string, ort.Tensor>> {
    const lora = await this.lora(directory);
    // Who uses what at which scale: adapters by identity (a file read again is a new one).
    const signature = rows.map((uses) => uses.map((u) => `${this.store.idOf(u.adapter)}:${u.scale}`).join(',')).join('|');
    const hit = lora.feeds.get(signature);
    if (hit) return hit;
    const feeds: Record<string, ort.Tensor> = {};
    for (const f of loraFeeds(lora.slots, 'denoiser', rows)) feeds[f.name] = new ort.Tensor(f.type, f.data, f.dims);
    lora.feeds.set(signature, feeds);
    if (lora.feeds.size > FEED_CACHE_ENTRIES) lora.feeds.delete(lora.feeds.keys().next().value as string);
    return feeds;
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

  /** The rewritten graph (see `branchedGraphSource`). */
  private branchedGraph(directory: LoadedModelDirectory, file: string): Promise<string | Uint8Array> {
    return branchedGraphSource(file, (out) =>
      this.opts.log?.info({ model: directory.id, file: out }, 'LoRA-branched denoiser graph written beside links to its external data'),
    );
  }
}
