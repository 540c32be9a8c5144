import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelsRoot } from '@diffmesh/models';
import { silentLogger, type GenerationParams, type RequestEvent } from '@diffmesh/core';
import { startEmbedded, type Embedded } from './embedded.js';

// The embedded pipeline in-process: the tiny-shapes model must draw what the prompt says,
// for every colour and shape it knows.

const PALETTE: Record<string, [number, number, number]> = {
  red: [230, 25, 25],
  green: [25, 200, 40],
  blue: [30, 60, 230],
  yellow: [245, 220, 20],
  orange: [245, 140, 20],
  purple: [140, 40, 200],
  cyan: [20, 210, 220],
  pink: [245, 120, 190],
  white: [245, 245, 245],
  black: [15, 15, 15],
  gray: [128, 128, 128],
};
const COLOURS = Object.keys(PALETTE);

let mesh: Embedded;
beforeAll(async () => {
  mesh = await startEmbedded({ modelRoots: [defaultModelsRoot()], intraOpThreads: 1, maxBatch: 16, log: silentLogger() });
});
afterAll(async () => {
  await mesh.close();
});

async function run(params: Partial<GenerationParams> & { prompt: string }, model = 'diffmesh/tiny-shapes') {
  const { context } = await mesh.scheduler.submit({ model, params });
  const events: RequestEvent[] = [];
  for await (const e of mesh.scheduler.watch(context.reqId)) events.push(e);
  const last = events.at(-1);
  if (last?.type !== 'completed') throw new Error(`request ended with ${JSON.stringify(last)}`);
  const { data, ref } = await mesh.store.get(last.outputs.pixels);
  const copy = Uint8Array.from(data);
  await mesh.store.deleteRequest(context.reqId);
  return { pixels: copy, shape: ref.shape, events };
}

/** Nearest palette colour of each pixel, counted; plus how the foreground fills its box. */
function analyse(pixels: Uint8Array, width: number, height: number, fg: string) {
  const counts = new Map<string, number>();
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -1;
  let maxY = -1;
  const fgRows = new Array<number>(height).fill(0);
  for (let i = 0; i < width * height; i += 1) {
    const p = [pixels[i * 3], pixels[i * 3 + 1], pixels[i * 3 + 2]];
    let best = '';
    let bestD = Infinity;
    for (const [name, c] of Object.entries(PALETTE)) {
      const d = (p[0] - c[0]) ** 2 + (p[1] - c[1]) ** 2 + (p[2] - c[2]) ** 2;
      if (d < bestD) {
        bestD = d;
        best = name;
      }
    }
    counts.set(best, (counts.get(best) ?? 0) + 1);
    if (best === fg) {
      const x = i % width;
      const y = Math.floor(i / width);
      minX = Math.min(minX, x);
      maxX = Math.max(maxX, x);
      minY = Math.min(minY, y);
      maxY = Math.max(maxY, y);
      fgRows[y] += 1;
    }
  }
  // Foreground in the top half of its box against the bottom half (apex-up triangles are top-light).
  const mid = (minY + maxY + 1) / 2;
  const top = fgRows.reduce((acc, n, y) => acc + (y < Math.floor(mid) ? n : 0), 0);
  const bottom = fgRows.reduce((acc, n, y) => acc + (y >= Math.ceil(mid) ? n : 0), 0);
  const share = (name: string) => (counts.get(name) ?? 0) / (width * height);
  const box = (maxX - minX + 1) * (maxY - minY + 1);
  return {
    share,
    fill: (counts.get(fg) ?? 0) / box,
    topToBottom: top / Math.max(bottom, 1),
    centreX: (minX + maxX) / 2 / width,
    centreY: (minY + maxY) / 2 / height,
    boxW: (maxX - minX + 1) / width,
  };
}

