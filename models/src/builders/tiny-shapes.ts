import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelManifestInput } from '@diffmesh/stage-host';
import { GraphBuilder } from '../onnx/graph.js';
import { wordPieceTokenizerJson } from '../tokenizer.js';

/**
 * `diffmesh/tiny-shapes`: the embedded default model. Its output follows prompts such as
 * "a red circle on a blue background" without any training:
 *
 * - The **latent** is the picture itself at 1/8 resolution (3 channels, values in [-1, 1]),
 *   and the **VAE decoder** is a fixed ×8 bilinear upsampler.
 * - The **text encoder** turns words into attribute features: a colour word binds to the
 *   shape or "background" noun that follows it within two words; size and position words
 *   are features of their own.
 * - The **denoiser** is the exact posterior-mean (optimal) flow-matching denoiser of a
 *   built-in set of pictures — every shape × position × size × motion × foreground colour ×
 *   background colour — with the set's prior weighted by the text features. The shapes are
 *   rendered inside the graph at whatever latent size and frame count it is run with, so
 *   any size divisible by 8 works, and a video is a shape moving across the frames.
 */

/** Palette: name, RGB 0–255. Index order is the feature order. */
export const TINY_SHAPES_COLOURS: ReadonlyArray<readonly [string, readonly [number, number, number]]> = [
  ['red', [230, 25, 25]],
  ['green', [25, 200, 40]],
  ['blue', [30, 60, 230]],
  ['yellow', [245, 220, 20]],
  ['orange', [245, 140, 20]],
  ['purple', [140, 40, 200]],
  ['cyan', [20, 210, 220]],
  ['pink', [245, 120, 190]],
  ['white', [245, 245, 245]],
  ['black', [15, 15, 15]],
  ['gray', [128, 128, 128]],
];

export const TINY_SHAPES_SHAPES = ['circle', 'square', 'triangle'] as const;

const SYNONYMS: Record<string, string> = {
  grey: 'gray',
  violet: 'purple',
  disc: 'circle',
  disk: 'circle',
  ball: 'circle',
  dot: 'circle',
  round: 'circle',
  box: 'square',
  block: 'square',
  backdrop: 'background',
  tiny: 'small',
  little: 'small',
  big: 'large',
  huge: 'large',
  centre: 'center',
  middle: 'center',
};
const SIZE_WORDS = ['small', 'large'] as const;
const POSITION_WORDS = ['left', 'right', 'top', 'bottom', 'center'] as const;
const FILLER = ['a', 'an', 'the', 'on', 'in', 'with', 'and', 'of', 'over', 'at', 'moving', 'shape', 'picture', 'image', 'video'];

const C = TINY_SHAPES_COLOURS.length;
const S = TINY_SHAPES_SHAPES.length;
/** Token feature layout: colour | shape role | background role | size | position. */
const TOK_DIM = C + S + 1 + SIZE_WORDS.length + POSITION_WORDS.length;
/** Hidden layout: fg colour | bg colour | shape | size | position. */
export const TINY_SHAPES_HIDDEN = 2 * C + S + SIZE_WORDS.length + POSITION_WORDS.length;
const MAX_LENGTH = 32;
/** Strength of a mentioned attribute in the prior (log-odds per mention). */
const PRIOR_STRENGTH = 9;

/** The set of pictures the denoiser is optimal for, as mask parameters. */
const POSITIONS = [0.28, 0.5, 0.72];
const RADII = [0.15, 0.25]; // small, large — in units of the shorter side
const VELOCITIES = [-0.3, 0.3]; // horizontal travel over a whole video, in widths

interface MaskSpec {
  shape: number;
  cx: number;
  cy: number;
  size: number;
  vx: number;
}

function maskSpecs(): MaskSpec[] {
  const out: MaskSpec[] = [];
  for (let shape = 0; shape < S; shape += 1) {
    for (const cy of POSITIONS) {
      for (const cx of POSITIONS) {
        for (let size = 0; size < RADII.length; size += 1) {
          for (const vx of VELOCITIES) out.push({ shape, cx, cy, size, vx });
        }
      }
    }
  }
  return out;
}

