import {
  enumValueNames,
  loadDiffmeshPackageDefinition,
  messageCodec,
  type GenerationParams as WireGenerationParams,
  type GenerationParams__Output as WireGenerationParams__Output,
  type ObjectRef as WireObjectRef,
  type ObjectRef__Output as WireObjectRef__Output,
  type RequestContext as WireRequestContext,
  type RequestContext__Output as WireRequestContext__Output,
} from '@diffmesh/protos';
import { describe, expect, it } from 'vitest';

import { STAGE_NAMES } from '../execution-plan.js';
import { type ObjectRef } from '../object-ref.js';
import { type RequestContext } from '../request-context.js';
import { Code, DiffmeshError, REASONS } from '../errors/index.js';
import {
  DTYPES,
  REQUEST_STATUSES,
  inputImageFromWire,
  objectRefFromWire,
  objectRefToWire,
  paramsFromWire,
  paramsInputFromWire,
  paramsToWire,
  planFromWire,
  planToWire,
  requestContextFromWire,
  requestContextToWire,
  stageNameFromWire,
  stageNameToWire,
} from './convert.js';

const objectRefCodec = () => messageCodec<WireObjectRef, WireObjectRef__Output>('diffmesh.common.v1.ObjectRef');
const contextCodec = () => messageCodec<WireRequestContext, WireRequestContext__Output>('diffmesh.common.v1.RequestContext');
const paramsCodec = () => messageCodec<WireGenerationParams, WireGenerationParams__Output>('diffmesh.common.v1.GenerationParams');

function ref(name: string, over: Partial<ObjectRef> = {}): ObjectRef {
  return {
    objectId: `req-1:${name}:0f3a`,
    ownerAddress: '10.0.0.7:7070',
    ownerNodeId: 'node-a',
    shape: [1, 16, 21, 60, 104],
    dtype: 'float16',
    sizeBytes: 4_193_280,
    createdAt: 1_735_689_600_123,
    name,
    ttlMs: 600_000,
    checksum: 'crc32c:1a2b3c4d',
    ...over,
  };
}

function context(): RequestContext {
  return {
    reqId: 'req-1',
    model: 'wan2.1-t2v-1.3b',
    params: {
      prompt: 'a red fox running through snow, cinematic',
      negativePrompt: '',
      width: 832,
      height: 480,
      numFrames: 81,
      numInferenceSteps: 50,
      guidanceScale: 5.5,
      // Above 2^53: a JS number would lose it.
      seed: '18446744073709551557',
      fps: 16,
      strength: 0.65,
    },
    executionPlan: {
      model: 'wan2.1-t2v-1.3b',
      stages: [
        { name: 'text_encoding', pool: 'umt5-xxl' },
        { name: 'image_encoding', pool: 'wan-vae-encoder', requires: 'input_image' },
        { name: 'denoising', pool: 'wan-dit-1.3b', version: '^1.2.0' },
        { name: 'vae_decoding', pool: 'wan-vae', version: '' },
      ],
    },
    currentStageIndex: 2,
    refs: {
      prompt_embeds: ref('prompt_embeds', { dtype: 'float32', shape: [1, 512, 4096] }),
      latents: ref('latents', { ownerAddress: '', ttlMs: 0 }),
    },
    status: 'failed',
    createdAt: 1_735_689_600_000,
    updatedAt: 1_735_689_642_517,
    priority: -3,
    timeoutMs: 900_000,
    retryCount: 2,
    error: { code: 'UNAVAILABLE', reason: 'POOL_UNAVAILABLE', message: 'pool wan-vae has no healthy instance' },
    traceContext: {
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tracestate: 'vendor=opaque',
    },
  };
}

describe('ObjectRef', () => {
  it('round-trips through protobuf bytes', () => {
    const original = ref('latents');
    const bytes = objectRefCodec().encode(objectRefToWire(original));
    const decoded = objectRefCodec().decode(bytes);
    expect(decoded.dtype).toBe('DTYPE_FLOAT16');
    expect(decoded.sizeBytes).toBe('4193280');
    expect(objectRefFromWire(decoded)).toStrictEqual(original);
  });

  it('rejects a ref without a dtype', () => {
    const decoded = objectRefCodec().decode(objectRefCodec().encode({ objectId: 'x' }));
    expect(() => objectRefFromWire(decoded)).toThrow(DiffmeshError);
  });
});

