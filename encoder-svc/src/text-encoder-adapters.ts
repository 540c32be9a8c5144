import { readFile } from 'node:fs/promises';
import {
  addLoraBranches,
  AdapterStore,
  branchedGraphSource,
  decodeModel,
  findGraphLinears,
  loraFeeds,
  type AdapterComponent,
  type AdapterStoreOptions,
  type AdapterUse,
  type GraphLinears,
  type LoraSlot,
  type ModelGraphs,
} from '@diffmesh/adapters';
import type { GenerationParams } from '@diffmesh/core';
import type { OnnxComponentName } from '@diffmesh/model-layout';
import { ort, type LoadedModelDirectory, type SessionVariant } from '@diffmesh/stage-host';

/** The adapter directory and its bounds (see `AdapterStore`). */
export type TextEncoderAdaptersOptions = AdapterStoreOptions;

/** The text encoders a LoRA file can target, as diffusers names them. */
const LORA_ENCODERS: readonly AdapterComponent[] = ['text_encoder', 'text_encoder_2'];

/** The LoRA side of the text encoders one stage runs for one model directory. */
interface StageLora {
  graphs: ModelGraphs;
  /** The branch inputs of each encoder this stage runs. */
  slots: Partial<Record<AdapterComponent, LoraSlot[]>>;
}

/** Whether a graph component is one a LoRA file can target (`text_encoder`, `text_encoder_2`). */
export function isLoraEncoder(component: OnnxComponentName): component is 'text_encoder' | 'text_encoder_2' {
  return (LORA_ENCODERS as readonly string[]).includes(component);
}

/**
 * LoRA adapters on the text encoders of model directories: the text-encoder part of a file
 * (kohya `lora_te_` / `lora_te1_` / `lora_te2_`, PEFT `text_encoder.` / `text_encoder_2.`) applied
 * to the encoders this stage runs, the same way the denoising stage applies the denoiser's
 * part. Each such encoder's session is a variant of its graph with a LoRA branch on every
 * linear layer, shared by every request (with adapters, other adapters, or none: zeros); a
 * request's adapters are read from the adapter directory once per instance and kept in a
 * byte-bounded cache. The denoiser's targets, and those of an encoder another stage runs, are
 * left to those stages; a target on an encoder the model does not have, or on a layer its graph
 * lacks, refuses the file naming the key.
 */
export class TextEncoderAdapters {
  private readonly store: AdapterStore;
  private readonly loras = new Map<string, Promise<StageLora>>();

  constructor(private readonly opts: TextEncoderAdaptersOptions) {
    this.store = new AdapterStore(opts);
  }

  /** Stops watching the folder. */
  close(): void {
    this.store.close();
  }

  /** Names of the adapters the directory holds now. */
  names(): Promise<string[]> {
    return this.store.names();
  }

  /** The session variant of a text encoder: its graph with the LoRA branches (undefined for an encoder no file can target). */
  variant(directory: LoadedModelDirectory, component: OnnxComponentName): SessionVariant | undefined {
    if (!isLoraEncoder(component)) return undefined;
    return {
      key: 'lora',
      source: (file) =>
        branchedGraphSource(file, (out) =>
          this.opts.log?.info(
            { model: directory.id, component, file: out },
            'LoRA-branched text encoder graph written beside links to its external data',
          ),
        ),
    };
  }

  /**
   * The adapters of a request, loaded and mapped to the text encoders `stage` runs. Throws
   * INVALID_ARGUMENT naming `adapters[i].name` for an unknown adapter or a file that cannot be
   * applied (the reason, and the first key that does not map, in the message).
   */
  async resolve(params: GenerationParams, directory: LoadedModelDirectory, stage: string): Promise<AdapterUse[]> {
    const list = params.adapters ?? [];
    if (list.length === 0) return [];
    const lora = await this.lora(directory, stage);
    return Promise.all(
      list.map(async (a, i) => ({ adapter: await this.store.load(a.name, i, `${directory.id}#${stage}`, lora.graphs), scale: a.scale })),
    );
  }

  /** The branch inputs of encoder `component` for a run of `batch` texts, each with the request's adapters. */
  async feeds(
    directory: LoadedModelDirectory,
    stage: string,
    component: 'text_encoder' | 'text_encoder_2',
    uses: AdapterUse[],
    batch: number,
  ): Promise<Record<string, ort.Tensor>> {
    const lora = await this.lora(directory, stage);
    const rows = Array.from({ length: batch }, () => uses);
    const feeds: Record<string, ort.Tensor> = {};
    for (const f of loraFeeds(lora.slots[component] ?? [], component, rows)) feeds[f.name] = new ort.Tensor(f.type, f.data, f.dims);
    return feeds;
  }

  private lora(directory: LoadedModelDirectory, stage: string): Promise<StageLora> {
    const key = `${directory.id}#${stage}`;
    let p = this.loras.get(key);
    if (!p) {
      p = this.readLora(directory, stage);
      p.catch(() => this.loras.delete(key));
      this.loras.set(key, p);
    }
    return p;
  }

  /**
   * The layers of the encoders `stage` runs. The denoiser's targets and those of an encoder the
   * model has but another stage runs are skipped; an encoder the model lacks is neither, so a
   * target on it refuses the file.
   */
  private async readLora(directory: LoadedModelDirectory, stage: string): Promise<StageLora> {
    const layout = directory.layout;
    const here = new Set<string>(layout.textEncoders.filter((t) => t.stage === stage).map((t) => t.component));
    const linears: Partial<Record<AdapterComponent, GraphLinears>> = {};
    const slots: StageLora['slots'] = {};
    const skip: AdapterComponent[] = ['denoiser'];
    for (const component of LORA_ENCODERS) {
      const c = layout.components[component as OnnxComponentName];
      if (!c) continue;
      if (!here.has(component)) {
        skip.push(component);
        continue;
      }
      const model = decodeModel(await readFile(c.model));
      linears[component] = findGraphLinears(model);
      slots[component] = addLoraBranches(model, [...linears[component].byModule.values()]).slots;
    }
    return { graphs: { family: layout.kind, linears, skip }, slots };
  }
}
