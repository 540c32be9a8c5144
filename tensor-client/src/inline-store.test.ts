import { describe, expect, it } from 'vitest';
import { Code } from '@diffmesh/core';
import { toBytes } from './tensor-bytes.js';
import { createTensorStore } from './factory.js';
import { InlineTensorStore } from './inline-store.js';

function stores(maxBytes = 16) {
  const inner = createTensorStore({ backend: 'memory' });
  return { inner, store: new InlineTensorStore(inner, maxBytes) };
}

const tensor = (n: number, name = 't') => ({
  requestId: 'r1',
  name,
  data: toBytes(Float32Array.from({ length: n }, (_, i) => i)),
  shape: [n],
  dtype: 'float32' as const,
});

describe('InlineTensorStore', () => {
  it('passes small objects by value and stores large ones', async () => {
    const { inner, store } = stores(16);
    const small = await store.put(tensor(4)); // 16 bytes
    const large = await store.put(tensor(5, 'big')); // 20 bytes
    expect(small.inlineData?.byteLength).toBe(16);
    expect(large.inlineData).toBeUndefined();
    expect((await inner.usage()).objects).toBe(1);
    expect(Array.from(new Float32Array((await store.get(small)).data.slice().buffer))).toEqual([0, 1, 2, 3]);
    expect((await store.get(large)).data.byteLength).toBe(20);
  });

  it('copies the bytes, so later writes to the source do not change the object', async () => {
    const { store } = stores();
    const input = tensor(2);
    const ref = await store.put(input);
    input.data.fill(0xff);
    expect(Array.from(new Float32Array((await store.get(ref)).data.slice().buffer))).toEqual([0, 1]);
  });

  it('detects corrupted inline bytes with DATA_LOSS', async () => {
    const { store } = stores();
    const ref = await store.put(tensor(2));
    ref.inlineData![0] ^= 0xff;
    await expect(store.get(ref)).rejects.toMatchObject({ code: Code.DATA_LOSS, reason: 'CHECKSUM_MISMATCH' });
  });

  it('deletes inline refs as a no-op and others in the wrapped store', async () => {
    const { inner, store } = stores(16);
    const small = await store.put(tensor(1));
    const large = await store.put(tensor(8, 'big'));
    expect(await store.delete(small)).toBe(true);
    expect(await store.delete(large)).toBe(true);
    expect((await inner.usage()).objects).toBe(0);
  });

  it('with a limit of 0 stores everything', async () => {
    const { inner, store } = stores(0);
    const ref = await store.put(tensor(1));
    expect(ref.inlineData).toBeUndefined();
    expect((await inner.usage()).objects).toBe(1);
  });
});