function vocabulary(): string[] {
  const words = [
    ...TINY_SHAPES_COLOURS.map(([n]) => n),
    ...TINY_SHAPES_SHAPES,
    'background',
    ...SIZE_WORDS,
    ...POSITION_WORDS,
    ...Object.keys(SYNONYMS),
    ...FILLER,
  ];
  return words;
}

/** Row of the token feature table for one word. */
function tokenFeatures(word: string): Float32Array {
  const w = SYNONYMS[word] ?? word;
  const f = new Float32Array(TOK_DIM);
  const colour = TINY_SHAPES_COLOURS.findIndex(([n]) => n === w);
  if (colour >= 0) f[colour] = 1;
  const shape = (TINY_SHAPES_SHAPES as readonly string[]).indexOf(w);
  if (shape >= 0) f[C + shape] = 1;
  if (w === 'background') f[C + S] = 1;
  const size = (SIZE_WORDS as readonly string[]).indexOf(w);
  if (size >= 0) f[C + S + 1 + size] = 1;
  const pos = (POSITION_WORDS as readonly string[]).indexOf(w);
  if (pos >= 0) f[C + S + 1 + SIZE_WORDS.length + pos] = 1;
  return f;
}

function buildTextEncoder(words: string[]): Uint8Array {
  const g = new GraphBuilder('tiny_shapes_text_encoder');
  const ids = g.input('input_ids', 'int64', ['batch', 'length']);
  const V = words.length + 2; // [PAD], [UNK]
  const table = new Float32Array(V * TOK_DIM);
  words.forEach((w, i) => table.set(tokenFeatures(w), (i + 2) * TOK_DIM));
  const emb = g.op('Gather', [g.weight('token_features', table, [V, TOK_DIM]), ids], { axis: 0 });
  const slice = (x: string, start: number, end: number, axis: number): string =>
    g.op('Slice', [x, g.i64([start]), g.i64([end]), g.i64([axis])]);
  const colour = slice(emb, 0, C, 2);
  const shapeRole = slice(emb, C, C + S, 2);
  const bgRole = slice(emb, C + S, C + S + 1, 2);
  const rest = slice(emb, C + S + 1, TOK_DIM, 2);
  // Colour of the previous one and two tokens: pad at the front of the length axis, drop the tail.
  const shifted = (k: number): string => slice(g.op('Pad', [colour, g.i64([0, k, 0, 0, 0, 0])], { mode: 'constant' }), 0, -k, 1);
  const prevColour = g.op('Add', [shifted(1), shifted(2)]);
  const isShape = g.op('ReduceSum', [shapeRole, g.i64([2])], { keepdims: 1 });
  const fg = g.op('Mul', [prevColour, isShape]);
  const bg = g.op('Mul', [prevColour, bgRole]);
  const hidden = g.op('Concat', [fg, bg, shapeRole, rest], { axis: 2 });
  g.output(hidden, 'last_hidden_state', 'float32', ['batch', 'length', TINY_SHAPES_HIDDEN]);
  return g.build('diffmesh/tiny-shapes text encoder: attribute features per token');
}

