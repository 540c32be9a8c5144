import { describe, expect, it } from 'vitest';
import { encodeSafetensors, parseSafetensors } from './safetensors.js';

function withHeader(header: unknown, body = new Uint8Array(0)): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + body.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(body, 8 + json.length);
  return out;
}

describe('safetensors', () => {
  it('reads back F32, F16 and BF16 tensors and the metadata it wrote, at any offset of a Buffer', () => {
    const values = [0.5, -1.25, 3, 1024, -0.0078125, 65504];
    const bytes = encodeSafetensors(
      {
        a: { dtype: 'F32', shape: [2, 3], data: values },
        b: { dtype: 'F16', shape: [6], data: values },
        c: { dtype: 'BF16', shape: [3, 2], data: values },
        s: { dtype: 'F32', shape: [], data: [7] },
      },
      { ss_base_model_version: 'sd_v1' },
    );
    const inBuffer = Buffer.concat([Buffer.alloc(3), Buffer.from(bytes)]).subarray(3);
    const f = parseSafetensors(inBuffer, 'x.safetensors');
    expect(f.metadata).toEqual({ ss_base_model_version: 'sd_v1' });
    expect([...f.tensors.keys()]).toEqual(['a', 'b', 'c', 's']);
    expect(Array.from(f.tensors.get('a')!.data)).toEqual(values);
    expect(Array.from(f.tensors.get('b')!.data)).toEqual(values);
    expect(f.tensors.get('c')!.shape).toEqual([3, 2]);
    // bfloat16 keeps 8 bits of mantissa: 65504 rounds to 65536.
    expect(Array.from(f.tensors.get('c')!.data)).toEqual([0.5, -1.25, 3, 1024, -0.0078125, 65536]);
    expect(Array.from(f.tensors.get('s')!.data)).toEqual([7]);
    // The header is padded to 8 bytes, as the reference writer pads it.
    expect(Number(new DataView(bytes.buffer).getBigUint64(0, true)) % 8).toBe(0);
  });

  it('refuses truncated, damaged and mis-described files with the reason', () => {
    const good = encodeSafetensors({ w: { dtype: 'F32', shape: [4, 4], data: new Float32Array(16) } });
    expect(() => parseSafetensors(good.subarray(0, 5), 'f')).toThrow(/adapter f: truncated: 5 bytes/);
    expect(() => parseSafetensors(good.subarray(0, 20), 'f')).toThrow(/truncated: the header says/);
    expect(() => parseSafetensors(good.subarray(0, good.length - 4), 'f')).toThrow(/truncated: tensor w ends at byte 64 of 60/);
    const junk = new Uint8Array(64);
    new DataView(junk.buffer).setBigUint64(0, 16n, true);
    expect(() => parseSafetensors(junk, 'f')).toThrow(/damaged: the header is not JSON/);
    new DataView(junk.buffer).setBigUint64(0, 1n << 40n, true);
    expect(() => parseSafetensors(junk, 'f')).toThrow(/header length 1099511627776 is over/);
    expect(() => parseSafetensors(withHeader({ w: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8)), 'f')).toThrow(
      /tensor w: dtype I64 is not a LoRA weight type/,
    );
    expect(() => parseSafetensors(withHeader({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8)), 'f')).toThrow(
      /tensor w: 8 bytes for F32 \[3\] \(12 expected\)/,
    );
    const overlapping = withHeader(
      { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } },
      new Uint8Array(12),
    );
    expect(() => parseSafetensors(overlapping, 'f')).toThrow(/tensors a and b overlap/);
    expect(() => parseSafetensors(withHeader([1, 2]), 'f')).toThrow(/not a JSON object/);
    expect(() => parseSafetensors(withHeader({ __metadata__: { n: 3 } }), 'f')).toThrow(/__metadata__\.n is not a string/);
  });
});
