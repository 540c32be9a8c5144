/**
 * `adapters`: what the LoRA branches cost per denoising step, against the same model with no
 * adapter and with the adapter merged into its weights. The model is synthetic-dit-image's
 * denoiser (6 DiT blocks, hidden 384, 256 tokens at 256×256; 67 linear layers); the adapters
 * are rank-16 LoRAs on every one of them. One onnxruntime session per graph, runs of the graphs
 * interleaved round by round, so every row shares the machine's state; medians of the rounds.
 * Rows: batch 1 and 4, with 0, 1 and 4 distinct adapters in the batch (at batch 1, four stacked
 * on the one item). Also: building a batch's branch inputs (done once per batch composition
 * and kept), and merging one adapter into the weights and loading that session (what a
 * merged-weights server pays per adapter, or per combination).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  addLoraBranches,
  decodeModel,
  encodeModel,
  findGraphLinears,
  loraFeeds,
  mergeLora,
  type AdapterUse,
  type GraphLinear,
  type LoraSlot,
  type MappedAdapter,
  type MappedTarget,
} from '@diffmesh/adapters';
import { defaultModelsRoot, WeightRng } from '@diffmesh/models';
import { ort } from '@diffmesh/stage-host';

const RANK = 16;

export interface AdapterBenchRow {
  batch: number;
  /** Distinct adapters in the batch (0 = none). */
  adapters: number;
  /** ms per step: without branches, with branches, with the one adapter merged (1 adapter only). */
  baseMs: number;
  branchedMs: number;
  mergedMs?: number;
}

export interface AdapterBenchResult {
  rows: AdapterBenchRow[];
  layers: number;
  /** Building the branch inputs of a batch of 4 with 4 adapters (ms). */
  feedsMs: number;
  /** Merging one adapter into the weights and creating its session (ms). */
  mergeMs: number;
  rounds: number;
}

function syntheticAdapter(linears: GraphLinear[], seed: number): MappedAdapter {
  const rng = new WeightRng(seed);
  const map = new Map<string, MappedTarget>();
  let bytes = 0;
  for (const l of linears) {
    const down = rng.normals(RANK * l.inDim, 1 / Math.sqrt(l.inDim));
    const up = rng.normals(l.outDim * RANK, 0.02);
    bytes += (down.length + up.length) * 4;
    const target = {
      key: `${l.module}.lora_A.weight`,
      component: 'denoiser' as const,
      module: l.module,
      rank: RANK,
      inDim: l.inDim,
      outDim: l.outDim,
      down,
      up,
      alphaScale: 1,
    };
    map.set(l.module, { target, linear: l });
  }
  return { format: 'peft', components: { denoiser: map }, bytes, skipped: 0 };
}

function inputs(batch: number): Record<string, ort.Tensor> {
  const rng = new WeightRng(batch);
  const h = 32;
  return {
    sample: new ort.Tensor('float32', rng.normals(batch * 4 * h * h, 1), [batch, 4, 1, h, h]),
    timestep: new ort.Tensor('float32', new Float32Array(batch).fill(500), [batch]),
    encoder_hidden_states: new ort.Tensor('float32', rng.normals(batch * 32 * 256, 1), [batch, 32, 256]),
  };
}

function feedsOf(slots: LoraSlot[], rows: AdapterUse[][]): Record<string, ort.Tensor> {
  const out: Record<string, ort.Tensor> = {};
  for (const f of loraFeeds(slots, 'denoiser', rows)) out[f.name] = new ort.Tensor(f.type, f.data, f.dims);
  return out;
}

