// Input images from the client to the first stage that takes them, through real processes:
// the gateway (OpenAI's /v1/images/edits and /v1/videos' input_reference, with the official
// openai client and with hand-made multipart bodies; input_image.data on /api/v1), and the
// `diffmesh` command (--image/--strength with --remote). The mesh serves diffmesh/tiny-shapes
// under a plan that adds an image_encoding stage (`requires: input_image`); that stage is a
// test stage service here, registered in NATS like any other, which records the bytes it gets.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelsRoot } from '@diffmesh/models';
import { decodePng, encodeImage, encodePng } from '@diffmesh/media';
import { silentLogger, type StageTask } from '@diffmesh/core';
import { gatewayConfigFrom, startGateway } from '@diffmesh/gateway';
import { StageServiceConfigSchema, startStageService, type RunningStageService } from '@diffmesh/stage-host';
import { startTestMesh, until, type TestMesh } from './harness.js';

const KEY = 'dm-image-inputs-key-0123456789';
const MODEL = 'diffmesh/tiny-shapes';
const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

/** tiny-shapes with an image_encoding stage that runs only for requests with an input image. */
const PLANS = `version: 1
plans:
  - model: ${MODEL}
    modalities: [text-to-image, text-to-video, image-to-image, image-to-video]
    stages:
      - { name: text_encoding, pool: encoder-tiny }
      - { name: image_encoding, pool: image-test, requires: input_image }
      - { name: denoising, pool: dit-tiny }
      - { name: vae_decoding, pool: vae-tiny }
    defaults: { width: 256, height: 256, numFrames: 1, steps: 20, guidanceScale: 3, fps: 8, strength: 0.75 }
    constraints: { sizeMultiple: 8, maxWidth: 512, maxHeight: 512, maxFrames: 32 }
`;

/** What the test image_encoding stage got for one task. */
interface Seen {
  task: StageTask;
  bytes: Buffer;
}

let t: TestMesh;
let stage: RunningStageService;
let dir: string;
let gw: string;
const seen: Seen[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-image-inputs-'));
  const plans = path.join(dir, 'plans.yaml');
  await writeFile(plans, PLANS);
  t = await startTestMesh({ schedulerArgs: ['--plans', plans], gateway: { apiKeys: [KEY] } });
  gw = t.mesh.gatewayUrl!;
  stage = await startStageService({
    name: 'image-test-svc',
    version: '0.1.0',
    config: StageServiceConfigSchema.parse({
      pool: 'image-test',
      instanceId: 'image-test-1',
      nodeId: t.mesh.nodeId,
      natsUrl: t.mesh.natsUrl,
      tensorAddress: t.mesh.tensorAddress,
      modelsDirs: [defaultModelsRoot()],
      capacity: 4,
      log: { level: 'silent' },
    }),
    log: silentLogger(),
    createHandler: (deps) => ({
      stage: 'image_encoding',
      models: () => [],
      async execute(task) {
        const ref = task.inputs.input_image;
        if (!ref) throw new Error('image_encoding ran without input_image');
        const { data } = await deps.store.get(ref);
        seen.push({ task, bytes: Buffer.from(data) });
        return { outputs: {} };
      },
    }),
  });
  // The scheduler dispatches to the stage once its discovery has seen it.
  await until('the scheduler to see the image stage', async () => {
    const res = await fetch(`${gw}/api/v1/status`, { headers: { authorization: `Bearer ${KEY}` } });
    const body = (await res.json()) as { pools?: Array<{ pool: string; instances: unknown[] }> };
    return body.pools?.some((p) => p.pool === 'image-test' && p.instances.length > 0) ? true : undefined;
  });
}, 180_000);

