import { mapLoraToGraphs, type MappedAdapter, type ModelGraphs } from './adapter-mapping.js';
import { readLoraFile } from './lora-file.js';
import { parseSafetensors } from './safetensors.js';

/**
 * A LoRA file's bytes → the adapter tied to the model's graphs: parsed (safetensors), read
 * (PEFT or kohya layout) and mapped, or refused with the reason (see the three steps).
 */
export function loadLoraAdapter(bytes: Uint8Array, file: string, model: ModelGraphs): MappedAdapter {
  return mapLoraToGraphs(readLoraFile(parseSafetensors(bytes, file), file), file, model);
}