function buildDenoiser(): Uint8Array {
  const g = new GraphBuilder('tiny_shapes_denoiser');
  const sample = g.input('sample', 'float32', ['batch', 3, 'frames', 'height', 'width']);
  const timestep = g.input('timestep', 'float32', ['batch']);
  const ehs = g.input('encoder_hidden_states', 'float32', ['batch', 'length', TINY_SHAPES_HIDDEN]);
  const specs = maskSpecs();
  const M = specs.length;
  const f32 = (name: string, arr: number[], dims: number[]): string => g.weight(name, Float32Array.from(arr), dims);
  const scalarOf = (shape: string, i: number): string => g.op('Gather', [shape, g.i64(i)], { axis: 0 });
  const toF = (x: string): string => g.op('Cast', [x], { to: 1 });

  // --- Render the picture set's masks at this latent size: [M, F, h, w] ---
  const shp = g.op('Shape', [sample]);
  const F = scalarOf(shp, 2);
  const H = scalarOf(shp, 3);
  const W = scalarOf(shp, 4);
  const Ff = toF(F);
  const Hf = toF(H);
  const Wf = toF(W);
  const side = g.op('Min', [Hf, Wf]);
  const grid = (n: string, nf: string): string => g.op('Div', [g.op('Add', [toF(g.op('Range', [g.i64(0), n, g.i64(1)])), g.f32(0.5)]), nf]);
  const xs = g.op('Reshape', [grid(W, Wf), g.i64([1, 1, 1, -1])]); // [1,1,1,w]
  const ys = g.op('Reshape', [grid(H, Hf), g.i64([1, 1, -1, 1])]); // [1,1,h,1]
  const fs = g.op('Reshape', [grid(F, Ff), g.i64([1, -1, 1, 1])]); // [1,F,1,1], 0.5 for a single frame
  const param = (name: string, pick: (s: MaskSpec) => number): string => f32(name, specs.map(pick), [M, 1, 1, 1]);
  const cx0 = param('mask_cx', (s) => s.cx);
  const vx = param('mask_vx', (s) => s.vx);
  const cy = param('mask_cy', (s) => s.cy);
  const r = param('mask_radius', (s) => RADII[s.size]);
  const cx = g.op('Add', [cx0, g.op('Mul', [vx, g.op('Sub', [fs, g.f32(0.5)])])]); // [M,F,1,1]
  const dx = g.op('Mul', [g.op('Sub', [xs, cx]), g.op('Div', [Wf, side])]); // [M,F,1,w]
  const dy = g.op('Mul', [g.op('Sub', [ys, cy]), g.op('Div', [Hf, side])]); // [M,1,h,1]
  const adx = g.op('Abs', [dx]);
  const ady = g.op('Abs', [dy]);
  const dCircle = g.op('Sub', [g.op('Sqrt', [g.op('Add', [g.op('Mul', [dx, dx]), g.op('Mul', [dy, dy])])]), r]);
  const dSquare = g.op('Sub', [g.op('Max', [adx, ady]), g.op('Mul', [r, g.f32(0.85)])]);
  // Apex-up triangle: base at dy = 0.6r, apex at dy = -r, half-base r.
  const dTriangle = g.op('Max', [
    g.op('Sub', [dy, g.op('Mul', [r, g.f32(0.6)])]),
    g.op('Div', [g.op('Sub', [g.op('Sub', [g.op('Mul', [adx, g.f32(1.6)]), dy]), r]), g.f32(Math.hypot(1.6, 1))]),
  ]);
  const oneHot = (k: number): string => param(`mask_is_${TINY_SHAPES_SHAPES[k]}`, (s) => (s.shape === k ? 1 : 0));
  const dist = g.op('Sum', [g.op('Mul', [dCircle, oneHot(0)]), g.op('Mul', [dSquare, oneHot(1)]), g.op('Mul', [dTriangle, oneHot(2)])]); // [M,F,h,w]
  // Soft edge about half a latent cell wide.
  const masks4 = g.op('Sigmoid', [g.op('Mul', [g.op('Neg', [dist]), g.op('Mul', [side, g.f32(6)])])]);
  const masks = g.op('Reshape', [masks4, g.i64([M, -1])]); // [M,N]
  const inv = g.op('Sub', [g.f32(1), masks]);
  const sumOver = (x: string): string => g.op('ReduceSum', [x, g.i64([1])], { keepdims: 0 }); // [M]
  const Am = sumOver(g.op('Mul', [masks, masks]));
  const Bm = sumOver(g.op('Mul', [masks, inv]));
  const Cm = sumOver(g.op('Mul', [inv, inv]));

  // --- Palette constants ---
  const pal = TINY_SHAPES_COLOURS.flatMap(([, rgb]) => rgb.map((v) => v / 127.5 - 1));
  const colours = f32('palette', pal, [C, 3]); // [C,3]
  const coloursT = g.op('Transpose', [colours], { perm: [1, 0] }); // [3,C]
  const norms = f32(
    'palette_sqnorm',
    TINY_SHAPES_COLOURS.map((_, c) => pal[c * 3] ** 2 + pal[c * 3 + 1] ** 2 + pal[c * 3 + 2] ** 2),
    [1, C],
  );
  const gram: number[] = [];
  for (let a = 0; a < C; a += 1) {
    for (let b = 0; b < C; b += 1) {
      gram.push(2 * (pal[a * 3] * pal[b * 3] + pal[a * 3 + 1] * pal[b * 3 + 1] + pal[a * 3 + 2] * pal[b * 3 + 2]));
    }
  }
  const gram2 = f32('palette_gram2', gram, [1, C, C]);
  const same: number[] = [];
  for (let a = 0; a < C; a += 1) for (let b = 0; b < C; b += 1) same.push(a === b ? -1e4 : 0);
  const excludeSame = f32('exclude_same_colour', same, [1, 1, C, C]);

  // --- Squared distances to every picture, up to a constant: E[B,M,C,C'] ---
  const x = g.op('Reshape', [sample, g.i64([0, 3, -1])]); // [B,3,N]
  const P = g.op('Transpose', [g.op('MatMul', [x, g.op('Transpose', [masks], { perm: [1, 0] })])], {
    perm: [0, 2, 1],
  }); // [B,M,3] = <x_ch, m>
  const X1 = g.op('ReduceSum', [x, g.i64([2])], { keepdims: 1 }); // [B,3,1]
  const X1t = g.op('Transpose', [X1], { perm: [0, 2, 1] }); // [B,1,3]
  const term1 = g.op('MatMul', [P, coloursT]); // [B,M,C]   fg · <x, m>
  const term2 = g.op('MatMul', [g.op('Sub', [X1t, P]), coloursT]); // [B,M,C'] bg · <x, 1-m>
  const col = (v: string): string => g.op('Reshape', [v, g.i64([M, 1])]);
  const term3 = g.op('Mul', [col(Am), norms]); // [M,C]
  const term5 = g.op('Mul', [col(Cm), norms]); // [M,C']
  const term4 = g.op('Mul', [g.op('Reshape', [Bm, g.i64([M, 1, 1])]), gram2]); // [M,C,C']
  const u4 = (v: string, axis: number): string => g.op('Unsqueeze', [v, g.i64([axis])]);
  const sigma = g.op('Max', [g.op('Div', [timestep, g.f32(1000)]), g.f32(1e-3)]); // [B]
  const sigmaB = g.op('Reshape', [sigma, g.i64([-1, 1, 1, 1])]);
  const alpha = g.op('Sub', [g.f32(1), sigmaB]);
  const cross = g.op('Add', [u4(term1, 3), u4(term2, 2)]); // [B,M,C,C']
  const quad = g.op('Add', [g.op('Add', [u4(term3, 2), term4]), u4(term5, 1)]); // [M,C,C']
  const energy = g.op('Add', [g.op('Mul', [g.op('Mul', [alpha, g.f32(-2)]), cross]), g.op('Mul', [g.op('Mul', [alpha, alpha]), quad])]);
  const likelihood = g.op('Div', [g.op('Neg', [energy]), g.op('Mul', [g.op('Mul', [sigmaB, sigmaB]), g.f32(2)])]);

  // --- Text prior over the picture set ---
  const pooled = g.op('ReduceSum', [ehs, g.i64([1])], { keepdims: 0 }); // [B,D]
  const feat = (start: number, end: number): string =>
    g.op('Mul', [g.op('Slice', [pooled, g.i64([start]), g.i64([end]), g.i64([1])]), g.f32(PRIOR_STRENGTH)]);
  const fgPrior = feat(0, C); // [B,C]
  const bgPrior = feat(C, 2 * C); // [B,C']
  const maskFeat = feat(2 * C, TINY_SHAPES_HIDDEN); // [B, S+2+5]
  const attr: number[] = [];
  const nAttr = TINY_SHAPES_HIDDEN - 2 * C;
  for (let k = 0; k < nAttr; k += 1) {
    for (const s of specs) {
      let v = 0;
      if (k < S) v = s.shape === k ? 1 : 0;
      else if (k < S + 2) v = s.size === k - S ? 1 : 0;
      else {
        const word = POSITION_WORDS[k - S - 2];
        if (word === 'left') v = s.cx < 0.5 ? 1 : 0;
        if (word === 'right') v = s.cx > 0.5 ? 1 : 0;
        if (word === 'top') v = s.cy < 0.5 ? 1 : 0;
        if (word === 'bottom') v = s.cy > 0.5 ? 1 : 0;
        if (word === 'center') v = s.cx === 0.5 && s.cy === 0.5 ? 1 : 0;
      }
      attr.push(v);
    }
  }
  const maskPrior = g.op('MatMul', [maskFeat, f32('mask_attributes', attr, [nAttr, M])]); // [B,M]
  const prior = g.op('Sum', [
    g.op('Reshape', [maskPrior, g.i64([-1, M, 1, 1])]),
    g.op('Reshape', [fgPrior, g.i64([-1, 1, C, 1])]),
    g.op('Reshape', [bgPrior, g.i64([-1, 1, 1, C])]),
    excludeSame,
  ]);
  const logits = g.op('Add', [likelihood, prior]); // [B,M,C,C']
  const weights = g.op('Reshape', [g.op('Softmax', [g.op('Reshape', [logits, g.i64([0, -1])])], { axis: 1 }), g.i64([-1, M, C, C])]);

  // --- Posterior mean picture and the velocity that points away from it ---
  const wFg = g.op('MatMul', [g.op('ReduceSum', [weights, g.i64([3])], { keepdims: 0 }), colours]); // [B,M,3]
  const wBg = g.op('MatMul', [g.op('ReduceSum', [weights, g.i64([2])], { keepdims: 0 }), colours]); // [B,M,3]
  const diff = g.op('Transpose', [g.op('Sub', [wFg, wBg])], { perm: [0, 2, 1] }); // [B,3,M]
  const bgMean = g.op('Transpose', [g.op('ReduceSum', [wBg, g.i64([1])], { keepdims: 1 })], { perm: [0, 2, 1] }); // [B,3,1]
  const x0 = g.op('Reshape', [g.op('Add', [g.op('MatMul', [diff, masks]), bgMean]), shp]);
  const velocity = g.op('Div', [g.op('Sub', [sample, x0]), sigmaB5(g, sigma)]);
  g.output(velocity, 'out', 'float32', ['batch', 3, 'frames', 'height', 'width']);
  return g.build('diffmesh/tiny-shapes denoiser: exact posterior-mean flow-matching denoiser of a rendered picture set');
}

