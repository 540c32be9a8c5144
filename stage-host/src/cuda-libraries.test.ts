import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { describeMissing, ldLibraryPathFor, locateLibraries, PROVIDER_LIBRARIES, pythonWheelLibDirs } from './cuda-libraries.js';

// Where `diffmesh gpu check` looks for the CUDA 13 libraries: the folders of LD_LIBRARY_PATH,
// the linker's cache, and the lib folders of Python's `nvidia-*` wheels (PyTorch's CUDA), which
// the linker does not search until LD_LIBRARY_PATH names them. The libraries here are empty
// files under their sonames in folders of the test's: found by name, as the linker finds them.
let root: string;
const saved = { LD_LIBRARY_PATH: process.env.LD_LIBRARY_PATH, PYTHONPATH: process.env.PYTHONPATH };
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'diffmesh-cuda-libraries-'));
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function hasPython(): boolean {
  try {
    execFileSync('python3', ['-c', 'pass'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('finding the CUDA 13 libraries', () => {
  it('lists the ones the CUDA provider loads: CUDA 13 runtime, cuBLAS, cuRAND, cuDNN 9 and the driver', () => {
    expect(PROVIDER_LIBRARIES.cuda.map((l) => l.soname)).toEqual([
      'libcudart.so.13',
      'libcublas.so.13',
      'libcublasLt.so.13',
      'libcurand.so.10',
      'libcudnn.so.9',
      'libcuda.so.1',
    ]);
  });

  it('finds a library in a folder of LD_LIBRARY_PATH, and says which it misses', async () => {
    const dir = path.join(root, 'ld');
    await mkdir(dir, { recursive: true });
    // A soname no machine has, so the linker cache cannot answer first.
    await writeFile(path.join(dir, 'libdiffmesh_test_cublas.so.13'), '');
    process.env.LD_LIBRARY_PATH = `/nonexistent:${dir}`;
    const [found, missing] = locateLibraries(
      [
        { soname: 'libdiffmesh_test_cublas.so.13', from: 'a test library' },
        { soname: 'libdiffmesh_test_absent.so.1', from: 'nothing' },
      ],
      [],
    );
    expect(found).toEqual({
      soname: 'libdiffmesh_test_cublas.so.13',
      from: 'a test library',
      path: path.join(dir, 'libdiffmesh_test_cublas.so.13'),
      via: 'LD_LIBRARY_PATH',
      linkable: true,
    });
    expect(missing).toEqual({ soname: 'libdiffmesh_test_absent.so.1', from: 'nothing', linkable: false });
    expect(ldLibraryPathFor([found, missing])).toBeUndefined();
  });

  it.skipIf(!hasPython())(
    "finds the libraries of Python's nvidia-* wheels (cu12 and cu13 layouts), off the linker's path until LD_LIBRARY_PATH names them",
    async () => {
      // site-packages/nvidia is a namespace package: cu12 wheels put nvidia/<component>/lib,
      // cu13 ones nvidia/cu13/lib.
      const site = path.join(root, 'site-packages');
      await mkdir(path.join(site, 'nvidia', 'cu13', 'lib'), { recursive: true });
      await mkdir(path.join(site, 'nvidia', 'cudnn', 'lib'), { recursive: true });
      await writeFile(path.join(site, 'nvidia', 'cu13', 'lib', 'libdiffmesh_test_cublasLt.so.13'), '');
      await writeFile(path.join(site, 'nvidia', 'cudnn', 'lib', 'libdiffmesh_test_cudnn.so.9'), '');
      process.env.PYTHONPATH = site;
      process.env.LD_LIBRARY_PATH = '/opt/elsewhere';
      const dirs = pythonWheelLibDirs('python3');
      // (A machine's own wheels, if any, come along.)
      expect(dirs.filter((d) => d.startsWith(site))).toEqual([
        path.join(site, 'nvidia', 'cu13', 'lib'),
        path.join(site, 'nvidia', 'cudnn', 'lib'),
      ]);
      const needs = [
        { soname: 'libdiffmesh_test_cublasLt.so.13', from: 'CUDA 13 cuBLAS' },
        { soname: 'libdiffmesh_test_cudnn.so.9', from: 'cuDNN 9' },
      ];
      const found = locateLibraries(needs);
      expect(found.map((l) => [l.via, l.linkable, l.path])).toEqual([
        ['Python wheel', false, path.join(site, 'nvidia', 'cu13', 'lib', 'libdiffmesh_test_cublasLt.so.13')],
        ['Python wheel', false, path.join(site, 'nvidia', 'cudnn', 'lib', 'libdiffmesh_test_cudnn.so.9')],
      ]);
      expect(ldLibraryPathFor(found)).toBe(
        `${path.join(site, 'nvidia', 'cu13', 'lib')}:${path.join(site, 'nvidia', 'cudnn', 'lib')}:/opt/elsewhere`,
      );
      // An error names where the missing library is, and what to set.
      expect(describeMissing(needs)).toBe(
        `libdiffmesh_test_cublasLt.so.13 (CUDA 13 cuBLAS; it is in ${path.join(site, 'nvidia', 'cu13', 'lib')}, which LD_LIBRARY_PATH does not name), ` +
          `libdiffmesh_test_cudnn.so.9 (cuDNN 9; it is in ${path.join(site, 'nvidia', 'cudnn', 'lib')}, which LD_LIBRARY_PATH does not name)`,
      );
      // With LD_LIBRARY_PATH naming them, the linker finds them.
      process.env.LD_LIBRARY_PATH = ldLibraryPathFor(found);
      expect(locateLibraries(needs).every((l) => l.linkable && l.via === 'LD_LIBRARY_PATH')).toBe(true);
    },
  );

  it('finds no wheels where Python has no nvidia package, or there is no such interpreter', () => {
    process.env.PYTHONPATH = path.join(root, 'empty');
    expect(pythonWheelLibDirs(path.join(root, 'no-python'))).toEqual([]);
  });
});
