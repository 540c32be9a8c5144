import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

/** A shared library a provider loads, by soname, with what provides it. */
export interface LibraryNeed {
  soname: string;
  from: string;
}

/**
 * The NVIDIA libraries onnxruntime's CUDA provider loads, for its CUDA 13 builds (onnxruntime
 * 1.27 on; read from the 1.29.0 `libonnxruntime_providers_cuda.so`: NEEDED libcublasLt.so.13,
 * libcublas.so.13, libcurand.so.10, libcudart.so.13, libcuda.so.1; cuDNN 9 is opened at run
 * time), and the TensorRT provider's (NEEDED libnvinfer.so.10, libnvonnxparser.so.10, and the
 * CUDA ones).
 */
export const PROVIDER_LIBRARIES: Record<'cuda' | 'tensorrt', LibraryNeed[]> = {
  cuda: [
    { soname: 'libcudart.so.13', from: 'CUDA 13 runtime' },
    { soname: 'libcublas.so.13', from: 'CUDA 13 cuBLAS' },
    { soname: 'libcublasLt.so.13', from: 'CUDA 13 cuBLAS' },
    { soname: 'libcurand.so.10', from: 'CUDA 13 cuRAND' },
    { soname: 'libcudnn.so.9', from: 'cuDNN 9 for CUDA 13' },
    { soname: 'libcuda.so.1', from: 'the NVIDIA driver' },
  ],
  tensorrt: [
    { soname: 'libnvinfer.so.10', from: 'TensorRT 10' },
    { soname: 'libnvinfer_plugin.so.10', from: 'TensorRT 10' },
    { soname: 'libnvonnxparser.so.10', from: 'TensorRT 10 ONNX parser' },
  ],
};

/** Where a library was found, and whether the dynamic linker would find it there. */
export interface LibraryLocation extends LibraryNeed {
  /** Its path; absent when it is nowhere here. */
  path?: string;
  /** Where it was found: a folder of `LD_LIBRARY_PATH`, the linker's cache (`ldconfig -p`), a system folder, or a Python `nvidia-*` wheel. */
  via?: 'LD_LIBRARY_PATH' | 'ldconfig' | 'system folder' | 'Python wheel';
  /** The dynamic linker finds it as things are (a wheel's folder is not on its path until `LD_LIBRARY_PATH` names it). */
  linkable: boolean;
}

/** Folders where libraries live outside the linker's cache (slim images without `ldconfig`; a CUDA toolkit not registered), and whether the linker looks there by default. */
const SYSTEM_DIRS: Array<[string, boolean]> = [
  ['/usr/lib/x86_64-linux-gnu', true],
  ['/usr/lib/aarch64-linux-gnu', true],
  ['/usr/lib64', true],
  ['/usr/lib', true],
  ['/usr/local/cuda/lib64', false],
];

let linkerCache: Map<string, string> | undefined;

/** The linker cache: soname → path (the first entry for this architecture). */
function ldconfigCache(): Map<string, string> {
  if (linkerCache) return linkerCache;
  linkerCache = new Map();
  let out = '';
  try {
    out = execFileSync('ldconfig', ['-p'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
  } catch {
    // no ldconfig on PATH (a slim image): the system folders are looked at instead
  }
  const want = process.arch === 'arm64' ? 'AArch64' : 'x86-64';
  for (const m of out.matchAll(/^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)$/gm)) {
    if (m[2].includes(want) && !linkerCache.has(m[1])) linkerCache.set(m[1], m[3]);
  }
  return linkerCache;
}

/**
 * The `lib` folders of the Python `nvidia-*` wheels (PyTorch's CUDA libraries: cu12 wheels in
 * `site-packages/nvidia/<component>/lib`, cu13 ones in `site-packages/nvidia/cu13/lib`), from
 * `python3 -c 'import nvidia'` (`$PYTHON` names another interpreter); [] without Python or wheels.
 */
export function pythonWheelLibDirs(python: string = process.env.PYTHON || 'python3'): string[] {
  const key = `${python}\0${process.env.PYTHONPATH ?? ''}`;
  const known = wheelDirsOf.get(key);
  if (known) return known;
  const dirs = readWheelLibDirs(python);
  wheelDirsOf.set(key, dirs);
  return dirs;
}

const wheelDirsOf = new Map<string, string[]>();

function readWheelLibDirs(python: string): string[] {
  let out = '';
  try {
    out = execFileSync(python, ['-c', 'import nvidia\nfor p in nvidia.__path__: print(p)'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 20_000,
    });
  } catch {
    return [];
  }
  const dirs: string[] = [];
  for (const root of out.split('\n').filter(Boolean)) {
    let subs: string[] = [];
    try {
      subs = readdirSync(root);
    } catch {
      continue;
    }
    for (const s of subs.sort()) {
      const lib = path.join(root, s, 'lib');
      if (existsSync(lib) && !dirs.includes(lib)) dirs.push(lib);
    }
  }
  return dirs;
}

/**
 * Where each library is on this machine: first where the dynamic linker looks (the folders of
 * `LD_LIBRARY_PATH`, then its cache), then the usual system folders, then the Python wheels'
 * folders (`wheelDirs`, from {@link pythonWheelLibDirs} when not given; pass [] not to run Python).
 */
export function locateLibraries(needs: readonly LibraryNeed[], wheelDirs?: readonly string[]): LibraryLocation[] {
  const ldPath = (process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean);
  let wheels = wheelDirs;
  return needs.map((need): LibraryLocation => {
    for (const dir of ldPath) {
      const p = path.join(dir, need.soname);
      if (existsSync(p)) return { ...need, path: p, via: 'LD_LIBRARY_PATH', linkable: true };
    }
    const cached = ldconfigCache().get(need.soname);
    if (cached) return { ...need, path: cached, via: 'ldconfig', linkable: true };
    for (const [dir, linkable] of SYSTEM_DIRS) {
      const p = path.join(dir, need.soname);
      if (existsSync(p)) return { ...need, path: p, via: 'system folder', linkable };
    }
    wheels ??= pythonWheelLibDirs();
    for (const dir of wheels) {
      const p = path.join(dir, need.soname);
      if (existsSync(p)) return { ...need, path: p, via: 'Python wheel', linkable: false };
    }
    return { ...need, linkable: false };
  });
}

/** The `LD_LIBRARY_PATH` that makes the libraries of `found` that are there but off the linker's path (Python wheels) linkable (theirs first, then the current one); undefined when none is needed. */
export function ldLibraryPathFor(found: readonly LibraryLocation[]): string | undefined {
  const dirs = [...new Set(found.filter((l) => !l.linkable && l.path).map((l) => path.dirname(l.path as string)))];
  if (dirs.length === 0) return undefined;
  return [...dirs, ...(process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean)].join(':');
}

/**
 * Missing libraries as an error names them: soname and what provides it, and where one is
 * that the linker does not look (a Python wheel's folder, to add to `LD_LIBRARY_PATH`).
 */
export function describeMissing(missing: readonly LibraryNeed[]): string {
  return locateLibraries(missing)
    .map((l) =>
      l.path && !l.linkable
        ? `${l.soname} (${l.from}; it is in ${path.dirname(l.path)}, which LD_LIBRARY_PATH does not name)`
        : `${l.soname} (${l.from})`,
    )
    .join(', ');
}
