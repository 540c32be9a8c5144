/**
 * Encoded results over gRPC (SchedulerService.GetResult) and its HTTP mapping through the
 * gateway, against a mesh of separate processes: the same file the CLI writes, in every
 * format the result can take, and clear errors for what it cannot give.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchedulerClient } from '@diffmesh/client';
import { Code, silentLogger } from '@diffmesh/core';
import { decodeImage, ffmpegAvailable, probeImage, probeVideo } from '@diffmesh/media';
import { generate, last, rejection, startTestMesh, submit, type TestMesh } from './harness.js';

const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));
const hasFfmpeg = await ffmpegAvailable();

let t: TestMesh;
let client: SchedulerClient;
let dir: string;
beforeAll(async () => {
  t = await startTestMesh({ gateway: { apiKeys: [] } });
  client = new SchedulerClient({ addresses: [t.mesh.schedulerAddress], log: silentLogger() });
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-results-'));
}, 120_000);
afterAll(async () => {
  await client?.close();
  await t?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Runs a request to completion; returns its id. */
async function completed(params: Record<string, unknown> & { prompt: string }): Promise<string> {
  const events = await generate(t.client, { params, requestId: `r${Math.random().toString(36).slice(2)}` });
  const end = last(events);
  expect(end.type).toBe('completed');
  return end.reqId;
}

describe('GetResult', () => {
  it('gives the PNG that `diffmesh generate --remote` writes for the same seed, byte for byte', async () => {
    const reqId = await completed({ prompt: 'a red circle on a blue background', seed: '21' });
    const { header, bytes } = await client.getResult(reqId);
    expect(header).toMatchObject({ mediaType: 'image/png', format: 'png', width: 256, height: 256, frames: 1, fileName: `${reqId}.png` });
    expect(Number(header.sizeBytes)).toBe(bytes.byteLength);

    await promisify(execFile)(
      process.execPath,
      [
        BIN,
        'generate',
        'a red circle on a blue background',
        '--seed',
        '21',
        '-o',
        'cli.png',
        '--no-progress',
        '--remote',
        t.mesh.schedulerAddress,
      ],
      { cwd: dir, timeout: 60_000 },
    );
    expect(bytes.equals(await readFile(path.join(dir, 'cli.png')))).toBe(true);
  });

  it('encodes a picture as JPEG and WebP too', async () => {
    const reqId = await completed({ prompt: 'a green square on a yellow background', seed: '3' });
    const png = await decodeImage((await client.getResult(reqId)).bytes);
    for (const [format, type] of [
      ['jpeg', 'image/jpeg'],
      ['webp', 'image/webp'],
    ] as const) {
      const { header, bytes } = await client.getResult(reqId, { format, quality: 95 });
      expect(header.mediaType).toBe(type);
      expect(await probeImage(bytes)).toEqual({ mediaType: type, width: 256, height: 256 });
      const pixels = (await decodeImage(bytes)).data;
      let diff = 0;
      for (let i = 0; i < pixels.length; i += 1) diff += Math.abs(pixels[i] - png.data[i]);
      expect(diff / pixels.length).toBeLessThan(6);
    }
  });

  it('encodes a video as GIF, and as MP4 and WebM with ffmpeg', async () => {
    const reqId = await completed({
      prompt: 'a purple circle on a gray background',
      numFrames: 5,
      width: 64,
      height: 64,
      numInferenceSteps: 4,
    });
    const gif = await client.getResult(reqId, { format: 'gif' });
    expect(await probeVideo(gif.bytes)).toEqual({ format: 'gif', frames: 5, width: 64, height: 64 });
    if (!hasFfmpeg) return;
    const mp4 = await client.getResult(reqId);
    expect(mp4.header).toMatchObject({ mediaType: 'video/mp4', format: 'mp4', frames: 5 });
    expect(await probeVideo(mp4.bytes)).toEqual({ format: 'mp4', frames: 5, width: 64, height: 64 });
    const webm = await client.getResult(reqId, { format: 'webm' });
    expect(await probeVideo(webm.bytes)).toEqual({ format: 'webm', frames: 5, width: 64, height: 64 });
  });

  it('names what it cannot give: an unknown id, an unfinished request, a format the result cannot take', async () => {
    expect(await rejection(client.getResult('no-such-request'))).toMatchObject({ code: Code.NOT_FOUND, reason: 'REQUEST_NOT_FOUND' });

    // Long enough (200 steps of 16 frames) to be running when asked, then cancelled.
    const running = await submit(t.client, { params: { prompt: 'a white square', numInferenceSteps: 200, numFrames: 16 } });
    const notYet = await rejection(client.getResult(running.reqId));
    expect(notYet).toMatchObject({ code: Code.FAILED_PRECONDITION, reason: 'REQUEST_NOT_FINISHED' });
    await client.cancel(running.reqId);
    await client.watch(running.reqId).next(); // its events replay up to the end
    const cancelled = await rejection(client.getResult(running.reqId));
    expect(cancelled).toMatchObject({ code: Code.FAILED_PRECONDITION, reason: 'REQUEST_NOT_FINISHED' });
    expect(cancelled.message).toMatch(/was cancelled|is /);

    const video = await completed({ prompt: 'a red square', numFrames: 3, width: 64, height: 64, numInferenceSteps: 2 });
    const bad = await rejection(client.getResult(video, { format: 'png' }));
    expect(bad).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'format' });
    expect(bad.message).toMatch(/3-frame video cannot be encoded as png/);
    expect(await rejection(client.getResult(video, { format: 'bmp' }))).toMatchObject({ code: Code.INVALID_ARGUMENT, field: 'format' });
  });
});

describe('GET /api/v1/requests/{req_id}/result through the gateway', () => {
  it('answers with the file itself, its media type and length', async () => {
    const reqId = await completed({ prompt: 'a yellow triangle', seed: '5' });
    const res = await fetch(`${t.mesh.gatewayUrl}/api/v1/requests/${reqId}/result`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    const body = Buffer.from(await res.arrayBuffer());
    expect(res.headers.get('content-length')).toBe(String(body.byteLength));
    expect(body.equals((await client.getResult(reqId)).bytes)).toBe(true);

    const jpeg = await fetch(`${t.mesh.gatewayUrl}/api/v1/requests/${reqId}/result?format=jpeg`);
    expect(jpeg.headers.get('content-type')).toBe('image/jpeg');
    expect(await probeImage(Buffer.from(await jpeg.arrayBuffer()))).toMatchObject({ mediaType: 'image/jpeg' });
  });

  it('answers errors as JSON with the HTTP status of their code', async () => {
    const missing = await fetch(`${t.mesh.gatewayUrl}/api/v1/requests/nope/result`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { status: 'NOT_FOUND' } });
    const reqId = await completed({ prompt: 'a blue circle', seed: '6' });
    const bad = await fetch(`${t.mesh.gatewayUrl}/api/v1/requests/${reqId}/result?format=tiff`);
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toMatch(/format/);
  });
});
