import { toFloat16 } from '@diffmesh/tensor-client';
import type { MappedAdapter } from './adapter-mapping.js';
import { FLOAT16 } from './graph-targets.js';
import type { AdapterComponent } from './lora-file.js';
import type { LoraSlot } from './lora-pass.js';

/** An adapter a batch item uses, at the request's scale. */
export interface AdapterUse {
  adapter: MappedAdapter;
  scale: number;
}

/** One graph input of the LoRA branches: float32 values, or float16 bits for a float16 graph. */
export interface LoraFeed {
  name: string;
  type: 'float32' | 'float16';
  dims: number[];
  data: Float32Array | Uint16Array;
}

/**
 * The inputs of every LoRA branch of a run whose batch items use `rows[b]` (several adapters
 * each, or none). Per layer, the items' ranks are stacked: an item with adapters of ranks r₁, r₂
 * gets D = [D₁ᵀ | D₂ᵀ] and U = [s₁·U₁ᵀ ; s₂·U₂ᵀ] (s = the request's scale × the file's alpha / rank),
 * so x·D·U = Σ sᵢ·x·ΔWᵢᵀ, and every item is padded with zeros to the run's largest rank (at least
 * 1): an item without an adapter, or at scale 0, adds exactly 0.
 */
export function loraFeeds(slots: LoraSlot[], component: AdapterComponent, rows: AdapterUse[][]): LoraFeed[] {
  const feeds: LoraFeed[] = [];
  for (const slot of slots) {
    const perRow = rows.map((uses) =>
      uses.flatMap((u) => {
        const t = u.adapter.components[component]?.get(slot.module);
        return t ? [{ t: t.target, s: u.scale * t.target.alphaScale }] : [];
      }),
    );
    const rank = Math.max(1, ...perRow.map((r) => r.reduce((a, x) => a + x.t.rank, 0)));
    const B = rows.length;
    const down = new Float32Array(B * slot.inDim * rank);
    const up = new Float32Array(B * rank * slot.outDim);
    perRow.forEach((items, b) => {
      let off = 0;
      for (const { t, s } of items) {
        const dBase = b * slot.inDim * rank;
        for (let r = 0; r < t.rank; r += 1) {
          for (let i = 0; i < slot.inDim; i += 1) down[dBase + i * rank + off + r] = t.down[r * slot.inDim + i];
        }
        const uBase = b * rank * slot.outDim;
        for (let r = 0; r < t.rank; r += 1) {
          for (let o = 0; o < slot.outDim; o += 1) up[uBase + (off + r) * slot.outDim + o] = s * t.up[o * t.rank + r];
        }
        off += t.rank;
      }
    });
    const half = slot.elemType === FLOAT16;
    const type = half ? 'float16' : 'float32';
    feeds.push({ name: slot.downInput, type, dims: [B, slot.inDim, rank], data: half ? toFloat16(down) : down });
    feeds.push({ name: slot.upInput, type, dims: [B, rank, slot.outDim], data: half ? toFloat16(up) : up });
  }
  return feeds;
}