afterAll(async () => {
  await stage?.stop(1000);
  await t?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A PNG of random-looking pixels: `size` 16 stays under 64 KiB (passed inline), 256 does not. */
function noisePng(size: number, seed: number): Buffer {
  const data = new Uint8Array(size * size * 3);
  let x = seed * 2654435761;
  for (let i = 0; i < data.length; i += 1) {
    x = (x * 1103515245 + 12345) >>> 0;
    data[i] = x >>> 24;
  }
  return Buffer.from(encodePng(data, size, size));
}

/** The stage tasks that got exactly these bytes. */
function tasksWith(bytes: Buffer): Seen[] {
  return seen.filter((s) => s.bytes.equals(bytes));
}

interface Reply {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function post(route: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(gw + route, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, ...headers }, body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A multipart/form-data body built by hand, byte for byte as curl -F sends it. */
function multipart(parts: Array<{ name: string; value: string } | { name: string; file: Buffer; filename: string; type: string }>) {
  const boundary = '------------------------d74496d66958873e';
  const chunks: Buffer[] = [];
  for (const p of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\n`));
    if ('file' in p) {
      chunks.push(
        Buffer.from(`Content-Disposition: form-data; name="${p.name}"; filename="${p.filename}"\r\nContent-Type: ${p.type}\r\n\r\n`),
      );
      chunks.push(p.file);
    } else {
      chunks.push(Buffer.from(`Content-Disposition: form-data; name="${p.name}"\r\n\r\n${p.value}`));
    }
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

const small = { width: 64, height: 64, steps: 2 };

describe('POST /v1/images/edits', () => {
  it('runs img2img from the openai client: the image reaches the image_encoding stage byte for byte, with strength', async () => {
    const client = new OpenAI({ baseURL: `${gw}/v1`, apiKey: KEY, maxRetries: 0 });
    const png = noisePng(256, 1); // over 64 KiB: stored in tensor-svc, not inline
    const params = {
      model: MODEL,
      image: await toFile(png, 'photo.png', { type: 'image/png' }),
      prompt: 'a red circle on a blue background',
      size: '64x64',
      n: 2,
      response_format: 'b64_json',
      // diffmesh's extensions, sent as form fields like the rest.
      strength: 0.5,
      num_inference_steps: 2,
    } as const;
    const res = await client.images.edit(params as unknown as OpenAI.ImageEditParamsNonStreaming);
    expect(res.data).toHaveLength(2);
    for (const d of res.data!) expect(decodePng(Buffer.from(d.b64_json!, 'base64'))).toMatchObject({ width: 64, height: 64 });
    const tasks = tasksWith(png);
    expect(tasks).toHaveLength(2);
    for (const { task } of tasks) {
      expect(task.inputs.input_image).toMatchObject({ name: 'input_image', dtype: 'uint8', shape: [png.byteLength] });
      expect(task.params.strength).toBe(0.5);
    }
    // The SDK's array form (`image[]`) with one file works too, and strength defaults to the plan's.
    const jpeg = await encodeImage({ width: 32, height: 24, data: new Uint8Array(32 * 24 * 3).fill(90) }, 'jpeg');
    await client.images.edit({
      model: MODEL,
      image: [await toFile(jpeg, 'photo.jpg', { type: 'image/jpeg' })],
      prompt: 'a green square',
      size: '64x64',
      num_inference_steps: 2,
    } as unknown as OpenAI.ImageEditParamsNonStreaming);
    expect(tasksWith(jpeg)).toHaveLength(1);
    expect(tasksWith(jpeg)[0].task.params.strength).toBe(0.75);
  });

  it('takes a hand-made multipart body (as curl -F sends it) and answers errors OpenAI-style, naming the field', async () => {
    const png = noisePng(16, 2); // small: passed inline in the ref
    const ok = multipart([
      { name: 'prompt', value: 'a blue square' },
      { name: 'model', value: MODEL },
      { name: 'size', value: '64x64' },
      { name: 'num_inference_steps', value: '2' },
      { name: 'strength', value: '0.3' },
      { name: 'image', file: png, filename: 'in.png', type: 'image/png' },
    ]);
    const done = await post('/v1/images/edits', ok.body, ok.headers);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ output_format: 'png', size: '64x64', data: [{ b64_json: expect.any(String) }] });
    expect(tasksWith(png)).toHaveLength(1);
    expect(tasksWith(png)[0].task.params.strength).toBe(0.3);

    const before = seen.length;
    const refused = async (parts: Parameters<typeof multipart>[0], param: string, message: RegExp): Promise<void> => {
      const form = multipart([{ name: 'prompt', value: 'x' }, ...parts]);
      const r = await post('/v1/images/edits', form.body, form.headers);
      expect(r.status, param).toBe(400);
      expect(r.body.error, param).toMatchObject({ type: 'invalid_request_error', param, code: 'invalid_parameter' });
      expect(r.body.error.message, param).toMatch(message);
    };
    const file = (bytes: Buffer, name = 'image') => ({ name, file: bytes, filename: 'f', type: 'application/octet-stream' });
    await refused([file(Buffer.from('this is not an image'))], 'image', /not a readable PNG, JPEG or WebP image/);
    // The header is all there, the pixels are not: refused at once, not after queueing.
    await refused([file(png.subarray(0, png.length - 40))], 'image', /is truncated or corrupt/);
    await refused([file(Buffer.from('R0lGODlhAQABAIAAAAAAAP///ywAAAAAAQABAAACAUwAOw==', 'base64'))], 'image', /has format gif/);
    await refused([], 'image', /is required/);
    await refused([{ name: 'image', value: 'not a file' }], 'image', /expected an image file/);
    await refused([file(png), file(png, 'mask')], 'mask', /masks \(inpainting\) are not supported/);
    await refused([file(png), { name: 'strength', value: '1.5' }], 'strength', /from 0 to 1/);
    await refused([file(png), { name: 'strength', value: '0' }], 'strength', /greater than 0/);
    await refused([file(png), file(png)], 'image', /is given more than once/);
    await refused([file(png), { name: 'stream', value: 'true' }], 'stream', /not supported/);
    await refused([file(png), file(png, 'prompt2')], 'prompt2', /expected a text value, got a file/);
    expect(seen.length).toBe(before);
  });

  it('refuses an image over the limit (15 MiB) with a 400 naming image, and a corrupt one disturbs no other request', async () => {
    const png = noisePng(16, 3);
    const huge = Buffer.alloc(15 * 1024 * 1024 + 1);
    png.copy(huge);
    const big = multipart([
      { name: 'prompt', value: 'x' },
      { name: 'image', file: huge, filename: 'big.png', type: 'image/png' },
    ]);
    const good = multipart([
      { name: 'prompt', value: 'a red circle' },
      { name: 'size', value: '64x64' },
      { name: 'num_inference_steps', value: '2' },
      { name: 'image', file: png, filename: 'in.png', type: 'image/png' },
    ]);
    const corrupt = multipart([
      { name: 'prompt', value: 'x' },
      { name: 'image', file: Buffer.from('garbage'), filename: 'x.png', type: 'image/png' },
    ]);
    // A good request between two bad ones, all at once.
    const [tooBig, fine, bad] = await Promise.all([
      post('/v1/images/edits', big.body, big.headers),
      post('/v1/images/edits', good.body, good.headers),
      post('/v1/images/edits', corrupt.body, corrupt.headers),
    ]);
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.error).toMatchObject({ param: 'image', type: 'invalid_request_error' });
    expect(tooBig.body.error.message).toMatch(/larger than the limit of 15728640 bytes/);
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('image');
    expect(fine.status).toBe(200);
    expect(tasksWith(png)).toHaveLength(1);
  });

  it('carries an image near the 15 MiB limit from the upload to the stage (one gRPC message, tensor-svc)', async () => {
    const png = noisePng(2200, 10);
    expect(png.length).toBeGreaterThan(13 * 1024 * 1024);
    const form = multipart([
      { name: 'prompt', value: 'a red circle' },
      { name: 'size', value: '64x64' },
      { name: 'num_inference_steps', value: '2' },
      { name: 'image', file: png, filename: 'big.png', type: 'image/png' },
    ]);
    const r = await post('/v1/images/edits', form.body, form.headers);
    expect(r.status).toBe(200);
    expect(tasksWith(png)).toHaveLength(1);
  });

  it('leaves the image stage out of a request without an image', async () => {
    const before = seen.length;
    const r = await post(
      '/v1/images/generations',
      JSON.stringify({ model: MODEL, prompt: 'a red circle', size: '64x64', num_inference_steps: 2 }),
      { 'content-type': 'application/json' },
    );
    expect(r.status).toBe(200);
    expect(seen.length).toBe(before);
  });
});

describe('POST /v1/videos with input_reference', () => {
  it('starts an image-to-video job from an uploaded first frame (openai client) or a data URL (JSON)', async () => {
    const client = new OpenAI({ baseURL: `${gw}/v1`, apiKey: KEY, maxRetries: 0 });
    const frame = noisePng(16, 4);
    const job = await client.videos.create({
      prompt: 'a pink square',
      model: MODEL,
      seconds: '1' as '4',
      size: '64x64' as '720x1280',
      input_reference: await toFile(frame, 'first.png', { type: 'image/png' }),
    });
    expect(job).toMatchObject({ object: 'video', model: MODEL, size: '64x64' });
    await until(
      'the video job to complete',
      async () => ((await client.videos.retrieve(job.id)).status === 'completed' ? true : undefined),
      60_000,
    );
    expect(tasksWith(frame)).toHaveLength(1);
    expect(tasksWith(frame)[0].task.params.numFrames).toBe(8);

    const other = noisePng(16, 5);
    const json = await post(
      '/v1/videos',
      JSON.stringify({
        prompt: 'a cyan circle',
        size: '64x64',
        num_frames: 4,
        input_reference: { image_url: `data:image/png;base64,${other.toString('base64')}` },
      }),
      { 'content-type': 'application/json' },
    );
    expect(json.status).toBe(200);
    await until(
      'the JSON video job to complete',
      async () => ((await client.videos.retrieve(json.body.id)).status === 'completed' ? true : undefined),
      60_000,
    );
    expect(tasksWith(other)).toHaveLength(1);

    const bad = await post('/v1/videos', JSON.stringify({ prompt: 'x', input_reference: 'data:image/png;base64,AAAA' }), {
      'content-type': 'application/json',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ param: 'input_reference', type: 'invalid_request_error' });
    const url = await post('/v1/videos', JSON.stringify({ prompt: 'x', input_reference: { image_url: 'https://example.com/a.png' } }), {
      'content-type': 'application/json',
    });
    expect(url.status).toBe(400);
    expect(url.body.error.message).toMatch(/image URLs are not fetched/);
  });
});

describe('input_image.data on the /api/v1 routes (base64 in JSON)', () => {
  it('submits a request with a base64 image; a corrupt one is a 400 naming input_image', async () => {
    const png = noisePng(256, 6);
    const json = JSON.stringify({
      model: MODEL,
      params: {
        prompt: 'a red circle',
        width: 64,
        height: 64,
        numInferenceSteps: 2,
        inputImage: { data: png.toString('base64') },
        strength: 0.9,
      },
    });
    // Larger than an ordinary body may be? The image has its own allowance on top.
    const sub = await post('/api/v1/requests', json, { 'content-type': 'application/json' });
    expect(sub.status).toBe(200);
    await until('the stage to get the image', async () => (tasksWith(png).length > 0 ? true : undefined));
    expect(tasksWith(png)[0].task.params.strength).toBe(0.9);
    expect(tasksWith(png)[0].task.reqId).toBe(sub.body.reqId);

    const bad = await post(
      '/api/v1/requests',
      JSON.stringify({ model: MODEL, params: { prompt: 'x', input_image: { data: Buffer.from('no image here').toString('base64') } } }),
      { 'content-type': 'application/json' },
    );
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', reason: 'INVALID_PARAMETER', field: 'input_image' });
  });

  it('documents input_image and the image endpoints in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${gw}/openapi.json`)).json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    const image = doc.components.schemas['diffmesh.common.v1.InputImage'];
    expect(image.properties.data).toMatchObject({ type: 'string', format: 'byte' });
    expect(image.properties.data.description).toMatch(/Base64 in JSON/);
    expect(doc.components.schemas['diffmesh.common.v1.GenerationParams'].properties.strength).toMatchObject({ type: 'number' });
    const edits = doc.paths['/v1/images/edits'].post.requestBody.content['multipart/form-data'].schema;
    expect(edits.properties.image).toMatchObject({ type: 'string', format: 'binary' });
    expect(edits.properties.strength).toBeDefined();
    expect(doc.paths['/v1/videos'].post.requestBody.content['multipart/form-data'].schema.properties.input_reference.format).toBe('binary');
  });
});

