import { adapterFileError } from './adapter-error.js';
import { loraFamilies, type BaseFamily } from './base-model.js';
import type { GraphLinear, GraphLinears } from './graph-targets.js';
import { sgmToDiffusersFlat } from './kohya-names.js';
import type { AdapterComponent, LoraFile, LoraTarget } from './lora-file.js';

/** One LoRA target tied to the graph layer it updates. */
export interface MappedTarget {
  target: LoraTarget;
  linear: GraphLinear;
}

/** A LoRA file tied to a model's graphs: per component, the layers it updates (by module path). */
export interface MappedAdapter {
  format: LoraFile['format'];
  components: Partial<Record<AdapterComponent, Map<string, MappedTarget>>>;
  /** Bytes the adapter's matrices hold in memory (float32). */
  bytes: number;
  /** Targets of the components left out ({@link ModelGraphs.skip}). */
  skipped: number;
}

/** What the mapping needs to know about the model. */
export interface ModelGraphs {
  family: BaseFamily;
  /** The linear layers of each component graph the model has. */
  linears: Partial<Record<AdapterComponent, GraphLinears>>;
  /** The UNet's `layers_per_block` (kohya's SDXL block names); default 2. */
  layersPerBlock?: number;
  /**
   * Components whose targets are left out rather than mapped (a stage that applies only the
   * denoiser's part of a file); default none. They are counted in {@link MappedAdapter.skipped}.
   */
  skip?: AdapterComponent[];
}

function findLinear(t: LoraTarget, linears: GraphLinears, layersPerBlock: number): GraphLinear | undefined {
  if (!t.module.includes('.')) {
    const flat = t.component === 'denoiser' ? sgmToDiffusersFlat(t.module, layersPerBlock) : t.module;
    return linears.byFlatName.get(flat);
  }
  return linears.byModule.get(t.module);
}

/**
 * Ties every target of `lora` to a layer of the model's graphs. A file for another family
 * is refused before any target is looked at; then the first target without a layer (or whose
 * widths differ from the layer's: a file for another base model of the family) is refused
 * naming its key. Nothing is partly applied.
 */
export function mapLoraToGraphs(lora: LoraFile, file: string, model: ModelGraphs): MappedAdapter {
  const families = loraFamilies(lora);
  if (!families.includes(model.family)) {
    throw adapterFileError(file, `is a LoRA for ${families.join(' / ')}, the model is ${model.family}`);
  }
  const components: MappedAdapter['components'] = {};
  let bytes = 0;
  let skipped = 0;
  for (const t of lora.targets) {
    if (model.skip?.includes(t.component)) {
      skipped += 1;
      continue;
    }
    const linears = model.linears[t.component];
    if (!linears) throw adapterFileError(file, `key ${t.key}: the model has no ${t.component} graph to apply it to`, { key: t.key });
    const linear = findLinear(t, linears, model.layersPerBlock ?? 2);
    if (!linear) throw adapterFileError(file, `key ${t.key}: no linear layer ${t.module} in the ${t.component} graph`, { key: t.key });
    if (linear.inDim !== t.inDim || linear.outDim !== t.outDim) {
      throw adapterFileError(
        file,
        `key ${t.key}: updates ${t.inDim} → ${t.outDim}, layer ${linear.module} is ${linear.inDim} → ${linear.outDim} (a LoRA for another base model)`,
        { key: t.key, node: linear.node },
      );
    }
    const map = components[t.component] ?? new Map<string, MappedTarget>();
    components[t.component] = map;
    if (map.has(linear.module)) throw adapterFileError(file, `key ${t.key}: layer ${linear.module} is targeted twice`, { key: t.key });
    map.set(linear.module, { target: t, linear });
    bytes += (t.down.length + t.up.length) * 4;
  }
  return { format: lora.format, components, bytes, skipped };
}