describe('RequestContext', () => {
  it('round-trips through protobuf bytes, uint64 seed and map fields included', () => {
    const original = context();
    const bytes = contextCodec().encode(requestContextToWire(original));
    const decoded = contextCodec().decode(bytes);
    expect(decoded.params?.seed).toBe('18446744073709551557');
    expect(decoded.params?.strength).toBe(0.65);
    expect(decoded.executionPlan?.stages[1]).toMatchObject({ name: 'STAGE_NAME_IMAGE_ENCODING', requires: 'input_image' });
    expect(Object.keys(decoded.refs).sort()).toEqual(['latents', 'prompt_embeds']);
    expect(decoded.error).toMatchObject({ code: 'UNAVAILABLE', reason: 'ERROR_REASON_POOL_UNAVAILABLE' });
    expect(requestContextFromWire(decoded)).toStrictEqual(original);
  });

  it('round-trips a context with no error and no refs', () => {
    const { error: _error, ...rest } = context();
    const original: RequestContext = { ...rest, refs: {}, traceContext: {}, status: 'pending', currentStageIndex: 0 };
    const decoded = contextCodec().decode(contextCodec().encode(requestContextToWire(original)));
    expect(decoded.error).toBeNull();
    expect(requestContextFromWire(decoded)).toStrictEqual(original);
  });
});

