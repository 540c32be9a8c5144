import { statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { elfSharedLibrary } from '@diffmesh/testing';
import { onnxruntimeBinDir } from './execution-providers.js';
import { libraryVersion, onnxruntimeNodeVersion, providerVersion } from './onnxruntime-version.js';

// onnxruntime's libraries carry their release as a NUL-terminated "N.N.N" in .rodata; that is
// how a provider file of another release is told apart before it is loaded.
let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-ort-version-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('the onnxruntime release of a library', () => {
  it.runIf(process.platform === 'linux' && process.arch === 'x64')(
    "reads onnxruntime-node's own core library: its package's version",
    () => {
      const core = path.join(onnxruntimeBinDir(), 'libonnxruntime.so.1');
      const v = libraryVersion(core);
      expect(v.elf).toBe(true);
      expect(v.machine).toBe(62);
      expect(v.candidates).toContain(onnxruntimeNodeVersion());
      expect(providerVersion(core, onnxruntimeNodeVersion())).toBe(onnxruntimeNodeVersion());
    },
  );

  it('prefers the expected release, then one of its major version; reads a string cut by the read chunks', async () => {
    const file = path.join(root, 'a.so');
    await writeFile(file, elfSharedLibrary(['zlib', '1.3.2', 'Replay', '1.29.0', 'Failed to get device id.']));
    expect(libraryVersion(file).candidates).toEqual(['1.3.2', '1.29.0']);
    expect(providerVersion(file, '1.29.0')).toBe('1.29.0');
    // Asked about 1.30: the file says 1.29.0 (1.3.2 is some bundled library's).
    expect(providerVersion(file, '1.30.0')).toBe('1.3.2');
    const big = path.join(root, 'big.so');
    // The file is read 8 MiB at a time: the version string straddles the first boundary.
    await writeFile(big, elfSharedLibrary(['x'.repeat((8 << 20) - 5), '1.29.0']));
    expect(libraryVersion(big).candidates).toEqual(['1.29.0']);
    expect(statSync(big).size).toBeGreaterThan(8 << 20);
  });

  it('is none for a file that is not an ELF64 library, and is read again when the file changes', async () => {
    const file = path.join(root, 'b.so');
    await writeFile(file, 'version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 229780440\n');
    expect(libraryVersion(file)).toEqual({ elf: false, machine: 0, candidates: [] });
    await writeFile(file, elfSharedLibrary(['1.30.0'], 183));
    expect(libraryVersion(file)).toEqual({ elf: true, machine: 183, candidates: ['1.30.0'] });
  });
});
