import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '@diffmesh/core';
import {
  checkDirectoryGraphs,
  directoryPlan,
  directorySlug,
  looksLikePath,
  parsePythonJson,
  readDiffusersLayout,
  readGraphIo,
  type DiffusersLayout,
} from './index.js';

const { onnx } = onnxProto;
type Dim = number | string;
type Io = [name: string, type: number, dims: Dim[]];
const F = onnx.TensorProto.DataType.FLOAT;
const H = onnx.TensorProto.DataType.FLOAT16;
const I64 = onnx.TensorProto.DataType.INT64;
const I32 = onnx.TensorProto.DataType.INT32;

function valueInfo([name, type, dims]: Io) {
  return new onnx.ValueInfoProto({
    name,
    type: new onnx.TypeProto({
      tensorType: new onnx.TypeProto.Tensor({
        elemType: type,
        shape: new onnx.TensorShapeProto({
          dim: dims.map((d) =>
            typeof d === 'number'
              ? new onnx.TensorShapeProto.Dimension({ dimValue: d })
              : new onnx.TensorShapeProto.Dimension({ dimParam: d }),
          ),
        }),
      }),
    }),
  });
}

/** A model whose graph only declares its I/O (plus a weight, listed as an input as IR < 4 did). */
function graphBytes(inputs: Io[], outputs: Io[]): Uint8Array {
  const weight = new onnx.TensorProto({ name: 'weight', dataType: F, dims: [4096], rawData: new Uint8Array(4096 * 4) });
  const model = new onnx.ModelProto({
    irVersion: 3,
    producerName: 'test',
    graph: new onnx.GraphProto({
      name: 'g',
      initializer: [weight],
      input: [...inputs, ['weight', F, [4096]] as Io].map(valueInfo),
      output: outputs.map(valueInfo),
    }),
    opsetImport: [new onnx.OperatorSetIdProto({ domain: '', version: 17 })],
  });
  return onnx.ModelProto.encode(model).finish();
}

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'model-layout-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

interface SdOptions {
  unetInputs?: Io[];
  crossAttention?: number;
  drop?: string[];
  modelIndex?: Record<string, unknown>;
  sampleSize?: number;
}

/** An SD 1.x directory whose graphs declare optimum's I/O (hidden 32). */
async function sdDir(name: string, o: SdOptions = {}): Promise<string> {
  const dir = path.join(root, name);
  const write = async (rel: string, data: string | Uint8Array) => {
    if (o.drop?.includes(rel)) return;
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), data);
  };
  const json = (v: unknown) => JSON.stringify(v);
  await write(
    'model_index.json',
    json(o.modelIndex ?? { _class_name: 'StableDiffusionPipeline', unet: ['diffusers', 'UNet2DConditionModel'] }),
  );
  await write('scheduler/scheduler_config.json', '{"_class_name": "PNDMScheduler", "clip_sample_range": Infinity}');
  await write('tokenizer/vocab.json', '{}');
  await write('tokenizer/merges.txt', '#version: 0.2\n');
  await write('text_encoder/config.json', json({ hidden_size: 32 }));
  await write(
    'text_encoder/model.onnx',
    graphBytes(
      [['input_ids', I32, ['batch_size', 'sequence_length']]],
      [
        ['last_hidden_state', F, ['batch_size', 'sequence_length', 32]],
        ['pooler_output', F, ['batch_size', 32]],
      ],
    ),
  );
  const cross = o.crossAttention ?? 32;
  await write('unet/config.json', json({ cross_attention_dim: cross, sample_size: o.sampleSize ?? 8 }));
  await write(
    'unet/model.onnx',
    graphBytes(
      o.unetInputs ?? [
        ['sample', F, ['batch_size', 4, 'height', 'width']],
        ['timestep', I64, []],
        ['encoder_hidden_states', F, ['batch_size', 'sequence_length', cross]],
      ],
      [['out_sample', F, ['batch_size', 4, 'height', 'width']]],
    ),
  );
  await write('vae_decoder/config.json', json({ scaling_factor: 0.5, latent_channels: 4, block_out_channels: [8, 16, 32, 32] }));
  await write(
    'vae_decoder/model.onnx',
    graphBytes([['latent_sample', F, ['batch_size', 4, 'h', 'w']]], [['sample', F, ['batch_size', 3, 'H', 'W']]]),
  );
  await write('vae_encoder/config.json', json({ scaling_factor: 0.5 }));
  await write(
    'vae_encoder/model.onnx',
    graphBytes([['sample', H, ['batch_size', 3, 'H', 'W']]], [['latent_parameters', H, ['batch_size', 8, 'h', 'w']]]),
  );
  return dir;
}