/** Rows of batch items for `adapters` distinct adapters at batch `batch`. */
function compose(batch: number, adapters: number, pool: MappedAdapter[]): AdapterUse[][] {
  if (adapters === 0) return Array.from({ length: batch }, () => []);
  if (batch === 1) return [pool.slice(0, adapters).map((adapter) => ({ adapter, scale: 0.8 }))];
  return Array.from({ length: batch }, (_, b) => [{ adapter: pool[b % adapters], scale: 0.8 }]);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function timeRun(session: ort.InferenceSession, feeds: Record<string, ort.Tensor>): Promise<number> {
  const t = performance.now();
  await session.run(feeds);
  return performance.now() - t;
}

export async function runAdapterBench(rounds = 7): Promise<AdapterBenchResult> {
  const file = path.join(defaultModelsRoot(), 'diffmesh', 'synthetic-dit-image', 'denoiser.onnx');
  const model = decodeModel(await readFile(file));
  const linears = [...findGraphLinears(model).byModule.values()];
  const { model: branchedModel, slots } = addLoraBranches(model, linears);
  const pool = [1, 2, 3, 4].map((s) => syntheticAdapter(linears, 100 + s));
  const opts: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 2, graphOptimizationLevel: 'all' };
  const base = await ort.InferenceSession.create(encodeModel(model), opts);
  const branched = await ort.InferenceSession.create(encodeModel(branchedModel), opts);
  let t = performance.now();
  const merged = await ort.InferenceSession.create(encodeModel(mergeLora(model, 'denoiser', [{ adapter: pool[0], scale: 0.8 }])), opts);
  const mergeMs = performance.now() - t;
  t = performance.now();
  feedsOf(slots, compose(4, 4, pool));
  const feedsMs = performance.now() - t;
  const configs = [1, 4].flatMap((batch) => [0, 1, 4].map((adapters) => ({ batch, adapters })));
  const prepared = configs.map((c) => ({ ...c, x: inputs(c.batch), lora: feedsOf(slots, compose(c.batch, c.adapters, pool)) }));
  const times = prepared.map(() => ({ base: [] as number[], branched: [] as number[], merged: [] as number[] }));
  // One warm-up round, then the timed ones; every graph runs once per configuration per round.
  for (let r = 0; r <= rounds; r += 1) {
    for (const [i, c] of prepared.entries()) {
      const b = await timeRun(base, c.x);
      const l = await timeRun(branched, { ...c.x, ...c.lora });
      const m = c.adapters === 1 ? await timeRun(merged, c.x) : 0;
      if (r === 0) continue;
      times[i].base.push(b);
      times[i].branched.push(l);
      if (c.adapters === 1) times[i].merged.push(m);
    }
  }
  await Promise.all([base.release(), branched.release(), merged.release()]);
  const rows = prepared.map((c, i) => ({
    batch: c.batch,
    adapters: c.adapters,
    baseMs: median(times[i].base),
    branchedMs: median(times[i].branched),
    ...(times[i].merged.length ? { mergedMs: median(times[i].merged) } : {}),
  }));
  return { rows, layers: linears.length, feedsMs, mergeMs, rounds };
}

export function formatAdapterBench(r: AdapterBenchResult): string {
  const lines = [
    `LoRA branches on synthetic-dit-image's denoiser (${r.layers} linear layers, rank ${RANK} adapters on each; CPU, 2 threads; medians of ${r.rounds} rounds)`,
    '',
    '| batch | adapters in the batch | no branches (ms/step) | LoRA branches (ms/step) | branches / none | merged weights (ms/step) | branches / merged |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const row of r.rows) {
    const merged = row.mergedMs !== undefined ? `${row.mergedMs.toFixed(1)}` : '—';
    const vsMerged = row.mergedMs !== undefined ? `${(row.branchedMs / row.mergedMs).toFixed(2)}×` : '—';
    const what =
      row.adapters === 0 ? '0' : row.batch === 1 && row.adapters > 1 ? `${row.adapters} (stacked on the item)` : `${row.adapters} distinct`;
    lines.push(
      `| ${row.batch} | ${what} | ${row.baseMs.toFixed(1)} | ${row.branchedMs.toFixed(1)} | ${(row.branchedMs / row.baseMs).toFixed(2)}× | ${merged} | ${vsMerged} |`,
    );
  }
  lines.push(
    '',
    `Branch inputs of a batch of 4 with 4 adapters: ${r.feedsMs.toFixed(1)} ms to build (once per composition; the stage keeps recent ones).`,
    `Merging one adapter and loading its session: ${r.mergeMs.toFixed(0)} ms, and a whole copy of the weights per adapter (or combination) held.`,
  );
  return lines.join('\n');
}
