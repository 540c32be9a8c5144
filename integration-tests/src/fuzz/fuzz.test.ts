// Hostile input at scale: FUZZ_RUNS inputs (10,000 by default) over every surface of the mesh,
// from one seed (FUZZ_SEED). Each surface is a module of this folder; this file starts the
// mesh, runs them one after another with normal requests beside them, and checks at the end
// that memory and tensor-svc's bytes came back to their baseline. The figures are printed and
// written to fuzz-report.json (see README.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryAfterGc, normalTraffic, tensorBytes } from './checks.js';
import { FUZZ_SEED, type Surface } from './generators.js';
import { fuzzGrpcMethods } from './grpc-methods.js';
import { fuzzTensorPut } from './tensor-put.js';
import { fuzzHttpRoutes } from './http-routes.js';
import { fuzzImages } from './images.js';
import { fuzzModelDirectories } from './model-directories.js';
import { until } from '../harness.js';
import { startFuzzMesh, type FuzzMesh } from './mesh.js';
import { FuzzReport } from './report.js';

/** Growth of heap plus buffers after GC that still counts as "back to baseline" (MiB): generous, the inputs are ~10k small allocations. */
const MEMORY_SLACK_MIB = 96;

let mesh: FuzzMesh;
const report = new FuzzReport(FUZZ_SEED);
let baseline: { heapUsed: number; arrayBuffers: number; rss: number };
let baselineBytes: number;

const onCrash = (err: unknown): void => {
  report.crashes.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
};

beforeAll(async () => {
  // Every service runs in this process: an exception nothing catches is a crash (vitest reports it too).
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  mesh = await startFuzzMesh();
  // One normal request first: sessions, codecs and pools exist before the baseline is taken.
  await normalTraffic(mesh, report, 'warm-up').stop();
  baseline = memoryAfterGc();
  baselineBytes = tensorBytes(mesh);
}, 120_000);

afterAll(async () => {
  process.off('uncaughtException', onCrash);
  process.off('unhandledRejection', onCrash);
  await mesh?.stop();
});

/** FUZZ_SURFACE (comma-separated: grpc, tensorPut, http, images, modelDirectories) runs only those surfaces, e.g. to replay a failure. */
const ONLY = process.env.FUZZ_SURFACE?.split(',').map((s) => s.trim());
const runs = (s: Surface): boolean => !ONLY || ONLY.includes(s);

async function surface(name: string, run: () => Promise<void>): Promise<void> {
  const started = Date.now();
  const traffic = normalTraffic(mesh, report, name);
  try {
    await run();
  } finally {
    expect(await traffic.stop()).toBeGreaterThan(0);
    report.surface(name).ms = Date.now() - started;
  }
  expect(report.surface(name).failures).toEqual([]);
}

describe('fuzz', () => {
  it.runIf(runs('grpc'))(
    'raw gRPC messages to every method of every service',
    () => surface('grpc', () => fuzzGrpcMethods(mesh, report)),
    600_000,
  );

  it.runIf(runs('tensorPut'))('tensor-svc Put streams gone wrong', () => surface('tensor-put', () => fuzzTensorPut(mesh, report)), 600_000);

  it.runIf(runs('http'))(
    'every gateway route with hostile paths, queries, bodies and uploads',
    () => surface('http', () => fuzzHttpRoutes(mesh, report)),
    600_000,
  );

  it.runIf(runs('images'))(
    'input images gone wrong, through the gateway and the scheduler',
    () => surface('images', () => fuzzImages(mesh, report)),
    600_000,
  );

  it.runIf(runs('modelDirectories'))(
    'model directories gone wrong, through the stage and scheduler loaders',
    () => surface('model-directories', () => fuzzModelDirectories(report)),
    600_000,
  );

  it('memory and tensor-svc bytes are back to their baseline; figures', async () => {
    delete report.surfaces['warm-up'];
    const after = memoryAfterGc();
    report.memory = {
      heapBaseline: baseline.heapUsed,
      heapAfter: after.heapUsed,
      buffersBaseline: baseline.arrayBuffers,
      buffersAfter: after.arrayBuffers,
      rssBaseline: baseline.rss,
      rssAfter: after.rss,
    };
    // Abandoned puts are released as their streams close, a moment after the client's answer.
    await until('tensor-svc bytes back to their baseline', () => (tensorBytes(mesh) === baselineBytes ? true : undefined), 10_000).catch(
      () => undefined,
    );
    report.tensorBytes = { baseline: baselineBytes, after: tensorBytes(mesh) };
    if (report.tensorBytes.after !== baselineBytes) console.log(JSON.stringify(mesh.tensor.store.usage()));
    report.write();
    expect(report.crashes).toEqual([]);
    expect(report.tensorBytes.after).toBe(baselineBytes);
    expect(after.heapUsed + after.arrayBuffers).toBeLessThan(baseline.heapUsed + baseline.arrayBuffers + MEMORY_SLACK_MIB);
  });
});
