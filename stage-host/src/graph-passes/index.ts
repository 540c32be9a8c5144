/**
 * Graph rewrites at load: small passes over an ONNX model that run once when a session is
 * made (the file on disk is never changed). See {@link graphPassesFor} for the pipeline.
 */
export { runGraphPasses } from './graph-pass.js';
export type { GraphPass, PassRefusal, PassReport } from './graph-pass.js';
export { fuseAttention } from './fuse-attention.js';
export { fuseGelu } from './fuse-gelu.js';
export { fuseLayerNorm, fuseSkipLayerNorm } from './fuse-layer-norm.js';
export { dequantizeInt4, INT4_BLOCK, int4Weights, quantizeInt4 } from './quantize-int4.js';
export type { Int4Options, Int4Weight } from './quantize-int4.js';
export { graphPassesFor, KERNEL_CHOICES, rewriteModelFile, WEIGHT_CHOICES } from './graph-rewrites.js';
export type { GraphRewriteOptions, RewrittenModel } from './graph-rewrites.js';
export { decodeModel, encodeModel, GraphIndex, moveToExternalData, readModelFile, weightBytes } from './onnx-model.js';
export type { ModelProto, NodeProto } from './onnx-model.js';