describe('tiny-shapes follows the prompt', () => {
  const cases = COLOURS.flatMap((fg, i) => {
    const bg = COLOURS[(i + 3) % COLOURS.length];
    return [['circle', fg, bg] as const, ['square', fg, bg] as const, ['triangle', fg, bg] as const];
  });

  it.each(cases)('a %s: %s on %s', async (shape, fg, bg) => {
    const size = 128;
    const { pixels } = await run({
      prompt: `a ${fg} ${shape} on a ${bg} background`,
      width: size,
      height: size,
      numInferenceSteps: 12,
      seed: '7',
    });
    const a = analyse(pixels, size, size, fg);
    expect(a.share(fg)).toBeGreaterThan(0.015);
    expect(a.share(fg)).toBeLessThan(0.45);
    // Edge pixels blend the two colours; almost all the rest is one or the other.
    expect(a.share(fg) + a.share(bg)).toBeGreaterThan(0.9);
    // How a shape fills its bounding box, and how its top half compares with its bottom
    // half, tell circle (π/4, symmetric), square (1, symmetric) and triangle (apex up) apart.
    const [lo, hi, tbLo, tbHi] = {
      circle: [0.68, 0.86, 0.8, 1.25],
      square: [0.86, 1.01, 0.8, 1.25],
      triangle: [0.38, 0.76, 0, 0.6],
    }[shape];
    expect(a.fill).toBeGreaterThan(lo);
    expect(a.fill).toBeLessThan(hi);
    expect(a.topToBottom).toBeGreaterThan(tbLo);
    expect(a.topToBottom).toBeLessThan(tbHi);
  });

  it('puts the shape where the prompt says and makes it as large as it says', async () => {
    const size = 128;
    const left = analyse(
      (await run({ prompt: 'a small red square on the left, white background', width: size, height: size, seed: '3' })).pixels,
      size,
      size,
      'red',
    );
    const right = analyse(
      (await run({ prompt: 'a large red square at the right, white background', width: size, height: size, seed: '3' })).pixels,
      size,
      size,
      'red',
    );
    expect(left.centreX).toBeLessThan(0.4);
    expect(right.centreX).toBeGreaterThan(0.6);
    expect(right.boxW).toBeGreaterThan(left.boxW * 1.3);
  });

  it('binds each colour to the noun that follows it', async () => {
    const size = 96;
    const a = analyse(
      (await run({ prompt: 'a blue circle on a red background', width: size, height: size, seed: '9' })).pixels,
      size,
      size,
      'blue',
    );
    const b = analyse(
      (await run({ prompt: 'a red circle on a blue background', width: size, height: size, seed: '9' })).pixels,
      size,
      size,
      'red',
    );
    expect(a.share('blue')).toBeLessThan(0.45);
    expect(a.share('red')).toBeGreaterThan(0.5);
    expect(b.share('red')).toBeLessThan(0.45);
    expect(b.share('blue')).toBeGreaterThan(0.5);
  });

  it('makes a video whose shape moves across the frames', async () => {
    const size = 64;
    const { pixels, shape } = await run({
      prompt: 'a yellow circle on a black background',
      width: size,
      height: size,
      numFrames: 6,
      seed: '11',
    });
    expect(shape).toEqual([6, size, size, 3]);
    const frame = (f: number) => analyse(pixels.subarray(f * size * size * 3, (f + 1) * size * size * 3), size, size, 'yellow');
    const first = frame(0);
    const last = frame(5);
    expect(first.share('yellow')).toBeGreaterThan(0.02);
    expect(last.share('yellow')).toBeGreaterThan(0.02);
    expect(Math.abs(last.centreX - first.centreX)).toBeGreaterThan(0.1);
  });

  it('is reproducible bit for bit for a seed, and a different seed gives a different picture', async () => {
    const p = { prompt: 'a green triangle', width: 64, height: 64 };
    const [a, b, c] = await Promise.all([run({ ...p, seed: '42' }), run({ ...p, seed: '42' }), run({ ...p, seed: '43' })]);
    expect(Buffer.from(a.pixels).equals(Buffer.from(b.pixels))).toBe(true);
    expect(Buffer.from(a.pixels).equals(Buffer.from(c.pixels))).toBe(false);
  });

  it('reports every denoising step as progress', async () => {
    const { events } = await run({ prompt: 'a red circle', width: 64, height: 64, numInferenceSteps: 7 });
    const steps = events.flatMap((e) => (e.type === 'progress' && e.stage === 'denoising' ? [e.step] : []));
    expect(steps).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });
});

describe('synthetic DiT models run through the same pipeline', () => {
  it.each([
    ['diffmesh/synthetic-dit-image', { width: 128, height: 128 }, [1, 128, 128, 3]],
    ['diffmesh/synthetic-dit-video', { width: 64, height: 64, numFrames: 5 }, [5, 64, 64, 3]],
  ] as const)('%s', async (model, size, shape) => {
    const { shape: got } = await run({ prompt: 'a cat on a sofa', numInferenceSteps: 2, ...size }, model);
    expect(got).toEqual(shape);
  });
});