async function loadError(dir: string, graphs = true): Promise<DiffmeshError> {
  try {
    const layout = await readDiffusersLayout(dir);
    if (graphs) await checkDirectoryGraphs(layout);
  } catch (err) {
    expect(err).toBeInstanceOf(DiffmeshError);
    const e = err as DiffmeshError;
    expect(e.reason).toBe('MODEL_LOAD_FAILED');
    expect(e.code).toBe(Code.FAILED_PRECONDITION);
    return e;
  }
  throw new Error('expected the directory to be refused');
}

describe('readGraphIo', () => {
  it('reads names, element types and shapes from the header, leaving out weights listed as inputs', async () => {
    const file = path.join(root, 'io.onnx');
    await writeFile(
      file,
      graphBytes(
        [
          ['sample', H, ['batch', 4, 64, 64]],
          ['timestep', I64, []],
        ],
        [['out', F, ['batch', 4, 64, 64]]],
      ),
    );
    const io = await readGraphIo(file);
    expect(io.inputs).toEqual([
      { name: 'sample', type: 'float16', shape: ['batch', 4, 64, 64] },
      { name: 'timestep', type: 'int64', shape: [] },
    ]);
    expect(io.outputs).toEqual([{ name: 'out', type: 'float32', shape: ['batch', 4, 64, 64] }]);
  });

  it('refuses a file that is not an ONNX model, naming it', async () => {
    const file = path.join(root, 'junk.onnx');
    await writeFile(file, Buffer.from('not a model at all, just text'));
    await expect(readGraphIo(file)).rejects.toThrow(file);
  });
});

describe('readDiffusersLayout', () => {
  let layout: DiffusersLayout;
  beforeAll(async () => {
    layout = await readDiffusersLayout(await sdDir('sd'));
  });

  it('decides the kind, reads the VAE factors and the defaults from the configs', () => {
    expect(layout.kind).toBe('sd');
    expect(layout.vae).toEqual({ scalingFactor: 0.5, shiftFactor: 0, latentChannels: 4, scaleFactor: 8 });
    expect(layout.defaults).toEqual({ width: 64, height: 64, steps: 50, guidanceScale: 7.5 });
    expect(layout.guidance).toBe('cfg');
    expect(layout.imageInput).toBe(true);
    expect(layout.schedulerConfig.clip_sample_range).toBe(Infinity);
  });

  it('plans text_encoding, an optional image_encoding, denoising and vae_decoding, each in its own pool', () => {
    const plan = directoryPlan(layout);
    const slug = directorySlug(layout.dir);
    expect(plan.stages.map((s) => [s.name, s.pool, s.requires])).toEqual([
      ['text_encoding', `encoder-${slug}`, undefined],
      ['image_encoding', `vae-encoder-${slug}`, 'input_image'],
      ['denoising', `dit-${slug}`, undefined],
      ['vae_decoding', `vae-${slug}`, undefined],
    ]);
    expect(slug).toMatch(/^sd-[0-9a-f]{6}$/);
    expect(plan.constraints.sizeMultiple).toBe(8);
  });

  it('reads the graphs and accepts a consistent directory', async () => {
    const graphs = await checkDirectoryGraphs(layout);
    expect(graphs.unet?.inputs.map((i) => i.name)).toEqual(['sample', 'timestep', 'encoder_hidden_states']);
  });

  it('tells paths from registry names', () => {
    expect(looksLikePath('/models/sd')).toBe(true);
    expect(looksLikePath('./sd')).toBe(true);
    expect(looksLikePath('../sd')).toBe(true);
    expect(looksLikePath('diffmesh/tiny-shapes')).toBe(false);
  });
});

