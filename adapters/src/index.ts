export { AdapterCache } from './adapter-cache.js';
export { adapterFileError } from './adapter-error.js';
export { mapLoraToGraphs } from './adapter-mapping.js';
export type { MappedAdapter, MappedTarget, ModelGraphs } from './adapter-mapping.js';
export { AdapterStore } from './adapter-store.js';
export type { AdapterStoreOptions } from './adapter-store.js';
export { loraFamilies } from './base-model.js';
export { branchedGraphSource } from './branched-graph.js';
export type { BaseFamily } from './base-model.js';
export { findGraphLinears, moduleOfNodeName } from './graph-targets.js';
export type { GraphLinear, GraphLinears, ModelProto } from './graph-targets.js';
export { kohyaFlatName, sgmToDiffusersFlat } from './kohya-names.js';
export { loadLoraAdapter } from './lora-adapter.js';
export { loraFeeds } from './lora-feeds.js';
export type { AdapterUse, LoraFeed } from './lora-feeds.js';
export { readLoraFile } from './lora-file.js';
export type { AdapterComponent, LoraFile, LoraFormat, LoraTarget } from './lora-file.js';
export { mergeLora } from './lora-merge.js';
export { addLoraBranches, loraInputNames } from './lora-pass.js';
export type { LoraSlot } from './lora-pass.js';
export { encodeSafetensors, MAX_HEADER_BYTES, parseSafetensors } from './safetensors.js';
export type { SafetensorsDtype, SafetensorsFile, SafetensorsTensor, TensorToWrite } from './safetensors.js';
export {
  ADAPTER_FILE_SUFFIX,
  addAdapterFile,
  adapterFilePath,
  DEFAULT_MAX_ADAPTER_FILE_BYTES,
  listAdapterFiles,
  readAdapterBytes,
  removeAdapterFile,
  statAdapterFile,
  summariseAdapter,
} from './adapter-directory.js';
export type { AdapterFileInfo, AdapterSummary } from './adapter-directory.js';
export { decodeModel, encodeModel, externalDataFiles, inlineExternalData } from './onnx-model.js';
