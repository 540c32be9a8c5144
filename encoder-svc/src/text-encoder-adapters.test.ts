/**
 * LoRA adapters on a model directory's text encoders: the text-encoder part of a request's
 * files (kohya `lora_te_` / `lora_te1_` / `lora_te2_`, PEFT `text_encoder.` / `text_encoder_2.`)
 * changes the embeddings exactly as the same encoder with the LoRA merged into its weights does;
 * at scale 0, or without adapters, the branched encoder gives the base embeddings bit for bit;
 * a file whose text-encoder keys do not map is refused naming the key.
 */
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  decodeModel,
  encodeModel,
  encodeSafetensors,
  findGraphLinears,
  loadLoraAdapter,
  mergeLora,
  type AdapterComponent,
  type BaseFamily,
} from '@diffmesh/adapters';
import { buildSdDir, buildSdxlDir, defaultModelsRoot, writeTestLora } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, type TensorStore } from '@diffmesh/tensor-client';
import { silentLogger, type AdapterParams, type StageTask } from '@diffmesh/core';
import { TextEncoderAdapters } from './text-encoder-adapters.js';
import { TextEncodingStage } from './text-encoding-stage.js';
import { rejection } from '@diffmesh/testing';

let store: TensorStore;
let sessions: SessionCache;
let root: string;
let loraDir: string;
let adapters: TextEncoderAdapters;
const dirs: Record<string, string> = {};

beforeAll(async () => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-te-lora-'));
  dirs['test/sd'] = path.join(root, 'sd');
  dirs['test/sdxl'] = path.join(root, 'sdxl');
  await buildSdDir(dirs['test/sd'], { textEncoderLayer: true, attentionBlock: true, hiddenSize: 32 });
  await buildSdxlDir(dirs['test/sdxl'], { textEncoderLayer: true });
  loraDir = path.join(root, 'loras');
  await mkdir(loraDir);
  const te = { component: 'text_encoder' as const, hidden: 32 };
  const te2 = { component: 'text_encoder_2' as const, hidden: 48 };
  // PEFT, text encoder only, alpha in lora_adapter_metadata.
  await writeTestLora(path.join(loraDir, 'te-peft.safetensors'), {
    format: 'peft',
    crossAttentionDim: 32,
    modules: [],
    textEncoders: [te],
    alpha: 2,
    seed: 41,
  });
  // kohya, UNet and text encoder in one file (the UNet part is the denoiser's), float16, alpha per layer.
  await writeTestLora(path.join(loraDir, 'te-kohya.safetensors'), {
    format: 'kohya',
    crossAttentionDim: 32,
    textEncoders: [te],
    rank: 2,
    alpha: 1,
    dtype: 'F16',
    seed: 42,
  });
  // SDXL: kohya lora_te1_ / lora_te2_, and PEFT text_encoder. / text_encoder_2.
  await writeTestLora(path.join(loraDir, 'xl-kohya.safetensors'), {
    format: 'kohya',
    crossAttentionDim: 80,
    modules: [],
    textEncoders: [te, te2],
    kohyaTe1Prefix: 'lora_te1',
    alpha: 8,
    seed: 43,
  });
  await writeTestLora(path.join(loraDir, 'xl-peft.safetensors'), {
    format: 'peft',
    crossAttentionDim: 80,
    modules: [],
    textEncoders: [te, te2],
    seed: 44,
  });
  adapters = new TextEncoderAdapters({ dir: loraDir, log: silentLogger() });
});
afterAll(async () => {
  adapters.close();
  await sessions.close();
  await store.close();
  await rm(root, { recursive: true, force: true });
});

function stage(opts: { stage?: 'text_encoding' | 'text_encoding_2'; adapters?: TextEncoderAdapters; dirs?: Record<string, string> } = {}) {
  return new TextEncodingStage({
    catalog: new ModelCatalog([defaultModelsRoot()], { directories: opts.dirs ?? dirs }),
    sessions,
    store,
    models: [],
    ...(opts.stage ? { stage: opts.stage } : {}),
    ...(opts.adapters ? { adapters: opts.adapters } : {}),
  });
}