describe('GenerationParams', () => {
  it('keeps unset fields unset and explicit zeros as set', () => {
    const decoded = paramsCodec().decode(paramsCodec().encode(paramsToWire({ prompt: 'a cat', width: 0, seed: '7' })));
    expect(paramsInputFromWire(decoded)).toStrictEqual({ prompt: 'a cat', width: 0, seed: '7' });
  });

  it('carries preview params through the wire (max_side unset = the default), and none when unset', () => {
    const round = (p: Parameters<typeof paramsToWire>[0]) =>
      paramsInputFromWire(paramsCodec().decode(paramsCodec().encode(paramsToWire(p))));
    expect(round({ prompt: 'a cat', preview: { everySteps: 2, maxSide: 64 } })).toStrictEqual({
      prompt: 'a cat',
      preview: { everySteps: 2, maxSide: 64 },
    });
    expect(round({ prompt: 'a cat' })).toStrictEqual({ prompt: 'a cat' });
    // A client that sets only every_steps gets the default side.
    const partial = paramsCodec().decode(paramsCodec().encode({ prompt: 'a cat', preview: { everySteps: 3 } }));
    expect(paramsInputFromWire(partial).preview).toStrictEqual({ everySteps: 3, maxSide: 256 });
  });

  it('carries adapters through the wire, a scale left unset as the default 1', () => {
    const round = (p: Parameters<typeof paramsToWire>[0]) =>
      paramsInputFromWire(paramsCodec().decode(paramsCodec().encode(paramsToWire(p))));
    expect(
      round({
        prompt: 'a cat',
        adapters: [
          { name: 'ink', scale: 0.5 },
          { name: 'sketch', scale: 0 },
        ],
      }).adapters,
    ).toStrictEqual([
      { name: 'ink', scale: 0.5 },
      { name: 'sketch', scale: 0 },
    ]);
    expect(round({ prompt: 'a cat', adapters: [] })).toStrictEqual({ prompt: 'a cat' });
    const partial = paramsCodec().decode(paramsCodec().encode({ prompt: 'a cat', adapters: [{ name: 'ink' }] }));
    expect(paramsInputFromWire(partial).adapters).toStrictEqual([{ name: 'ink', scale: 1 }]);
  });

  it('carries strength when set and leaves it out when not (it is set only with an input image)', () => {
    const withStrength = paramsCodec().decode(paramsCodec().encode(paramsToWire({ prompt: 'a cat', strength: 0.3 })));
    expect(withStrength.strength).toBe(0.3);
    expect(paramsInputFromWire(withStrength)).toStrictEqual({ prompt: 'a cat', strength: 0.3 });
    const without = paramsCodec().decode(paramsCodec().encode(paramsToWire({ prompt: 'a cat' })));
    expect(without.strength).toBeUndefined();
    expect(paramsInputFromWire(without)).toStrictEqual({ prompt: 'a cat' });
  });

  it('carries step caching with the fields set and leaves it out when not', () => {
    const round = (p: Parameters<typeof paramsToWire>[0]) =>
      paramsInputFromWire(paramsCodec().decode(paramsCodec().encode(paramsToWire(p))));
    expect(round({ prompt: 'a', stepCache: { threshold: 0.1, maxSkippedSteps: 3 } })).toStrictEqual({
      prompt: 'a',
      stepCache: { threshold: 0.1, maxSkippedSteps: 3 },
    });
    expect(round({ prompt: 'a', stepCache: { maxSkippedSteps: 0 } })).toStrictEqual({ prompt: 'a', stepCache: { maxSkippedSteps: 0 } });
    expect(round({ prompt: 'a', stepCache: {} })).toStrictEqual({ prompt: 'a', stepCache: {} });
    expect(round({ prompt: 'a' })).toStrictEqual({ prompt: 'a' });
  });

  it('requires every field of resolved params, naming the missing one', () => {
    const decoded = paramsCodec().decode(paramsCodec().encode(paramsToWire({ prompt: 'a cat', width: 512 })));
    const err = (() => {
      try {
        paramsFromWire(decoded);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(DiffmeshError);
    expect(err).toMatchObject({ code: Code.INVALID_ARGUMENT, reason: 'INVALID_PARAMETER', field: 'negative_prompt' });
  });

  it('carries an input image as bytes or as a ref', () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47]);
    const asData = paramsCodec().decode(
      paramsCodec().encode(paramsToWire({ prompt: 'p' }, { kind: 'data', data: png, mediaType: 'image/png' })),
    );
    const image = inputImageFromWire(asData);
    expect(image?.kind).toBe('data');
    expect(image?.kind === 'data' && [...image.data]).toEqual([...png]);
    expect(image?.kind === 'data' && image.mediaType).toBe('image/png');

    const asRef = paramsCodec().decode(paramsCodec().encode(paramsToWire({ prompt: 'p' }, { kind: 'ref', ref: ref('image') })));
    expect(inputImageFromWire(asRef)).toStrictEqual({ kind: 'ref', ref: ref('image') });
    expect(inputImageFromWire(paramsCodec().decode(paramsCodec().encode({ prompt: 'p' })))).toBeUndefined();
  });

  it('refuses an input image whose data is set and empty (found by the fuzz suite: it passed as no image)', () => {
    const empty = paramsCodec().decode(paramsCodec().encode({ prompt: 'p', inputImage: { data: Buffer.alloc(0) } }));
    expect(() => inputImageFromWire(empty)).toThrow(expect.objectContaining({ code: Code.INVALID_ARGUMENT, field: 'input_image.data' }));
  });
});

describe('ExecutionPlan', () => {
  it("round-trips a stage's requirement and refuses one it does not know, naming requires", () => {
    const plan = {
      model: 'm',
      stages: [
        { name: 'image_encoding' as const, pool: 'vae-enc', requires: 'input_image' as const },
        { name: 'denoising' as const, pool: 'dit' },
      ],
    };
    expect(planFromWire(planToWire(plan))).toStrictEqual(plan);
    const wire = planToWire(plan);
    wire.stages![0].requires = 'mask_image';
    expect(() => planFromWire(wire)).toThrow(expect.objectContaining({ code: Code.INVALID_ARGUMENT, field: 'requires' }));
  });
});

