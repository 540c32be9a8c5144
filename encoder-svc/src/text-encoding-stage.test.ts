import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelsRoot } from '@diffmesh/models';
import { ModelCatalog, SessionCache } from '@diffmesh/stage-host';
import { createTensorStore, float32View, type TensorStore } from '@diffmesh/tensor-client';
import { silentLogger } from '@diffmesh/core';
import { TextEncodingStage } from './text-encoding-stage.js';

const MODEL = 'diffmesh/tiny-shapes';
let store: TensorStore;
let sessions: SessionCache;
let stage: TextEncodingStage;

beforeAll(() => {
  store = createTensorStore({ backend: 'memory' });
  sessions = new SessionCache({ intraOpThreads: 1, interOpThreads: 1 });
  stage = new TextEncodingStage({ catalog: new ModelCatalog([defaultModelsRoot()]), sessions, store, models: [] });
});
afterAll(async () => {
  await sessions.close();
  await store.close();
});

describe('tokenizer', () => {
  it('lower-cases, splits punctuation, maps unknown words to [UNK] and pads to the text length', async () => {
    const ids = Array.from(await stage.tokenize(MODEL, 'A RED Circle, zebra!'), Number);
    expect(ids).toHaveLength(32);
    const [a, red, circle, comma, zebra, bang, ...rest] = ids;
    expect(new Set([a, red, circle]).size).toBe(3);
    expect([a, red, circle].every((id) => id > 1)).toBe(true);
    expect([comma, zebra, bang]).toEqual([1, 1, 1]); // [UNK]
    expect(rest.every((id) => id === 0)).toBe(true); // [PAD]
    expect(Array.from(await stage.tokenize(MODEL, 'a red circle'), Number).slice(0, 3)).toEqual([a, red, circle]);
  });

  it('maps synonyms to their own ids and cuts long prompts at the text length', async () => {
    const grey = Array.from(await stage.tokenize(MODEL, 'grey'), Number)[0];
    const gray = Array.from(await stage.tokenize(MODEL, 'gray'), Number)[0];
    expect(grey).not.toBe(gray);
    const long = await stage.tokenize(MODEL, Array.from({ length: 100 }, () => 'red').join(' '));
    expect(long).toHaveLength(32);
    expect(Array.from(long, Number).every((id) => id === Number(long[0]))).toBe(true);
  });

  it('gives an empty prompt all padding', async () => {
    expect(Array.from(await stage.tokenize(MODEL, '   '), Number).every((id) => id === 0)).toBe(true);
  });
});

describe('TextEncodingStage', () => {
  it('stores prompt and negative prompt embeddings, binding colours to the nouns after them', async () => {
    const result = await stage.execute(
      {
        reqId: 'r1',
        stageIndex: 0,
        stage: 'text_encoding',
        attempt: 1,
        model: MODEL,
        params: {
          prompt: 'a blue square on a red background',
          negativePrompt: '',
          width: 64,
          height: 64,
          numFrames: 1,
          numInferenceSteps: 4,
          guidanceScale: 3,
          seed: '1',
          fps: 8,
        },
        inputs: {},
        deadline: 0,
        traceContext: {},
      },
      { signal: new AbortController().signal, onProgress() {}, log: silentLogger() },
    );
    const { prompt_embeds: p, negative_prompt_embeds: n } = result.outputs;
    expect(p.shape).toEqual([1, 32, 32]);
    const hidden = float32View((await store.get(p)).data);
    const pooled = new Float32Array(32);
    for (let t = 0; t < 32; t += 1) for (let d = 0; d < 32; d += 1) pooled[d] += hidden[t * 32 + d];
    // Layout: 11 foreground colours | 11 background colours | shape(3) | size(2) | position(5).
    expect(pooled[2]).toBe(1); // foreground blue
    expect(pooled[11 + 0]).toBe(1); // background red
    expect(pooled[22 + 1]).toBe(1); // square
    expect(pooled[0]).toBe(0); // red is not the foreground
    expect(float32View((await store.get(n)).data).every((v) => v === 0)).toBe(true);
  });
});