describe('body limits with input images', () => {
  it('gives an image its own allowance on top of maxBodyBytes, and holds the rest of the body to the limit', async () => {
    // A gateway of this process with small limits, in front of the same mesh.
    const small = await startGateway(
      gatewayConfigFrom({
        listen: '127.0.0.1:0',
        adminListen: '127.0.0.1:0',
        natsUrl: t.mesh.natsUrl,
        apiKeys: [KEY],
        nodeId: t.mesh.nodeId,
        maxBodyBytes: 64 * 1024,
        maxImageBytes: 512 * 1024,
      }),
      silentLogger(),
    );
    try {
      const at = (route: string, body: string | Buffer, headers: Record<string, string>) =>
        fetch(small.address + route, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, ...headers }, body }).then(
          async (r) => ({ status: r.status, body: (await r.json()) as any }), // eslint-disable-line @typescript-eslint/no-explicit-any
        );
      const json = { 'content-type': 'application/json' };
      const png = noisePng(256, 9); // ~200 KB: more than twice the body limit, within the image limit
      expect(png.length).toBeGreaterThan(2 * 64 * 1024);
      const params = { prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 2, inputImage: { data: png.toString('base64') } };
      const ok = await at('/api/v1/requests', JSON.stringify({ model: MODEL, params }), json);
      expect(ok.status).toBe(200);
      await until('the stage to get the image', async () => (tasksWith(png).length > 0 ? true : undefined));
      // The rest of the body still has the plain limit.
      const padded = await at(
        '/api/v1/requests',
        JSON.stringify({ model: MODEL, params: { ...params, negativePrompt: 'y'.repeat(70_000) } }),
        json,
      );
      expect(padded.status).toBe(413);
      expect(padded.body.error.message).toMatch(/65536 bytes/);
      const video = await at(
        '/v1/videos',
        JSON.stringify({ prompt: 'x', size: '64x64', num_frames: 2, input_reference: `data:image/png;base64,${png.toString('base64')}` }),
        json,
      );
      expect(video.status).toBe(200);
      // An image over maxImageBytes: a 400 naming it, as an upload and as a data URL.
      const big = Buffer.concat([png, png, png]);
      const form = multipart([
        { name: 'prompt', value: 'x' },
        { name: 'image', file: big, filename: 'big.png', type: 'image/png' },
      ]);
      const upload = await at('/v1/images/edits', form.body, form.headers);
      expect(upload.status).toBe(400);
      expect(upload.body.error).toMatchObject({ param: 'image', message: expect.stringMatching(/larger than the limit of 524288 bytes/) });
      const dataUrl = await at(
        '/v1/videos',
        JSON.stringify({ prompt: 'x', input_reference: `data:image/png;base64,${big.toString('base64')}` }),
        json,
      );
      expect(dataUrl.status).toBe(400);
      expect(dataUrl.body.error).toMatchObject({
        param: 'input_reference',
        message: expect.stringMatching(/larger than the limit of 524288 bytes/),
      });
    } finally {
      await small.stop(1000);
    }
  });
});

