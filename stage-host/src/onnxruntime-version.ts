import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** The version of the onnxruntime-node package this process loads (its core library is of the same release). */
export function onnxruntimeNodeVersion(): string {
  return (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version;
}

/**
 * Which onnxruntime release a shared library of it was built from: onnxruntime compiles its
 * version (`ORT_VERSION`, e.g. "1.29.0") into every library as a NUL-terminated string in
 * `.rodata` — the core `libonnxruntime.so.1` and the provider libraries
 * `libonnxruntime_providers_{cuda,tensorrt}.so` (checked on the official 1.29.0 and 1.30.0
 * files: one such string in each provider, the version; `libonnxruntime_providers_shared.so`
 * has none). The candidates are the `.rodata` strings that are a whole `N.N.N`.
 */
export interface LibraryVersion {
  /** The file is an ELF64 little-endian shared library (Linux x86-64/arm64). */
  elf: boolean;
  /** Its ELF machine (`e_machine`: 62 x86-64, 183 aarch64); 0 when not ELF. */
  machine: number;
  /** The `N.N.N` strings of its `.rodata`, in file order. */
  candidates: string[];
}

const cache = new Map<string, { key: string; value: LibraryVersion }>();

/** {@link LibraryVersion} of `file`, cached per process by size and modification time (a 230 MB provider reads in ~50 ms). */
export function libraryVersion(file: string): LibraryVersion {
  const st = statSync(file);
  const key = `${st.size}:${st.mtimeMs}`;
  const hit = cache.get(file);
  if (hit?.key === key) return hit.value;
  const value = readLibraryVersion(file);
  cache.set(file, { key, value });
  return value;
}

/**
 * The onnxruntime version of a provider library, as one string: `expected` when it is among
 * the candidates, else the candidate of the same major version (onnxruntime 1.x), else the
 * first; undefined when the file carries none.
 */
export function providerVersion(file: string, expected: string): string | undefined {
  const { candidates } = libraryVersion(file);
  if (candidates.includes(expected)) return expected;
  const major = expected.split('.')[0];
  return candidates.find((c) => c.split('.')[0] === major) ?? candidates[0];
}

function readLibraryVersion(file: string): LibraryVersion {
  const fd = openSync(file, 'r');
  try {
    const elf = rodataRange(fd);
    if (!elf) return { elf: false, machine: 0, candidates: [] };
    const { rodata, machine } = elf;
    const found: string[] = [];
    const chunk = Buffer.alloc(Math.min(8 << 20, rodata.size));
    let carry = '';
    for (let pos = rodata.offset, end = rodata.offset + rodata.size; pos < end;) {
      const n = readSync(fd, chunk, 0, Math.min(chunk.length, end - pos), pos);
      if (n === 0) break;
      pos += n;
      const text = carry + chunk.toString('latin1', 0, n);
      for (const m of text.matchAll(/\0(\d{1,4}\.\d{1,4}\.\d{1,4})(?=\0)/g)) if (!found.includes(m[1])) found.push(m[1]);
      // A string cut at the chunk's end is read whole with the next chunk.
      carry = text.slice(-16);
    }
    return { elf: true, machine, candidates: found };
  } finally {
    closeSync(fd);
  }
}

/** Offset and size of the `.rodata` section of an ELF64 little-endian file, and its machine; undefined for anything else. */
function rodataRange(fd: number): { rodata: { offset: number; size: number }; machine: number } | undefined {
  const ident = Buffer.alloc(64);
  if (readSync(fd, ident, 0, 64, 0) < 64) return undefined;
  // "\x7fELF", ELFCLASS64, ELFDATA2LSB
  if (ident.readUInt32BE(0) !== 0x7f454c46 || ident[4] !== 2 || ident[5] !== 1) return undefined;
  const machine = ident.readUInt16LE(0x12);
  const shoff = Number(ident.readBigUInt64LE(0x28));
  const shentsize = ident.readUInt16LE(0x3a);
  const shnum = ident.readUInt16LE(0x3c);
  const shstrndx = ident.readUInt16LE(0x3e);
  if (shentsize < 64 || shnum === 0 || shstrndx >= shnum) return undefined;
  const headers = Buffer.alloc(shentsize * shnum);
  if (readSync(fd, headers, 0, headers.length, shoff) < headers.length) return undefined;
  const section = (i: number) => ({
    name: headers.readUInt32LE(i * shentsize),
    offset: Number(headers.readBigUInt64LE(i * shentsize + 0x18)),
    size: Number(headers.readBigUInt64LE(i * shentsize + 0x20)),
  });
  const strtab = section(shstrndx);
  const names = Buffer.alloc(strtab.size);
  readSync(fd, names, 0, names.length, strtab.offset);
  for (let i = 0; i < shnum; i++) {
    const s = section(i);
    const end = names.indexOf(0, s.name);
    if (names.toString('latin1', s.name, end < 0 ? undefined : end) === '.rodata')
      return { rodata: { offset: s.offset, size: s.size }, machine };
  }
  // An ELF without section headers named .rodata (stripped of them): read it whole.
  return { rodata: { offset: 0, size: fstatSync(fd).size }, machine };
}

/** The ELF machine of a Linux build for `arch` (`process.arch`): EM_X86_64, EM_AARCH64. */
export const ELF_MACHINE: Record<string, number> = { x64: 62, arm64: 183 };

/** What the provider libraries in `dir` say about their build, file by file. */
export interface ProviderFilesVersion {
  /** The one onnxruntime version they carry; undefined when none does (or they disagree). */
  version?: string;
  /** Each library that carries a version, with it. */
  byFile: Array<{ file: string; version: string }>;
  /** Files that are not ELF64 shared libraries of this machine's architecture. */
  foreign: string[];
}

/**
 * The onnxruntime version of provider `files` (names in `dir`): the one the CUDA/TensorRT
 * libraries carry in `.rodata` (the shared bridge carries none), `expected` preferred when
 * present ({@link providerVersion}).
 */
export function providerFilesVersion(
  dir: string,
  files: readonly string[],
  expected: string,
  arch: string = process.arch,
): ProviderFilesVersion {
  const byFile: ProviderFilesVersion['byFile'] = [];
  const foreign: string[] = [];
  for (const f of files) {
    const full = path.join(dir, f);
    const lib = libraryVersion(full);
    if (!lib.elf || (ELF_MACHINE[arch] !== undefined && lib.machine !== ELF_MACHINE[arch])) {
      foreign.push(f);
      continue;
    }
    const v = providerVersion(full, expected);
    if (v) byFile.push({ file: f, version: v });
  }
  const versions = [...new Set(byFile.map((b) => b.version))];
  return { ...(versions.length === 1 ? { version: versions[0] } : {}), byFile, foreign };
}