function sigmaB5(g: GraphBuilder, sigma: string): string {
  return g.op('Reshape', [sigma, g.i64([-1, 1, 1, 1, 1])]);
}

function buildVaeDecoder(): Uint8Array {
  const g = new GraphBuilder('tiny_shapes_vae_decoder');
  const latent = g.input('latent', 'float32', ['batch', 3, 'frames', 'height', 'width']);
  const shp = g.op('Shape', [latent]);
  const dims = (idx: number[]): string => g.op('Gather', [shp, g.i64(idx)], { axis: 0 });
  // [B,3,F,h,w] → [B,F,3,h,w] → [B·F,3,h,w] → ×8 → back.
  const bf = g.op('Transpose', [latent], { perm: [0, 2, 1, 3, 4] });
  const flat = g.op('Reshape', [bf, g.op('Concat', [g.i64([-1, 3]), dims([3, 4])], { axis: 0 })]);
  const up = g.op('Resize', [flat, '', g.f32([1, 1, 8, 8])], { mode: 'linear' });
  const upShape = g.op('Shape', [up]);
  const back = g.op('Reshape', [
    up,
    g.op('Concat', [dims([0, 2]), g.i64([3]), g.op('Gather', [upShape, g.i64([2, 3])], { axis: 0 })], { axis: 0 }),
  ]);
  const rgb = g.op('Clip', [g.op('Transpose', [back], { perm: [0, 2, 1, 3, 4] }), g.f32(-1), g.f32(1)]);
  g.output(rgb, 'sample', 'float32', ['batch', 3, 'frames', 'pixel_height', 'pixel_width']);
  return g.build('diffmesh/tiny-shapes decoder: ×8 bilinear upsampler');
}