let seq = 0;
function task(model: string, stageName: StageTask['stage'], adapterList: AdapterParams[] = []): StageTask {
  seq += 1;
  return {
    reqId: `te-${seq}`,
    stageIndex: 0,
    stage: stageName,
    attempt: 1,
    model,
    params: {
      prompt: 'a red circle on a blue square',
      negativePrompt: 'green',
      width: 64,
      height: 64,
      numFrames: 1,
      numInferenceSteps: 4,
      guidanceScale: 5,
      seed: '1',
      fps: 8,
      ...(adapterList.length ? { adapters: adapterList } : {}),
    },
    inputs: {},
    deadline: 0,
    traceContext: {},
  };
}

/** Every output of a task, by name. */
async function encode(s: TextEncodingStage, t: StageTask): Promise<{ outputs: Record<string, Float32Array>; warnings?: string[] }> {
  const result = await s.execute(t, { signal: new AbortController().signal, log: silentLogger(), onProgress: () => undefined });
  const outputs: Record<string, Float32Array> = {};
  for (const [name, ref] of Object.entries(result.outputs)) outputs[name] = float32View((await store.get(ref)).data).slice();
  return { outputs, ...(result.warnings ? { warnings: result.warnings } : {}) };
}

function worst(a: Record<string, Float32Array>, b: Record<string, Float32Array>): number {
  expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
  let m = 0;
  for (const name of Object.keys(a)) {
    expect(a[name].length).toBe(b[name].length);
    for (let i = 0; i < a[name].length; i += 1) m = Math.max(m, Math.abs(a[name][i] - b[name][i]));
  }
  return m;
}

/** A copy of a test directory whose text encoders have `adapter` merged into their weights at `scale` (the adapters package's merge). */
async function mergedDirectory(model: string, family: BaseFamily, adapter: string, scale: number): Promise<string> {
  const dir = path.join(root, `${path.basename(dirs[model])}-${adapter}-${scale}`);
  await cp(dirs[model], dir, { recursive: true });
  const bytes = await readFile(path.join(loraDir, `${adapter}.safetensors`));
  const encoders: AdapterComponent[] = family === 'sdxl' ? ['text_encoder', 'text_encoder_2'] : ['text_encoder'];
  for (const component of encoders) {
    const file = path.join(dir, component, 'model.onnx');
    const model = decodeModel(await readFile(file));
    const mapped = loadLoraAdapter(bytes, adapter, {
      family,
      linears: { [component]: findGraphLinears(model) },
      skip: ['denoiser', 'text_encoder', 'text_encoder_2'].filter((c) => c !== component) as AdapterComponent[],
    });
    await writeFile(file, encodeModel(mergeLora(model, component, [{ adapter: mapped, scale }])));
  }
  return dir;
}