describe('diffmesh generate and submit --image (--remote)', () => {
  function cli(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, [BIN, ...args, '--remote', t.mesh.schedulerAddress], { cwd, timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
    });
  }

  it('generate --image --strength writes the picture, and the stage got the file byte for byte', async () => {
    const cwd = await mkdtemp(path.join(dir, 'cli-'));
    const png = noisePng(256, 7);
    await writeFile(path.join(cwd, 'photo.png'), png);
    const args = ['--width', String(small.width), '--height', String(small.height), '--steps', String(small.steps), '--seed', '3'];
    const run = await cli(
      ['generate', 'a red circle on a blue background', '--image', 'photo.png', '--strength', '0.4', '-o', 'out.png', ...args],
      cwd,
    );
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/wrote out\.png \(64×64, png; .*strength 0\.4;/);
    expect(decodePng(await readFile(path.join(cwd, 'out.png')))).toMatchObject({ width: 64, height: 64 });
    expect(tasksWith(png)).toHaveLength(1);
    expect(tasksWith(png)[0].task.params.strength).toBe(0.4);

    // submit: the id at once, the image with it.
    const other = noisePng(16, 8);
    await writeFile(path.join(cwd, 'frame.png'), other);
    const sub = await cli(['submit', 'a green square', '--image', 'frame.png', ...args], cwd);
    expect(sub.code).toBe(0);
    const id = sub.stdout.trim();
    await until('the submitted request to reach the image stage', async () => (tasksWith(other).length > 0 ? true : undefined));
    expect(tasksWith(other)[0].task.reqId).toBe(id);

    // A bad file is refused before the mesh is asked, and nothing is written.
    await writeFile(path.join(cwd, 'notes.txt'), 'not a picture');
    const bad = await cli(['generate', 'x', '--image', 'notes.txt', '-o', 'bad.png'], cwd);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/input_image: "notes\.txt" is not a readable PNG, JPEG or WebP image .*\(--image\)/);
    expect((await readdir(cwd)).sort()).toEqual(['frame.png', 'notes.txt', 'out.png', 'photo.png']);
  });
});