describe('a wrong layout fails at load, naming the file and the input', () => {
  it('a missing model file', async () => {
    const e = await loadError(await sdDir('no-unet', { drop: ['unet/model.onnx'] }), false);
    expect(e.message).toContain('unet/model.onnx: missing');
    expect(e.metadata.file).toBe('unet/model.onnx');
  });

  it('a missing scheduler config', async () => {
    const e = await loadError(await sdDir('no-scheduler', { drop: ['scheduler/scheduler_config.json'] }), false);
    expect(e.message).toContain('scheduler/scheduler_config.json: missing');
  });

  it('a missing model_index.json', async () => {
    const e = await loadError(await sdDir('no-index', { drop: ['model_index.json'] }), false);
    expect(e.message).toContain('model_index.json: missing');
  });

  it('a missing tokenizer', async () => {
    const e = await loadError(await sdDir('no-tokenizer', { drop: ['tokenizer/vocab.json'] }), false);
    expect(e.message).toContain('tokenizer/tokenizer.json: missing (and no vocab.json + merges.txt');
  });

  it('a UNet without encoder_hidden_states', async () => {
    const dir = await sdDir('no-ehs', {
      unetInputs: [
        ['sample', F, ['batch_size', 4, 'height', 'width']],
        ['timestep', I64, []],
      ],
    });
    const e = await loadError(dir);
    expect(e.message).toContain('unet/model.onnx: input "encoder_hidden_states" is missing (graph inputs: sample, timestep)');
    expect(e.metadata).toMatchObject({ file: 'unet/model.onnx', input: 'encoder_hidden_states' });
  });

  it('a text encoder narrower than the UNet’s cross attention', async () => {
    const e = await loadError(await sdDir('mismatch', { crossAttention: 48 }));
    expect(e.message).toContain(
      'hidden size mismatch: the text encoder text_encoder/model.onnx output "last_hidden_state" [batch_size, sequence_length, 32] gives 32 features, ' +
        'but unet/model.onnx input "encoder_hidden_states" [batch_size, sequence_length, 48] takes 48',
    );
    expect(e.metadata.input).toBe('encoder_hidden_states');
  });

  it('a timestep of an unusable type', async () => {
    const dir = await sdDir('bad-timestep', {
      unetInputs: [
        ['sample', F, ['batch_size', 4, 'height', 'width']],
        ['timestep', onnx.TensorProto.DataType.STRING, []],
        ['encoder_hidden_states', F, ['batch_size', 'sequence_length', 32]],
      ],
    });
    expect((await loadError(dir)).message).toContain('input "timestep" is string; expected int64 or int32 or float32 or float16');
  });

  it('an inpainting pipeline', async () => {
    const e = await loadError(await sdDir('inpaint', { modelIndex: { _class_name: 'StableDiffusionInpaintPipeline' } }), false);
    expect(e.message).toContain('StableDiffusionInpaintPipeline (inpainting (9-channel UNet)) is not supported');
  });

  it('a folder that is no directory at all', async () => {
    expect((await loadError(path.join(root, 'nope'), false)).message).toContain('no such directory');
  });
});

describe('parsePythonJson', () => {
  it("reads Python's Infinity, -Infinity and NaN, not inside strings", () => {
    expect(parsePythonJson('{"a": -Infinity, "b": "NaN", "c": [NaN, Infinity]}')).toEqual({ a: -Infinity, b: 'NaN', c: [NaN, Infinity] });
  });
});