/**
 * The VAE encoder, for image-to-video: 8×8 average pooling of each frame (the latent is the
 * picture at 1/8 resolution), the decoder's right inverse for pictures constant on 8×8 blocks.
 */
function buildVaeEncoder(): Uint8Array {
  const g = new GraphBuilder('tiny_shapes_vae_encoder');
  const sample = g.input('sample', 'float32', ['batch', 3, 'frames', 'pixel_height', 'pixel_width']);
  const shp = g.op('Shape', [sample]);
  const dims = (idx: number[]): string => g.op('Gather', [shp, g.i64(idx)], { axis: 0 });
  // [B,3,F,H,W] → [B,F,3,H,W] → [B·F,3,H,W] → 8×8 mean → back.
  const bf = g.op('Transpose', [sample], { perm: [0, 2, 1, 3, 4] });
  const flat = g.op('Reshape', [bf, g.op('Concat', [g.i64([-1, 3]), dims([3, 4])], { axis: 0 })]);
  const pooled = g.op('AveragePool', [flat], { kernel_shape: [8, 8], strides: [8, 8] });
  const pooledShape = g.op('Shape', [pooled]);
  const back = g.op('Reshape', [
    pooled,
    g.op('Concat', [dims([0, 2]), g.i64([3]), g.op('Gather', [pooledShape, g.i64([2, 3])], { axis: 0 })], { axis: 0 }),
  ]);
  g.output(g.op('Transpose', [back], { perm: [0, 2, 1, 3, 4] }), 'latent', 'float32', ['batch', 3, 'frames', 'height', 'width']);
  return g.build('diffmesh/tiny-shapes encoder: 8×8 average pooling');
}