describe('enums', () => {
  it('stage names map to the wire enum and back', () => {
    // Numbers, the encoder's form (STAGE_NAME_TEXT_ENCODING = 1, STAGE_NAME_TEXT_ENCODING_2 = 2).
    expect(stageNameToWire('text_encoding')).toBe(1);
    expect(stageNameToWire('text_encoding_2')).toBe(2);
    expect(stageNameToWire('vae_decoding')).toBe(5);
    for (const name of STAGE_NAMES) expect(stageNameFromWire(stageNameToWire(name))).toBe(name);
    expect(() => stageNameFromWire('STAGE_NAME_UNSPECIFIED')).toThrow(DiffmeshError);
    const plan = { model: 'm', stages: STAGE_NAMES.map((name) => ({ name, pool: `${name}-pool` })) };
    expect(planFromWire(planToWire(plan))).toStrictEqual(plan);
  });

  it('domain lists follow the wire enums value for value', () => {
    const strip = (full: string, prefix: string) =>
      enumValueNames(full)
        .slice(1)
        .map((n) => n.slice(prefix.length).toLowerCase());
    expect(strip('diffmesh.common.v1.StageName', 'STAGE_NAME_')).toEqual([...STAGE_NAMES]);
    expect(strip('diffmesh.common.v1.Dtype', 'DTYPE_')).toEqual([...DTYPES]);
    expect(strip('diffmesh.common.v1.RequestStatus', 'REQUEST_STATUS_')).toEqual([...REQUEST_STATUSES]);
  });

  it('ErrorReason mirrors REASONS and the transport reason', () => {
    const names = enumValueNames('diffmesh.common.v1.ErrorReason');
    expect(names[0]).toBe('ERROR_REASON_UNSPECIFIED');
    const wire = names.slice(1).map((n) => n.replace(/^ERROR_REASON_/, ''));
    const expected = new Set<string>([...REASONS, 'TRANSPORT']);
    expect([...wire].sort()).toEqual([...expected].sort());
  });
});

describe('encoding without conversion (encodeReady)', () => {
  // The hot paths encode what the converters build directly; an enum by name or any other
  // value in the wrong form would be encoded wrongly without an error. Each message must
  // read back exactly as through the converting encoder.
  const same = (fullName: string, message: object): void => {
    const codec = messageCodec<object, unknown>(fullName);
    const direct = codec.decode(codec.encodeReady(message));
    expect(direct).toStrictEqual(codec.decode(codec.encode(message)));
  };

  it('gives the same bytes-as-read for a request context, refs and params', () => {
    same('diffmesh.common.v1.RequestContext', requestContextToWire(context()));
    const inline = ref('prompt_embeds', { inlineData: new Uint8Array([1, 2, 3, 250]), dtype: 'uint8', shape: [4] });
    same('diffmesh.common.v1.ObjectRef', objectRefToWire(inline));
    same(
      'diffmesh.common.v1.GenerationParams',
      paramsToWire(
        { prompt: 'p', seed: '18446744073709551557', guidanceScale: 4.5 },
        { kind: 'data', data: new Uint8Array([9, 8]), mediaType: 'image/png' },
      ),
    );
  });

  it('reads back the enums by name (encoded as their numbers)', () => {
    const codec = contextCodec();
    const back = codec.decode(codec.encodeReady(requestContextToWire(context())));
    expect(back.status).toBe('REQUEST_STATUS_FAILED');
    expect(back.error).toMatchObject({ code: 'UNAVAILABLE', reason: 'ERROR_REASON_POOL_UNAVAILABLE' });
    expect(back.executionPlan?.stages.map((s) => s.name)).toEqual([
      'STAGE_NAME_TEXT_ENCODING',
      'STAGE_NAME_IMAGE_ENCODING',
      'STAGE_NAME_DENOISING',
      'STAGE_NAME_VAE_DECODING',
    ]);
    expect(back.refs.prompt_embeds.dtype).toBe('DTYPE_FLOAT32');
    expect(back.params?.seed).toBe('18446744073709551557');
  });

  it('passes an encoded message through the gRPC serializers, and still converts objects', () => {
    type Method = { requestSerialize(v: object): Buffer; responseSerialize(v: object): Buffer };
    const stat = (loadDiffmeshPackageDefinition()['diffmesh.tensor.v1.TensorService'] as unknown as Record<string, Method>).Stat;
    const bytes = messageCodec<object>('diffmesh.tensor.v1.StatRequest').encodeReady({ objectId: 'obj-1' });
    expect(stat.requestSerialize(bytes)).toBe(bytes);
    expect(Buffer.compare(stat.requestSerialize({ objectId: 'obj-1' }), bytes)).toBe(0);
  });
});
