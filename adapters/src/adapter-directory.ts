import { randomUUID } from 'node:crypto';
import { readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ADAPTER_NAME_PATTERN, Code, DiffmeshError } from '@diffmesh/core';
import { adapterFileError } from './adapter-error.js';
import { loraFamilies, type BaseFamily } from './base-model.js';
import { readLoraFile, type LoraFormat } from './lora-file.js';
import { parseSafetensors } from './safetensors.js';

/**
 * A directory of adapters: `<name>.safetensors` files, the name being what requests give. What
 * the denoising stage serves from (`--lora-dir`) and `diffmesh adapters list|add|remove` keeps.
 */

/** Largest adapter file accepted by default (a LoRA of SDXL at rank 128 is ~ 0.9 GB; typical ones 10–200 MB). */
export const DEFAULT_MAX_ADAPTER_FILE_BYTES = 256 * 1024 * 1024;
export const ADAPTER_FILE_SUFFIX = '.safetensors';

/** An adapter file as the directory holds it. */
export interface AdapterFileInfo {
  name: string;
  file: string;
  sizeBytes: number;
  modifiedMs: number;
}

/** Refuses a name with path characters; returns the file's path in `dir`. */
export function adapterFilePath(dir: string, name: string): string {
  if (!ADAPTER_NAME_PATTERN.test(name)) {
    throw new DiffmeshError(
      Code.INVALID_ARGUMENT,
      'INVALID_PARAMETER',
      `adapter name ${JSON.stringify(name)}: letters, digits, '.', '_', '-' only (no path), not starting with '.'`,
      {
        metadata: { field: 'name' },
      },
    );
  }
  return path.join(dir, `${name}${ADAPTER_FILE_SUFFIX}`);
}

/** The adapter's file, or undefined when the directory has none by that name. */
export async function statAdapterFile(dir: string, name: string): Promise<AdapterFileInfo | undefined> {
  const file = adapterFilePath(dir, name);
  const st = await stat(file).catch(() => undefined);
  if (!st?.isFile()) return undefined;
  return { name, file, sizeBytes: st.size, modifiedMs: st.mtimeMs };
}

/** The adapters of `dir`, by name ([] for a directory that does not exist). */
export async function listAdapterFiles(dir: string): Promise<AdapterFileInfo[]> {
  const entries = await readdir(dir).catch(() => [] as string[]);
  const out: AdapterFileInfo[] = [];
  for (const e of entries.sort()) {
    if (!e.endsWith(ADAPTER_FILE_SUFFIX)) continue;
    const name = e.slice(0, -ADAPTER_FILE_SUFFIX.length);
    if (!ADAPTER_NAME_PATTERN.test(name)) continue;
    const info = await statAdapterFile(dir, name);
    if (info) out.push(info);
  }
  return out;
}

/** Reads an adapter file's bytes, refusing one over `maxBytes` before reading it. `label` names it in errors. */
export async function readAdapterBytes(
  info: AdapterFileInfo,
  maxBytes: number,
  label = `${info.name}${ADAPTER_FILE_SUFFIX}`,
): Promise<Uint8Array> {
  if (info.sizeBytes > maxBytes) {
    throw adapterFileError(label, `${info.sizeBytes} bytes, over the ${maxBytes}-byte limit of an adapter file`);
  }
  return readFile(info.file);
}

/** What a file holds, as far as it can be told without a model. */
export interface AdapterSummary {
  format: LoraFormat;
  families: BaseFamily[];
  targets: number;
  ranks: number[];
}

/** Parses and reads a LoRA file (no model): refused with the reason when it is not one. */
export function summariseAdapter(bytes: Uint8Array, label: string): AdapterSummary {
  const lora = readLoraFile(parseSafetensors(bytes, label), label);
  return {
    format: lora.format,
    families: loraFamilies(lora),
    targets: lora.targets.length,
    ranks: [...new Set(lora.targets.map((t) => t.rank))].sort((a, b) => a - b),
  };
}

/**
 * Adds a LoRA file to `dir` under `name` after checking it (size, format, keys); the copy is
 * written beside and renamed into place, so a stage watching the directory never reads half a file.
 */
export async function addAdapterFile(
  dir: string,
  source: string,
  name: string,
  maxBytes = DEFAULT_MAX_ADAPTER_FILE_BYTES,
): Promise<AdapterSummary> {
  const target = adapterFilePath(dir, name);
  const st = await stat(source);
  const bytes = await readAdapterBytes({ name, file: source, sizeBytes: st.size, modifiedMs: st.mtimeMs }, maxBytes, path.basename(source));
  const summary = summariseAdapter(bytes, path.basename(source));
  const tmp = path.join(dir, `.${name}.${randomUUID()}.tmp`);
  await writeFile(tmp, bytes);
  await rename(tmp, target);
  return summary;
}

/** Removes an adapter; false when there was none by that name. */
export async function removeAdapterFile(dir: string, name: string): Promise<boolean> {
  const info = await statAdapterFile(dir, name);
  if (!info) return false;
  await rm(info.file);
  return true;
}