describe('LoRA adapters in the text-encoding stage', () => {
  const cases: Array<{ model: string; family: BaseFamily; adapter: string; stages: Array<'text_encoding' | 'text_encoding_2'> }> = [
    { model: 'test/sd', family: 'sd', adapter: 'te-peft', stages: ['text_encoding'] },
    { model: 'test/sd', family: 'sd', adapter: 'te-kohya', stages: ['text_encoding'] },
    { model: 'test/sdxl', family: 'sdxl', adapter: 'xl-kohya', stages: ['text_encoding', 'text_encoding_2'] },
    { model: 'test/sdxl', family: 'sdxl', adapter: 'xl-peft', stages: ['text_encoding', 'text_encoding_2'] },
  ];
  for (const c of cases) {
    it(`${c.adapter}: the branched encoder gives the merged-weights embeddings; scale 0 and no adapters give the base ones exactly`, async () => {
      const scale = 0.8;
      const merged = await mergedDirectory(c.model, c.family, c.adapter, scale);
      for (const name of c.stages) {
        const withLora = stage({ stage: name, adapters });
        const base = await encode(stage({ stage: name }), task(c.model, name));
        const branched = await encode(withLora, task(c.model, name, [{ name: c.adapter, scale }]));
        const reference = await encode(stage({ stage: name, dirs: { [c.model]: merged } }), task(c.model, name));
        expect(worst(branched.outputs, reference.outputs)).toBeLessThan(1e-5);
        // The adapter changes the embeddings (so the comparison above means something).
        expect(worst(branched.outputs, base.outputs)).toBeGreaterThan(1e-3);
        // Scale 0, and a request without adapters on the same (branched) session: the base bit for bit.
        expect(worst((await encode(withLora, task(c.model, name, [{ name: c.adapter, scale: 0 }]))).outputs, base.outputs)).toBe(0);
        expect(worst((await encode(withLora, task(c.model, name))).outputs, base.outputs)).toBe(0);
      }
    });
  }

  it('two adapters at their scales add up, as both merged', async () => {
    const uses = [
      { name: 'te-peft', scale: 0.5 },
      { name: 'te-kohya', scale: -1.5 },
    ];
    const dir = path.join(root, 'sd-two');
    await cp(dirs['test/sd'], dir, { recursive: true });
    const file = path.join(dir, 'text_encoder', 'model.onnx');
    const model = decodeModel(await readFile(file));
    const graphs = { family: 'sd' as const, linears: { text_encoder: findGraphLinears(model) }, skip: ['denoiser' as const] };
    const mapped = await Promise.all(
      uses.map(async (u) => ({
        adapter: loadLoraAdapter(await readFile(path.join(loraDir, `${u.name}.safetensors`)), u.name, graphs),
        scale: u.scale,
      })),
    );
    await writeFile(file, encodeModel(mergeLora(model, 'text_encoder', mapped)));
    const branched = await encode(stage({ adapters }), task('test/sd', 'text_encoding', uses));
    const reference = await encode(stage({ dirs: { 'test/sd': dir } }), task('test/sd', 'text_encoding'));
    expect(worst(branched.outputs, reference.outputs)).toBeLessThan(1e-5);
  });

  it('refuses a file whose text-encoder keys do not map, naming the first such key', async () => {
    const t = (shape: number[]) => ({ dtype: 'F32' as const, shape, data: new Array<number>(shape[0] * shape[1]).fill(0.01) });
    const good = 'text_encoder.text_model.encoder.layers.0.self_attn.q_proj';
    const missing = 'text_encoder.text_model.encoder.layers.7.self_attn.q_proj';
    await writeFile(
      path.join(loraDir, 'te-unmapped.safetensors'),
      encodeSafetensors({
        [`${good}.lora_A.weight`]: t([2, 32]),
        [`${good}.lora_B.weight`]: t([32, 2]),
        [`${missing}.lora_A.weight`]: t([2, 32]),
        [`${missing}.lora_B.weight`]: t([32, 2]),
      }),
    );
    const err = await rejection(encode(stage({ adapters }), task('test/sd', 'text_encoding', [{ name: 'te-unmapped', scale: 1 }])));
    expect(err.reason).toBe('INVALID_PARAMETER');
    expect(err.message).toContain('adapters[0].name');
    expect(err.message).toContain(`key ${missing}.lora_A.weight`);
    expect(err.message).toContain('no linear layer text_model.encoder.layers.7.self_attn.q_proj in the text_encoder graph');

    // kohya: an SDXL second encoder's width on SD's encoder (another base model).
    await writeTestLora(path.join(loraDir, 'te-wide.safetensors'), {
      format: 'kohya',
      crossAttentionDim: 32,
      modules: [],
      textEncoders: [{ component: 'text_encoder', hidden: 48 }],
      seed: 45,
    });
    const wide = await rejection(encode(stage({ adapters }), task('test/sd', 'text_encoding', [{ name: 'te-wide', scale: 1 }])));
    expect(wide.message).toMatch(/key lora_te_text_model_encoder_layers_0_\w+\.lora_down\.weight: updates 48 → \d+, layer .* is 32 → \d+/);
  });

  it('without --lora-dir, says the text-encoder part of a request’s adapters is not applied', async () => {
    const { warnings } = await encode(stage(), task('test/sd', 'text_encoding', [{ name: 'te-peft', scale: 1 }]));
    expect(warnings?.some((w) => w.startsWith('adapters: this text_encoding stage serves no adapters'))).toBe(true);
  });
});