/** Bump when the builder's output changes, so cached builds are redone. */
export const TINY_SHAPES_BUILDER_VERSION = '2';

/** Builds `diffmesh/tiny-shapes` into `outDir`. */
export async function buildTinyShapes(outDir: string): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const words = vocabulary();
  const manifest: ModelManifestInput = {
    name: 'diffmesh/tiny-shapes',
    version: '1.0.0',
    description:
      'Built-in model whose pictures follow prompts of colour, shape, size and position; ' +
      'the exact posterior-mean denoiser of a rendered picture set.',
    modalities: ['text-to-image', 'text-to-video', 'image-to-video'],
    prediction: 'flow',
    sampler: { type: 'flow_euler', shift: 1 },
    latent: { channels: 3, spatialFactor: 8, temporalFactor: 1 },
    // The latent is the picture (the decoder only upsamples it): its previews are exact.
    preview: {
      rgbFactors: [
        [1, 0, 0],
        [0, 1, 0],
        [0, 0, 1],
      ],
    },
    text: { tokenizer: 'tokenizer.json', maxLength: MAX_LENGTH, hiddenSize: TINY_SHAPES_HIDDEN, padId: 0 },
    defaults: { width: 256, height: 256, numFrames: 1, steps: 20, guidanceScale: 3, fps: 8 },
    limits: { maxWidth: 512, maxHeight: 512, maxFrames: 32 },
    files: { textEncoder: 'text_encoder.onnx', denoiser: 'denoiser.onnx', vaeDecoder: 'vae_decoder.onnx', vaeEncoder: 'vae_encoder.onnx' },
  };
  await writeFile(path.join(outDir, 'model.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await writeFile(path.join(outDir, 'tokenizer.json'), wordPieceTokenizerJson(words));
  await writeFile(path.join(outDir, 'text_encoder.onnx'), buildTextEncoder(words));
  await writeFile(path.join(outDir, 'denoiser.onnx'), buildDenoiser());
  await writeFile(path.join(outDir, 'vae_decoder.onnx'), buildVaeDecoder());
  await writeFile(path.join(outDir, 'vae_encoder.onnx'), buildVaeEncoder());
}
